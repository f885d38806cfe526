import { expect } from 'chai';
import { escapeTree, interpolateString } from '../../daemon/apps/compose/interpolate.js';
import { parseCompose, parseVolume, toBool } from '../../daemon/apps/compose/model.js';
import { rejectsApi } from '../helpers/expect.js';

const sync = (fn: () => unknown) => new Promise((resolve, reject) => {
  try {
    resolve(fn());
  } catch (err) {
    reject(err);
  }
});

describe('apps: compose interpolation', () => {
  const env = { A: 'a', E: '', N: '5' };
  const i = (s: string) => interpolateString(s, env, 'x');

  it('substitutes $NAME, ${NAME} and the default, required and alternative forms as compose does', () => {
    expect(i('$A-${A}')).to.equal('a-a');
    expect(i('${E:-d} ${E-d} ${U:-d} ${U-d}')).to.equal('d  d d');
    expect(i('${A:+alt} ${E:+alt} ${E+alt} ${U+alt}')).to.equal('alt  alt ');
    expect(i('${U:-${A}x}')).to.equal('ax');
    expect(i('$$A costs $$5')).to.equal('$A costs $5');
    expect(i('no dollars')).to.equal('no dollars');
  });

  it('refuses unset variables, required ones and malformed references', async () => {
    await rejectsApi(sync(() => i('${U}')), 400, "x: variable 'U' is not set (hostd interpolates with the app's own variables only; give a default with ${U:-value} or write the value)");
    await rejectsApi(sync(() => i('${E:?give E}')), 400, "x: required variable 'E' is missing: give E");
    await rejectsApi(sync(() => i('pa$1word')), 400, 'x: invalid interpolation: a $ not followed by a variable name or { (write $$ for a literal $)');
    await rejectsApi(sync(() => i('${A')), 400, 'x: invalid interpolation after ${A');
    await rejectsApi(sync(() => i('${A:-x')), 400, 'x: unterminated ${ in interpolation');
  });

  it('escapes every $ of a rendering so that compose substitutes nothing', () => {
    expect(escapeTree({ a: ['$x', { b: 'p$$' }], n: 1 })).to.deep.equal({ a: ['$$x', { b: 'p$$$$' }], n: 1 });
  });
});

