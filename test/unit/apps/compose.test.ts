/**
 * Reading an app's compose file (daemon/apps/compose/model.ts and
 * interpolate.ts): compose's interpolation with hostd's variables only, the
 * keys and values a file may hold, and the 400 naming the key and the rule
 * for whatever would reach the host.
 */
import { expect } from 'chai';
import { escapeTree, interpolateString } from '../../../daemon/apps/compose/interpolate.js';
import { parseCompose, parseVolume, toBool } from '../../../daemon/apps/compose/model.js';
import { rejectsApi } from '../../helpers/expect.js';

const sync = (fn: () => unknown) =>
  new Promise((resolve, reject) => {
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
    await rejectsApi(
      sync(() => i('${U}')),
      400,
      "x: variable 'U' is not set (hostd interpolates with the app's own variables only; give a default with ${U:-value} or write the value)",
    );
    await rejectsApi(
      sync(() => i('${E:?give E}')),
      400,
      "x: required variable 'E' is missing: give E",
    );
    await rejectsApi(
      sync(() => i('pa$1word')),
      400,
      'x: invalid interpolation: a $ not followed by a variable name or { (write $$ for a literal $)',
    );
    await rejectsApi(
      sync(() => i('${A')),
      400,
      'x: invalid interpolation after ${A',
    );
    await rejectsApi(
      sync(() => i('${A:-x')),
      400,
      'x: unterminated ${ in interpolation',
    );
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
    await rejectsApi(
      sync(() => toBool('maybe', 'p')),
      400,
      'p must be a boolean',
    );
    expect(parse('services:\n  a:\n    image: x\n    privileged: "no"\n').doc.services.a.privileged).to.equal(false);
  });

  it('refuses escapes through interpolation too', async () => {
    await rejectsApi(
      sync(() => parseCompose('services:\n  a:\n    image: x\n    privileged: ${P:-true}\n', {})),
      400,
      'compose_content: services.a.privileged is refused: a privileged container has full access to the host',
    );
    await rejectsApi(
      sync(() => parseCompose('services:\n  a:\n    image: x\n    network_mode: ${M:-host}\n', {})),
      400,
      "compose_content: services.a.network_mode is refused: 'network_mode: host' shares the host's network namespace",
    );
  });

  it('allows default capabilities and no-new-privileges, refuses the rest', async () => {
    expect(
      parse('services:\n  a:\n    image: x\n    cap_add: [CHOWN, cap_net_bind_service]\n    security_opt: ["no-new-privileges:true"]\n').services,
    ).to.deep.equal(['a']);
    await rejectsApi(
      sync(() => parse('services:\n  a:\n    image: x\n    cap_add: [ALL]\n')),
      400,
      "compose_content: services.a.cap_add[0] is refused: capability 'ALL' is beyond Docker's default set (only those may be listed)",
    );
    await rejectsApi(
      sync(() => parse('services:\n  a:\n    image: x\n    security_opt: ["apparmor=unconfined"]\n')),
      400,
      "compose_content: services.a.security_opt[0] is refused: only 'no-new-privileges' may be set (seccomp, AppArmor and SELinux profiles stay Docker's defaults)",
    );
  });

  it('refuses files other than the content: include, extends.file, secrets from the environment', async () => {
    await rejectsApi(
      sync(() => parse('include: [other.yaml]\nservices:\n  a:\n    image: x\n')),
      400,
      "compose_content: include is refused: hostd reads no other file than the app's compose content",
    );
    await rejectsApi(
      sync(() => parse('services:\n  a:\n    image: x\n    extends: {file: /etc/x.yaml, service: b}\n')),
      400,
      "compose_content: services.a.extends.file is refused: hostd reads no other file than the app's compose content",
    );
    await rejectsApi(
      sync(() => parse('services:\n  a:\n    image: x\nsecrets:\n  s: {environment: HOME}\n')),
      400,
      "compose_content: secrets.s.environment is refused: it would read hostd's own environment",
    );
  });

  it('names bad volume entries', async () => {
    const declared = new Set(['v']);
    await rejectsApi(
      sync(() => parseVolume('a:b:c:d', 'w', declared)),
      400,
      "w: 'a:b:c:d' is not SOURCE:TARGET[:MODE]",
    );
    await rejectsApi(
      sync(() => parseVolume('./a:rel', 'w', declared)),
      400,
      "w: the target 'rel' must be an absolute path inside the container",
    );
    await rejectsApi(
      sync(() => parseVolume('nope:/x', 'w', declared)),
      400,
      "w: volume 'nope' is not declared under the top-level volumes",
    );
    await rejectsApi(
      sync(() => parseVolume('~/x:/x', 'w', declared)),
      400,
      "w is refused: '~/x' is outside the app's data directory",
    );
    await rejectsApi(
      sync(() => parseVolume('./a:/a:shared', 'w', declared)),
      400,
      "w is refused: mount propagation 'shared' would let mounts cross between the container and the host",
    );
    await rejectsApi(
      sync(() => parseVolume({ type: 'volume', source: 'v', target: '/x', volume: { subpath: '../..' } }, 'w', declared)),
      400,
      'w.volume.subpath is refused: mount the volume, or a folder assignment',
    );
    await rejectsApi(
      sync(() => parseVolume({ type: 'npipe', source: 'x', target: '/x' }, 'w', declared)),
      400,
      "w.type is refused: 'npipe' (hostd accepts bind, volume and tmpfs)",
    );
  });

  const refused = (extra: string, error: string, e: Record<string, string> = env) =>
    rejectsApi(
      sync(() => parseCompose(`services:\n  a:\n    image: x\n${extra}`, e)),
      400,
      error,
    );
  const accepted = (extra: string, e: Record<string, string> = env) => parseCompose(`services:\n  a:\n    image: x\n${extra}`, e).doc.services.a;

  it('logging: local drivers only, with their size and rotation options (issue 19, item 4)', async () => {
    expect(accepted('    logging: {driver: json-file, options: {max-size: 10m, max-file: "3", compress: "true"}}\n').logging).to.deep.equal({
      driver: 'json-file',
      options: { 'max-size': '10m', 'max-file': '3', compress: 'true' },
    });
    accepted('    logging: {driver: local, options: {max-size: 1g}}\n');
    accepted('    logging: {driver: none}\n');
    await refused(
      '    logging: {driver: syslog, options: {syslog-address: "unix:///var/run/docker.sock"}}\n',
      "compose_content: services.a.logging.driver is refused: 'syslog' sends the log outside the engine's own disk (accepted: json-file, local, none)",
    );
    for (const d of ['gelf', 'fluentd', 'journald', 'splunk', 'awslogs', 'loki']) {
      await refused(
        `    logging: {driver: ${d}}\n`,
        `compose_content: services.a.logging.driver is refused: '${d}' sends the log outside the engine's own disk (accepted: json-file, local, none)`,
      );
    }
    // An option that is not size or rotation is named, its value never quoted (it may be a token).
    await refused(
      '    logging: {driver: json-file, options: {env: SECRET_TOKEN}}\n',
      "compose_content: services.a.logging.options: option 'env' is refused for log driver 'json-file' (accepted: max-size, max-file, compress)",
    );
    await refused(
      '    logging: {driver: json-file, options: {max-size: lots}}\n',
      'compose_content: services.a.logging.options.max-size must be a size such as 10m',
    );
    await refused(
      '    logging: {driver: none, options: {max-size: 1m}}\n',
      "compose_content: services.a.logging.options: option 'max-size' is refused for log driver 'none' (it takes no options)",
    );
    // Without a driver, options would go to the engine's default driver (the operator's, maybe syslog).
    await refused(
      '    logging: {options: {syslog-address: "unix:///x"}}\n',
      'compose_content: services.a.logging.options need compose_content: services.a.logging.driver (json-file or local)',
    );
    await refused('    logging: {driver: json-file, tag: x}\n', "compose_content: services.a.logging: key 'tag' is not accepted (driver, options)");
  });

  it('sysctls: namespaced ones only, in both forms (issue 19, item 5)', async () => {
    accepted('    sysctls: {net.ipv4.ip_unprivileged_port_start: 0, kernel.shmmax: 65536, fs.mqueue.msg_max: 20}\n');
    accepted('    sysctls: ["net.core.somaxconn=1024", "kernel.sem=250 32000 100 128"]\n');
    const rule =
      'accepted are net.*, fs.mqueue.*, kernel.msgmax, kernel.msgmnb, kernel.msgmni, kernel.sem, kernel.shmall, kernel.shmmax, kernel.shmmni, kernel.shm_rmid_forced';
    await refused(
      '    sysctls: {kernel.core_pattern: "|/tmp/x"}\n',
      `compose_content: services.a.sysctls: sysctl 'kernel.core_pattern' is refused: it is not namespaced (it would set the host's kernel); ${rule}`,
    );
    await refused(
      '    sysctls: ["vm.overcommit_memory=1"]\n',
      `compose_content: services.a.sysctls: sysctl 'vm.overcommit_memory' is refused: it is not namespaced (it would set the host's kernel); ${rule}`,
    );
    await refused(
      '    sysctls: {kernel.shm_next_id: 1}\n',
      `compose_content: services.a.sysctls: sysctl 'kernel.shm_next_id' is refused: it is not namespaced (it would set the host's kernel); ${rule}`,
    );
    await refused('    sysctls: {net/../kernel/core_pattern: x}\n', "compose_content: services.a.sysctls: 'net/../kernel/core_pattern' is not a sysctl name");
    await refused('    sysctls: {net.core.somaxconn: null}\n', "compose_content: services.a.sysctls: sysctl 'net.core.somaxconn' needs a value");
  });

  it("network_mode, ipc, pid, uts, cgroup: the app's own namespaces only", async () => {
    accepted('    network_mode: none\n');
    accepted('    network_mode: service:b\n    ipc: service:b\n    pid: service:b\n  b:\n    image: x\n');
    accepted('    ipc: shareable\n    cgroup: private\n');
    // Another app's network, by its engine name: the cross-app escape.
    await refused(
      '    network_mode: hostd-victim_default\n',
      "compose_content: services.a.network_mode is refused: 'hostd-victim_default' joins an engine network outside the app (accepted: none, service:<name>; declare the app's own networks under networks)",
    );
    await refused(
      '    network_mode: bridge\n',
      "compose_content: services.a.network_mode is refused: 'bridge' joins Docker's default bridge, shared with containers outside the app (leave network_mode out: the app gets its own network)",
    );
    await refused(
      '    network_mode: container:hostd-victim-db-1\n',
      "compose_content: services.a.network_mode is refused: 'container:hostd-victim-db-1' joins a container outside the app (use service:<name>)",
    );
    await refused(
      '    pid: container:hostd-victim-db-1\n',
      "compose_content: services.a.pid is refused: 'container:hostd-victim-db-1' joins a container outside the app (use service:<name>)",
    );
    await refused('    uts: host\n', "compose_content: services.a.uts is refused: 'uts: host' shares the host's uts namespace");
    await refused('    cgroup: host\n', "compose_content: services.a.cgroup is refused: 'cgroup: host' shares the host's cgroup namespace");
    await refused('    ipc: weird\n', "compose_content: services.a.ipc: 'weird' is not accepted (accepted: none, private, shareable, service:<name>)");
    await refused(
      '    networks: {default: {driver_opts: {com.docker.network.endpoint.sysctls: x}}}\n',
      "compose_content: services.a.networks.default.driver_opts is refused: endpoint driver options act on the host's network setup",
    );
    await refused(
      '    volumes_from: ["container:hostd-victim-db-1"]\n',
      "compose_content: services.a.volumes_from[0] is refused: 'container:hostd-victim-db-1' mounts the volumes of a container outside the app",
    );
    await rejectsApi(
      sync(() => parse('services:\n  a:\n    image: x\nnetworks:\n  default:\n    ipam: {config: [{subnet: 192.168.1.0/24}]}\n')),
      400,
      "compose_content: networks.default.ipam.config is refused: an app network's subnet becomes a route on the host, which could take the route of a host network; the engine picks one from its address pools",
    );
    expect(parse('services:\n  a:\n    image: x\nnetworks:\n  n: {ipam: {driver: default}, internal: true}\n').doc.networks).to.deep.equal({
      n: { ipam: { driver: 'default' }, internal: true },
    });
  });

  it('ports: on loopback or apps.publish_address, unless that is a wildcard', async () => {
    const lo = { ...env, HOSTD_PUBLISH_ADDRESS: '127.0.0.1' };
    accepted('    ports: ["127.0.0.1:8080:80", "[::1]:8081:80/udp", {target: 80, published: 8082, host_ip: 127.0.0.2}]\n', lo);
    accepted('    ports: ["8080:80", "0.0.0.0:8081:80", "80"]\n', { ...env, HOSTD_PUBLISH_ADDRESS: '0.0.0.0' });
    accepted('    ports: ["10.0.0.5:8080:80"]\n', { ...env, HOSTD_PUBLISH_ADDRESS: '10.0.0.5' });
    await refused(
      '    ports: ["0.0.0.0:8080:80"]\n',
      "compose_content: services.a.ports[0] is refused: it publishes on every host address; apps publish on loopback or on apps.publish_address (127.0.0.1), e.g. '127.0.0.1:8080:80'",
      lo,
    );
    await refused(
      '    ports: ["8080:80"]\n',
      "compose_content: services.a.ports[0] is refused: it publishes on every host address; apps publish on loopback or on apps.publish_address (127.0.0.1), e.g. '127.0.0.1:8080:80'",
      lo,
    );
    await refused(
      '    ports: [{target: 80, host_ip: 10.1.1.1}]\n',
      "compose_content: services.a.ports[0] is refused: it publishes on host address '10.1.1.1'; apps publish on loopback or on apps.publish_address (127.0.0.1), e.g. '127.0.0.1:8080:80'",
      lo,
    );
  });

  it('limits and scheduling: no priority over the host, no unkillable container', async () => {
    accepted(
      '    ulimits: {nofile: {soft: 1024, hard: 2048}, nproc: 512}\n    oom_score_adj: 500\n    cpuset: "0-1"\n    storage_opt: {size: 1G}\n    tmpfs: [/run, "/tmp:size=64m"]\n',
    );
    accepted('    oom_kill_disable: true\n    mem_limit: 256m\n');
    await refused(
      '    ulimits: {rtprio: 99}\n',
      "compose_content: services.a.ulimits.rtprio is refused: it lets the container's processes take scheduling priority over the host's",
    );
    await refused(
      '    ulimits: {nice: -20}\n',
      "compose_content: services.a.ulimits.nice is refused: it lets the container's processes take scheduling priority over the host's",
    );
    await refused(
      '    oom_score_adj: -1000\n',
      "compose_content: services.a.oom_score_adj is refused: a negative score (-1000) makes the kernel kill the host's processes before the app's",
    );
    await refused(
      '    oom_kill_disable: true\n',
      'compose_content: services.a.oom_kill_disable is refused without a memory limit (mem_limit or deploy.resources.limits.memory): the host would run out of memory instead',
    );
    await refused('    storage_opt: {dm.basesize: 1G}\n', "compose_content: services.a.storage_opt: option 'dm.basesize' is refused (only size)");
    await refused('    tmpfs: run\n', "compose_content: services.a.tmpfs[0]: 'run' must be an absolute path inside the container");
    await refused('    isolation: hyperv\n', "compose_content: services.a.isolation: only 'default' exists on Linux");
  });

  it("refuses annotations, container names and hostd's labels through deploy", async () => {
    await refused(
      '    annotations: {org.systemd.property.DeviceAllow: "\'/dev/sda rwm\'"}\n',
      "compose_content: services.a.annotations is refused: the container runtime reads annotations (runc's org.systemd.property.*, crun's run.oci.*) and they can change the container's confinement",
    );
    await refused(
      '    container_name: hostd-victim-db-1\n',
      "compose_content: services.a.container_name is refused: container names are shared by every container of the engine (one could take the name of another app's container); compose names each container after the app",
    );
    await refused(
      '    deploy: {labels: {org.hostd.app: victim}}\n',
      "compose_content: services.a.deploy.labels: label 'org.hostd.app' is refused: labels starting with org.hostd. or com.docker.compose. belong to hostd and compose",
    );
  });

  it('gives YAML errors with their place, and refuses several documents and duplicate keys', async () => {
    await rejectsApi(
      sync(() => parse('services:\n  a:\n    image: x\n  a:\n    image: y\n')),
      400,
      'compose_content is not valid YAML at line 4, column 3: Map keys must be unique',
    );
    await rejectsApi(
      sync(() => parse('services: {}\n---\nservices: {}\n')),
      400,
      'compose_content must be one YAML document (found 2)',
    );
    await rejectsApi(
      sync(() => parse('')),
      400,
      'compose_content is empty',
    );
  });
});