describe('apps: compose content checks', () => {
  const env = { HOSTD_APP_DATA: '/data/app' };
  const parse = (text: string) => parseCompose(text, env);

  it('keeps what it accepts, normalises volumes to the long syntax, lists images and started services', () => {
    const app = parse(`
x-common: &common
  image: busybox:1
  restart: unless-stopped
services:
  web:
    <<: *common
    volumes: ["./data:/data:ro,z", "cache:/cache:nocopy", "/scratch", {type: tmpfs, target: /t}]
    pull_policy: always
  worker:
    extends: web
    command: ["sleep", "1"]
  extra:
    image: other:2
    profiles: [debug]
volumes:
  cache: {}
`);
    expect(app.services).to.deep.equal(['web', 'worker']);
    expect(app.images).to.deep.equal([
      { service: 'web', image: 'busybox:1', pull: 'always' },
      { service: 'worker', image: 'busybox:1', pull: 'always' },
    ]);
    expect(app.doc.services.web.volumes).to.deep.equal([
      { type: 'bind', source: './data', target: '/data', read_only: true, bind: { selinux: 'z' } },
      { type: 'volume', source: 'cache', target: '/cache', volume: { nocopy: true } },
      { type: 'volume', target: '/scratch' },
      { type: 'tmpfs', target: '/t' },
    ]);
    expect(app.doc.services.web.restart).to.equal('unless-stopped');
  });

  it('casts booleans as compose does and refuses what is not one', async () => {
    expect(toBool('Yes', 'p')).to.equal(true);
    expect(toBool('off', 'p')).to.equal(false);
    await rejectsApi(sync(() => toBool('maybe', 'p')), 400, 'p must be a boolean');
    expect(parse('services:\n  a:\n    image: x\n    privileged: "no"\n').doc.services.a.privileged).to.equal(false);
  });

  it('refuses escapes through interpolation too', async () => {
    await rejectsApi(sync(() => parseCompose('services:\n  a:\n    image: x\n    privileged: ${P:-true}\n', {})), 400, 'compose_content: services.a.privileged is refused: a privileged container has full access to the host');
    await rejectsApi(sync(() => parseCompose('services:\n  a:\n    image: x\n    network_mode: ${M:-host}\n', {})), 400, "compose_content: services.a.network_mode is refused: 'network_mode: host' shares the host's network namespace");
  });

  it('allows default capabilities and no-new-privileges, refuses the rest', async () => {
    expect(parse('services:\n  a:\n    image: x\n    cap_add: [CHOWN, cap_net_bind_service]\n    security_opt: ["no-new-privileges:true"]\n').services).to.deep.equal(['a']);
    await rejectsApi(sync(() => parse('services:\n  a:\n    image: x\n    cap_add: [ALL]\n')), 400, "compose_content: services.a.cap_add[0] is refused: capability 'ALL' is beyond Docker's default set (only those may be listed)");
    await rejectsApi(sync(() => parse('services:\n  a:\n    image: x\n    security_opt: ["apparmor=unconfined"]\n')), 400, "compose_content: services.a.security_opt[0] is refused: only 'no-new-privileges' may be set (seccomp, AppArmor and SELinux profiles stay Docker's defaults)");
  });

  it('refuses files other than the content: include, extends.file, secrets from the environment', async () => {
    await rejectsApi(sync(() => parse('include: [other.yaml]\nservices:\n  a:\n    image: x\n')), 400, "compose_content: include is refused: hostd reads no other file than the app's compose content");
    await rejectsApi(sync(() => parse('services:\n  a:\n    image: x\n    extends: {file: /etc/x.yaml, service: b}\n')), 400, "compose_content: services.a.extends.file is refused: hostd reads no other file than the app's compose content");
    await rejectsApi(sync(() => parse('services:\n  a:\n    image: x\nsecrets:\n  s: {environment: HOME}\n')), 400, "compose_content: secrets.s.environment is refused: it would read hostd's own environment");
  });

  it('names bad volume entries', async () => {
    const declared = new Set(['v']);
    await rejectsApi(sync(() => parseVolume('a:b:c:d', 'w', declared)), 400, "w: 'a:b:c:d' is not SOURCE:TARGET[:MODE]");
    await rejectsApi(sync(() => parseVolume('./a:rel', 'w', declared)), 400, "w: the target 'rel' must be an absolute path inside the container");
    await rejectsApi(sync(() => parseVolume('nope:/x', 'w', declared)), 400, "w: volume 'nope' is not declared under the top-level volumes");
    await rejectsApi(sync(() => parseVolume('~/x:/x', 'w', declared)), 400, "w is refused: '~/x' is outside the app's data directory");
    await rejectsApi(sync(() => parseVolume('./a:/a:shared', 'w', declared)), 400, "w is refused: mount propagation 'shared' would let mounts cross between the container and the host");
    await rejectsApi(sync(() => parseVolume({ type: 'volume', source: 'v', target: '/x', volume: { subpath: '../..' } }, 'w', declared)), 400, 'w.volume.subpath is refused: mount the volume, or a folder assignment');
    await rejectsApi(sync(() => parseVolume({ type: 'npipe', source: 'x', target: '/x' }, 'w', declared)), 400, "w.type is refused: 'npipe' (hostd accepts bind, volume and tmpfs)");
  });

  it('gives YAML errors with their place, and refuses several documents and duplicate keys', async () => {
    await rejectsApi(sync(() => parse('services:\n  a:\n    image: x\n  a:\n    image: y\n')), 400, 'compose_content is not valid YAML at line 4, column 3: Map keys must be unique');
    await rejectsApi(sync(() => parse('services: {}\n---\nservices: {}\n')), 400, 'compose_content must be one YAML document (found 2)');
    await rejectsApi(sync(() => parse('')), 400, 'compose_content is empty');
  });
});
