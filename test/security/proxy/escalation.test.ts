/**
 * Escalation attempts of the proxy domain (`proxy.read`, `proxy.manage`)
 * against a real daemon and the real Caddy, in a lab of network namespaces
 * (test/helpers/proxy-lab.ts): the node, a client and an upstream. Inside
 * the node's namespace a service (standing for one bound to loopback) records every request it gets
 * (test/helpers/proxy-recorder.ts), and the node resolves `loopy.lab` to a
 * loopback address (/etc/netns/<ns>/hosts, which `ip netns exec` mounts
 * over /etc/hosts for the daemon).
 *
 * What must not leave the host: a sentinel file outside every root (the
 * `{file.*}` attempt), and the same secret in the daemon's environment
 * (PATH, which Caddy inherits: the `{env.*}` attempts), the host name, and
 * ACME credentials. Every attempt has its exact status; every answer, every
 * request the upstreams received and the daemon's log are checked for the
 * secrets; the host guard checks the sentinel, core_pattern and the mounts.
 *
 * Three phases on one data dir: the default settings (every attempt); the
 * two widening settings on (what they allow, and what stays refused); the
 * defaults again over entries made under the wider settings plus entries
 * written into the stored replicated configuration as an upgrade would find
 * them: nothing deleted, the refused ones left out of what Caddy
 * dials and listed in host-status, the others serving.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { operationsOfDomain } from '../../../api/registry/index.js';
import { Store } from '../../../daemon/store/store.js';
import { callFor, minimalArgs } from '../../helpers/conformance.js';
import { eventually, startDaemon, tempDir, type Reply, type TestDaemon } from '../../helpers/daemon.js';
import { HostGuard, hostMounts, readCorePattern, type Sentinel } from '../../helpers/host-guard.js';
import { ProxyLab } from '../../helpers/proxy-lab.js';
import { labMissing, proxyAvailability, proxyNodeEnv, proxyResultProblem, proxyYaml } from '../../helpers/proxy-node.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';

const D = 'esc.test';
const LOOPBACK_SVC = 9180;
const LOOPBACK_DNS = '127.0.0.1:5399';
const CLUSTER_PORT = 7788; // proxyNodeEnv's cluster listener
const ACME_SECRET = 'cf-token-Esc4l4te-never-shown';
const ONLY_REQUEST = "only the request's placeholders ({http.request.*}) are allowed";
const LOOPBACK_RULE =
  'upstreams on this host are refused unless proxy.allow_loopback_upstreams is true in the config file (an app, VM or container is reached through its target_id)';
const NEVER_PUBLISHED = "the proxy never publishes hostd's listeners or Caddy's admin endpoint";

describe('escalation: proxy (proxy.read, proxy.manage) against the real Caddy', function () {
  this.timeout(300_000);
  let lab: ProxyLab;
  let d: TestDaemon;
  let dataDir: string;
  let manage: string;
  let read: string;
  let sysRead: string;
  let upHost: string;
  let upPort: number;
  let recordFile: string;
  let sentinel: Sentinel;
  let env: Record<string, string>;
  let etcNetns: string;
  const guard = new HostGuard();
  const answers: string[] = [];
  let corePattern = '';
  let mountsBefore = new Set<string>();

  const call = async (method: string, p: string, body?: unknown, token = manage): Promise<Reply> => {
    const r = await d.request(method, `/api/v1${p}`, { token, body });
    answers.push(r.text);
    expect(proxyResultProblem(method, p, r.status, r.body), `${method} ${p}`).to.equal(undefined);
    return r;
  };
  /** One attempt: exactly this status and error. */
  const refused = async (method: string, p: string, body: unknown, status: number, error: string, token = manage) => {
    const r = await call(method, p, body, token);
    expect({ status: r.status, body: r.body }, `${method} ${p} ${JSON.stringify(body)}`).to.deep.equal({ status, body: { error } });
  };
  const entry = (over: Record<string, unknown>) => ({ subdomain: 'x', host: upHost, port: upPort, ...over });
  const recorded = (): string[] => (fs.existsSync(recordFile) ? fs.readFileSync(recordFile, 'utf8').split('\n').filter(Boolean) : []);
  const ca = () => {
    const dir = path.join(dataDir, 'proxy/ca');
    return path.join(dir, fs.readdirSync(dir).find((f) => f.endsWith('.crt'))!);
  };
  const fetchVia = async (name: string, port = 443) => {
    const r = await lab.exec(lab.client.ns, [
      'curl',
      '-sS',
      '--max-time',
      '5',
      '--cacert',
      ca(),
      '--resolve',
      `${name}:${port}:${lab.nodes[0].addr}`,
      '-H',
      'X-Client: c-1',
      '-w',
      '\n%{http_code}',
      `https://${name}:${port}/p`,
    ]);
    const i = r.stdout.lastIndexOf('\n');
    const text = r.stdout.slice(0, i);
    answers.push(text);
    let json: any = null;
    try {
      json = JSON.parse(text);
    } catch {
      /* not an upstream's answer */
    }
    return { code: r.code, status: Number(r.stdout.slice(i + 1)), text, json };
  };
  const dig = async (name: string) =>
    (await lab.exec(lab.client.ns, ['dig', '+short', '+time=3', '+tries=1', `@${lab.nodes[0].addr}`, name, 'A'])).stdout.trim();
  const digStatus = async (name: string) =>
    /status: (\w+)/.exec((await lab.exec(lab.client.ns, ['dig', '+time=3', '+tries=1', `@${lab.nodes[0].addr}`, name, 'A'])).stdout)?.[1];
  const serving = async () => {
    const s = (await call('GET', '/proxy/host-status', undefined, read)).body;
    return s.caddy_running && s.applied_version === s.config_version;
  };
  const start = async (extra: Record<string, boolean> = {}) => {
    d = await startDaemon({ dataDir, netns: lab.nodes[0].ns, env, configYaml: proxyYaml(lab.nodes[0].addr, { upstream_check_ms: 500, ...extra }) });
  };
  const apiPort = () => Number(new URL(d.url).port);
  const nothingLeaked = () => {
    for (const t of [...answers, ...recorded(), JSON.stringify(d.logs)]) {
      guard.assertNotLeaked(t);
      expect(t, 'an ACME credential').to.not.include(ACME_SECRET);
    }
    guard.assertIntact();
    // HostGuard.assertHostUnchanged compares the whole mount table; on this shared machine other tests add
    // namespaces and mounts meanwhile. The proxy has no way to mount: what is held is core_pattern, and that
    // no mount appears outside the places those tests use (/run/netns, their own /tmp dirs, docker's, cgroups).
    expect(readCorePattern(), 'kernel.core_pattern changed').to.equal(corePattern);
    const others = ['/run/', '/var/lib/docker/', '/sys/', '/proc/'];
    const added = [...hostMounts()].filter(
      (m) =>
        !mountsBefore.has(m) &&
        (m.startsWith(dataDir) || m.startsWith(path.dirname(sentinel.file)) || (!m.startsWith('/tmp/') && !others.some((o) => m.startsWith(o)))),
    );
    expect(added, 'new mounts on the host').to.deep.equal([]);
  };

  before(async function () {
    await requireRuntime(this, 'proxy', proxyAvailability, { also: labMissing });
    lab = new ProxyLab(1);
    await lab.setup();
    const n = lab.nodes[0];
    [upHost, upPort] = (await lab.startUpstream(8080)).split(':') as [string, any];
    upPort = Number(upPort);
    const work = tempDir('hostd-proxy-esc-');
    recordFile = path.join(work, 'loopback-requests.jsonl');
    // On every address of the node's namespace, so that any form of an address of the node reaches it.
    await lab.helper(n.ns, 'proxy-recorder.js', '::', String(LOOPBACK_SVC), recordFile);
    // A resolver bound to the node's loopback, answering every name with 192.0.2.77.
    await lab.helper(n.ns, 'proxy-dns-upstream.js', '127.0.0.1', '5399', '192.0.2.77');
    // A name that resolves to loopback on the node only (ip netns exec mounts this over /etc/hosts).
    etcNetns = path.join('/etc/netns', n.ns);
    fs.mkdirSync(etcNetns, { recursive: true });
    fs.writeFileSync(path.join(etcNetns, 'hosts'), '127.0.0.1 localhost\n::1 localhost\n127.0.0.7 loopy.lab\n');
    expect((await lab.exec(n.ns, ['getent', 'hosts', 'loopy.lab'])).stdout).to.match(/^127\.0\.0\.7\s/);
    [sentinel] = guard.plant(tempDir('hostd-proxy-outside-'));
    corePattern = readCorePattern();
    mountsBefore = hostMounts();
    dataDir = tempDir('hostd-proxy-esc-data-');
    // Caddy inherits PATH: an {env.PATH} that got through would carry the sentinel's secret.
    env = { ...proxyNodeEnv(n.addr, 'px-esc'), PATH: `${process.env.PATH ?? '/usr/bin:/bin'}:/nonexistent/${sentinel.secret}` };
    await start();
    manage = await d.token('px-manage', ['proxy.manage']);
    read = await d.token('px-read', ['proxy.read']);
    sysRead = await d.token('px-sys', ['system.read']);
    expect((await call('PATCH', '/proxy', { enabled: true })).status).to.equal(200);
    expect((await call('POST', '/proxy/domains', { name: D, cert_source: 'internal' })).status).to.equal(201);
    await eventually(serving, 30_000, 'Caddy serving');
  });

  after(async () => {
    await d?.stop();
    if (etcNetns) fs.rmSync(etcNetns, { recursive: true, force: true });
    await lab?.cleanup();
    guard.remove();
  });

  describe('default settings', () => {
    it("header_up: every placeholder family but the request's is 400 naming it, on create and on update", async () => {
      const fam: Array<[string, string]> = [
        ['{env.PATH}', `placeholder {env.PATH} is refused: ${ONLY_REQUEST}`],
        ['{env.HOME}', `placeholder {env.HOME} is refused: ${ONLY_REQUEST}`],
        ['{system.hostname}', `placeholder {system.hostname} is refused: ${ONLY_REQUEST}`],
        [`{file.${sentinel.file}}`, `placeholder {file.${sentinel.file}} is refused: ${ONLY_REQUEST}`],
        ['{time.now}', `placeholder {time.now} is refused: ${ONLY_REQUEST}`],
        ['{vars.x}', `placeholder {vars.x} is refused: ${ONLY_REQUEST}`],
        ['{http.vars.x}', `placeholder {http.vars.x} is refused: ${ONLY_REQUEST}`],
        ['{x{env.PATH}}', 'placeholder {x{env.PATH} is refused: placeholders do not nest (write \\{ for a literal brace)'],
        [
          '{host}',
          'placeholder {host} is refused: it is a Caddyfile shorthand, which Caddy sends as written from its JSON configuration; use {http.request.host}',
        ],
        ['{http.request.body}', 'placeholder {http.request.body} is refused: it makes Caddy read the whole request body into memory'],
      ];
      for (const [v, msg] of fam) await refused('POST', `/proxy/domains/${D}/entries`, entry({ header_up: { 'X-H': v } }), 400, `header_up.X-H: ${msg}`);
      // CR/LF were refused before these rules; still are, in names and values.
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ header_up: { 'X-H': 'a\r\nX-Injected: 1' } }),
        400,
        'header_up.X-H: the value must not contain CR, LF or NUL',
      );
      await refused('POST', `/proxy/domains/${D}/entries`, entry({ header_up: { 'X-H\r\nX-Injected': 'a' } }), 400, "argument 'header_up' has an invalid form");
      expect(
        (
          await call(
            'POST',
            `/proxy/domains/${D}/entries`,
            entry({
              subdomain: 'web',
              header_up: { 'X-Host': '{http.request.host}', 'X-Client-Was': '{http.request.header.X-Client}', 'X-Lit': '\\{env.PATH}' },
            }),
          )
        ).status,
      ).to.equal(201);
      await refused(
        'PATCH',
        `/proxy/domains/${D}/entries/web`,
        { port: upPort, header_up: { 'X-H': '{env.PATH}' } },
        400,
        `header_up.X-H: placeholder {env.PATH} is refused: ${ONLY_REQUEST}`,
      );
      const cfg = (await call('GET', '/proxy/config', undefined, read)).body;
      expect(cfg.config.domains[0].entries.map((e: any) => e.subdomain)).to.deep.equal(['web']);
    });

    it("what the upstream receives holds the request's values only: nothing of the host", async () => {
      await eventually(serving, 30_000, 'Caddy serving the entry');
      const got = await fetchVia(`web.${D}`);
      expect(got.status).to.equal(200);
      expect(got.json.headers).to.include({ 'x-host': `web.${D}`, 'x-client-was': 'c-1', 'x-lit': '{env.PATH}' });
      expect(Object.values(got.json.headers)).to.not.include(os.hostname());
      nothingLeaked();
    });

    it("upstreams: hostd's own listeners and Caddy's admin port are 400, loopback in every form is 403 naming the setting", async () => {
      const node = lab.nodes[0].addr;
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ host: '127.0.0.1', port: apiPort() }),
        400,
        `upstream host '127.0.0.1' port ${apiPort()} is a listening socket of hostd on this host; ${NEVER_PUBLISHED}`,
      );
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ host: node, port: CLUSTER_PORT }),
        400,
        `upstream host '${node}' port ${CLUSTER_PORT} is hostd's cluster listener (cluster_addr) on this host; ${NEVER_PUBLISHED}`,
      );
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ host: '::1', port: 2019 }),
        400,
        `upstream host '::1' port 2019 is Caddy's admin endpoint (its default port) on this host; ${NEVER_PUBLISHED}`,
      );
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ host: '127.0.0.1', port: LOOPBACK_SVC }),
        403,
        `host '127.0.0.1' is a loopback address; ${LOOPBACK_RULE}`,
      );
      for (const h of ['127.0.0.2', '::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '::127.0.0.1']) {
        await refused(
          'POST',
          `/proxy/domains/${D}/entries`,
          entry({ host: h, port: LOOPBACK_SVC }),
          403,
          `host '${h}' is a loopback address; ${LOOPBACK_RULE}`,
        );
      }
      for (const h of ['0.0.0.0', '::']) {
        await refused(
          'POST',
          `/proxy/domains/${D}/entries`,
          entry({ host: h, port: LOOPBACK_SVC }),
          403,
          `host '${h}' is the unspecified address (it reaches this host's loopback); ${LOOPBACK_RULE}`,
        );
      }
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ host: 'localhost', port: LOOPBACK_SVC }),
        403,
        `host 'localhost' (127.0.0.1) is a loopback address; ${LOOPBACK_RULE}`,
      );
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ host: 'loopy.lab', port: LOOPBACK_SVC }),
        403,
        `host 'loopy.lab' (127.0.0.7) is a loopback address; ${LOOPBACK_RULE}`,
      );
      for (const h of ['2130706433', '0x7f000001', '0177.0.0.1', '127.1']) {
        await refused(
          'POST',
          `/proxy/domains/${D}/entries`,
          entry({ host: h, port: LOOPBACK_SVC }),
          400,
          `host '${h}' is a numeric address form a resolver reads as IPv4 (write the address as a.b.c.d)`,
        );
      }
      for (const h of ['unix//run/hostd.sock', 'unix/', '{env.HOME}', `{file.${sentinel.file}}`]) {
        await refused('POST', `/proxy/domains/${D}/entries`, entry({ host: h }), 400, `host '${h}' must be an IP address or a hostname`);
      }
      // The proxy's own listener (the web entry's 443, on every address of the node) is a loop, on create and on update.
      const loop = `upstream host '${node}' port 443 is one of the proxy's own listeners; an entry that dials the proxy itself is a loop`;
      await refused('POST', `/proxy/domains/${D}/entries`, entry({ host: node, port: 443 }), 400, loop);
      await refused('PATCH', `/proxy/domains/${D}/entries/web`, { port: 443, host: node }, 400, loop);
      // The DNS responder's forwarders are upstreams too (it sends a client's query bytes on as they came).
      await refused(
        'PUT',
        '/proxy/dns',
        { dns_upstreams: [LOOPBACK_DNS] },
        403,
        `dns_upstreams '${LOOPBACK_DNS}': host '127.0.0.1' is a loopback address; ${LOOPBACK_RULE}`,
      );
      await refused(
        'PUT',
        '/proxy/dns',
        { dns_upstreams: [`${node}:53`] },
        400,
        `dns_upstreams '${node}:53': upstream host '${node}' port 53 is hostd's DNS responder (proxy.dns_listen) on this host; ${NEVER_PUBLISHED}`,
      );
      // An update to a refused upstream is refused the same way; the entry keeps what it had.
      await refused(
        'PATCH',
        `/proxy/domains/${D}/entries/web`,
        { port: LOOPBACK_SVC, host: '127.0.0.1' },
        403,
        `host '127.0.0.1' is a loopback address; ${LOOPBACK_RULE}`,
      );
      const cfg = (await call('GET', '/proxy/config', undefined, read)).body;
      expect(cfg.config.domains[0].entries.map((e: any) => [e.subdomain, e.host, e.port])).to.deep.equal([['web', upHost, upPort]]);
      expect(recorded(), 'requests that reached the loopback service').to.deep.equal([]);
      nothingLeaked();
    });

    it("listen ports: 22 is 403 naming the setting; ports hostd or Caddy's admin hold are 400", async () => {
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ subdomain: 'ssh', listen_port: 22 }),
        403,
        'listen_port 22 is a privileged port (below 1024) other than 80 and 443; refused unless proxy.allow_privileged_listen_ports is true in the config file',
      );
      await refused(
        'PATCH',
        `/proxy/domains/${D}/entries/web`,
        { port: upPort, new_listen_port: 25 },
        403,
        'listen_port 25 is a privileged port (below 1024) other than 80 and 443; refused unless proxy.allow_privileged_listen_ports is true in the config file',
      );
      const held = "the proxy never listens on a port hostd or Caddy's admin holds";
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ subdomain: 'adm', listen_port: 2019 }),
        400,
        `listen_port 2019 is held by Caddy's admin endpoint (its default port); ${held}`,
      );
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ subdomain: 'api', listen_port: apiPort() }),
        400,
        `listen_port ${apiPort()} is held by a listening socket of hostd; ${held}`,
      );
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ subdomain: 'clu', listen_port: CLUSTER_PORT }),
        400,
        `listen_port ${CLUSTER_PORT} is held by hostd's cluster listener (cluster_addr); ${held}`,
      );
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ subdomain: 'dns', listen_port: 53 }),
        400,
        `listen_port 53 is held by hostd's DNS responder (proxy.dns_listen); ${held}`,
      );
      for (const p of [22, 25, 2019])
        expect((await lab.exec(lab.nodes[0].ns, ['ss', '-Hltn', 'sport', `= :${p}`])).stdout.trim(), `something listens on :${p}`).to.equal('');
      nothingLeaked();
    });

    it('ACME: credentials with a placeholder are 400 naming the key only; a stored credential is in no answer, log line or activity row', async () => {
      await refused(
        'PUT',
        '/proxy/acme/credentials',
        { provider: 'cloudflare', credentials: { api_token: `{env.PATH}${ACME_SECRET}` } },
        400,
        "credentials: the value of api_token contains { or }, which Caddy's provider module would expand as a placeholder",
      );
      await refused(
        'PUT',
        '/proxy/acme/config',
        { email: '{env.PATH}@esc.test' },
        400,
        "email '{env.PATH}@esc.test' must not contain { or }: Caddy would expand it as a placeholder",
      );
      await refused(
        'PUT',
        '/proxy/acme/config',
        { email: 'ops@esc.test', dir_url: 'https://acme.esc.test/{env.PATH}' },
        400,
        "dir_url 'https://acme.esc.test/{env.PATH}' must not contain { or }: Caddy would expand it as a placeholder (percent-encode a literal brace as %7B, %7D)",
      );
      expect((await call('PUT', '/proxy/acme/credentials', { provider: 'cloudflare', credentials: { api_token: ACME_SECRET } })).status).to.equal(200);
      for (const op of operationsOfDomain('proxy').filter((o) => o.method === 'GET')) {
        const c = callFor(op, minimalArgs(op));
        await call(c.method, c.path.replace(/^\/api\/v1/, ''), undefined, read);
      }
      answers.push((await d.request('GET', '/api/v1/activity?limit=500', { token: sysRead })).text);
      answers.push(fs.readFileSync(path.join(dataDir, 'proxy/run/caddy-boot.json'), 'utf8'));
      nothingLeaked();
    });

    it('proxy.read changes nothing (403 for every mutating proxy operation); proxy.manage alone reads nothing', async () => {
      const before = (await call('GET', '/proxy/config', undefined, read)).body.version;
      for (const op of operationsOfDomain('proxy')) {
        const c = callFor(op, minimalArgs(op));
        const token = op.method === 'GET' ? manage : read;
        const r = await d.request(c.method, c.path, { token, rawBody: c.body, headers: c.body ? { 'content-type': 'application/json' } : {} });
        answers.push(r.text);
        expect(r.status, `${op.name} with ${op.method === 'GET' ? 'proxy.manage' : 'proxy.read'}: ${r.text}`).to.equal(403);
      }
      expect((await call('GET', '/proxy/config', undefined, read)).body.version).to.equal(before);
      nothingLeaked();
    });
  });

  describe('with proxy.allow_loopback_upstreams and proxy.allow_privileged_listen_ports on', () => {
    before(async () => {
      await d.stop();
      await start({ allow_loopback_upstreams: true, allow_privileged_listen_ports: true });
      await eventually(serving, 30_000, 'Caddy serving after the restart');
    });

    it("a loopback service and port 22 are allowed (the operator chose so); hostd's listeners and Caddy's admin port are still 400", async () => {
      const node = lab.nodes[0].addr;
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ host: '127.0.0.1', port: apiPort() }),
        400,
        `upstream host '127.0.0.1' port ${apiPort()} is a listening socket of hostd on this host; ${NEVER_PUBLISHED}`,
      );
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ host: '0.0.0.0', port: CLUSTER_PORT }),
        400,
        `upstream host '0.0.0.0' port ${CLUSTER_PORT} is hostd's cluster listener (cluster_addr) on this host; ${NEVER_PUBLISHED}`,
      );
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ host: node, port: 2019 }),
        400,
        `upstream host '${node}' port 2019 is Caddy's admin endpoint (its default port) on this host; ${NEVER_PUBLISHED}`,
      );
      await refused(
        'POST',
        `/proxy/domains/${D}/entries`,
        entry({ subdomain: 'adm', listen_port: 2019 }),
        400,
        "listen_port 2019 is held by Caddy's admin endpoint (its default port); the proxy never listens on a port hostd or Caddy's admin holds",
      );
      expect((await call('POST', `/proxy/domains/${D}/entries`, entry({ subdomain: 'lo', host: 'loopy.lab', port: LOOPBACK_SVC }))).status).to.equal(201);
      expect((await call('POST', `/proxy/domains/${D}/entries`, entry({ subdomain: 'ssh', listen_port: 22 }))).status).to.equal(201);
      await eventually(serving, 30_000, 'Caddy serving the new entries');
      const lo = await fetchVia(`lo.${D}`);
      expect(lo.status).to.equal(200);
      expect(lo.json.recorder).to.equal(true);
      expect(recorded()).to.have.length(1);
      expect((await lab.exec(lab.nodes[0].ns, ['ss', '-Hltn', 'sport', '= :22'])).stdout).to.include(':22');
      expect((await call('PUT', '/proxy/dns', { dns_upstreams: [LOOPBACK_DNS] })).status).to.equal(200);
      expect(await dig('elsewhere.example')).to.equal('192.0.2.77');
      nothingLeaked();
    });
  });

  describe('entries made before the rules (an upgrade, or wider settings then)', () => {
    before(async () => {
      await d.stop();
      // As an upgrade finds it: the stored replicated configuration holds entries the rules now refuse.
      const store = await Store.open(path.join(dataDir, 'db'));
      try {
        const sub = store.sub<any>('proxy-config');
        const cur = await sub.get('current');
        const dom = cur.config.domains.find((x: any) => x.name === D);
        const base = { listen_port: 443, port: upPort, host: upHost, target_id: null, upstream_scheme: '', tls_skip_verify: null, header_up: {} };
        dom.entries.push(
          { ...base, subdomain: 'leak', header_up: { 'X-Env': '{env.PATH}', 'X-Name': '{system.hostname}' } },
          { ...base, subdomain: 'clu', host: lab.nodes[0].addr, port: CLUSTER_PORT },
          { ...base, subdomain: 'adm', listen_port: 2019 },
        );
        await sub.put('current', { ...cur, version: cur.version + 1 });
      } finally {
        await store.close();
      }
      await start();
      await eventually(serving, 30_000, 'Caddy serving after the upgrade');
    });

    it('nothing is deleted; refused entries are listed in host-status naming the rule; the others keep serving', async () => {
      const cfg = (await call('GET', '/proxy/config', undefined, read)).body;
      expect(cfg.config.domains[0].entries.map((e: any) => e.subdomain).sort()).to.deep.equal(['adm', 'clu', 'leak', 'lo', 'ssh', 'web']);
      const st = (await call('GET', '/proxy/host-status', undefined, read)).body;
      expect(st.rules).to.deep.equal({ allow_loopback_upstreams: false, allow_privileged_listen_ports: false });
      // The list is this node's view: its settings, its listeners, its addresses.
      expect(st.refused_on).to.equal(d.nodeId);
      expect(st.refused).to.deep.equal([
        {
          kind: 'dns-upstream',
          name: LOOPBACK_DNS,
          rule: 'loopback-upstream',
          message: `dns_upstreams '${LOOPBACK_DNS}': host '127.0.0.1' is a loopback address; ${LOOPBACK_RULE}`,
        },
        {
          kind: 'entry',
          name: `adm.${D}:2019`,
          rule: 'held-listen-port',
          message: "listen_port 2019 is held by Caddy's admin endpoint (its default port); the proxy never listens on a port hostd or Caddy's admin holds",
        },
        {
          kind: 'entry',
          name: `clu.${D}:443`,
          rule: 'hostd-port',
          message: `upstream host '${lab.nodes[0].addr}' port ${CLUSTER_PORT} is hostd's cluster listener (cluster_addr) on this host; ${NEVER_PUBLISHED}`,
        },
        { kind: 'entry', name: `leak.${D}:443`, rule: 'header-placeholder', message: `header_up.X-Env: placeholder {env.PATH} is refused: ${ONLY_REQUEST}` },
        { kind: 'entry', name: `lo.${D}:443`, rule: 'loopback-upstream', message: `host 'loopy.lab' (127.0.0.7) is a loopback address; ${LOOPBACK_RULE}` },
        {
          kind: 'entry',
          name: `ssh.${D}:22`,
          rule: 'privileged-listen-port',
          message:
            'listen_port 22 is a privileged port (below 1024) other than 80 and 443; refused unless proxy.allow_privileged_listen_ports is true in the config file',
        },
      ]);
      // The line comes through the daemon's stdout pipe: it is waited for, not assumed there already.
      const refusedLine = await eventually(
        () => d.logs.find((l) => l.msg?.startsWith('proxy: entries refused by the proxy rules')),
        30_000,
        'the log line naming the refused entries',
      );
      expect(refusedLine.refused.map((x: any) => x.rule).sort()).to.deep.equal([
        'header-placeholder',
        'held-listen-port',
        'hostd-port',
        'loopback-upstream',
        'privileged-listen-port',
      ]);
      expect((await fetchVia(`web.${D}`)).status).to.equal(200);
      const leak = await fetchVia(`leak.${D}`);
      expect({ status: leak.status, text: leak.text }).to.deep.equal({
        status: 502,
        text: "hostd proxy: this entry is refused by the host's proxy rules (header-placeholder); GET /proxy/host-status says why\n",
      });
      expect((await fetchVia(`lo.${D}`)).status).to.equal(502);
      expect(recorded(), 'no new request reached the loopback service').to.have.length(1);
      for (const p of [22, 2019])
        expect((await lab.exec(lab.nodes[0].ns, ['ss', '-Hltn', 'sport', `= :${p}`])).stdout.trim(), `something listens on :${p}`).to.equal('');
      // The refused forwarder is not used: no forwarder is left, so a name outside the zones fails.
      expect(await digStatus('elsewhere.example')).to.equal('SERVFAIL');
      expect((await call('GET', '/proxy/config', undefined, read)).body.config.dns_upstreams).to.deep.equal([LOOPBACK_DNS]);
      nothingLeaked();
    });

    it('a refused entry serves again once a call fixes it; a call that keeps the refused part is refused', async () => {
      await refused('PATCH', `/proxy/domains/${D}/entries/leak`, { port: upPort }, 400, `header_up.X-Env: placeholder {env.PATH} is refused: ${ONLY_REQUEST}`);
      const ok = await call('PATCH', `/proxy/domains/${D}/entries/leak`, { port: upPort, header_up: { 'X-Env': 'fixed' } });
      expect(ok.status, ok.text).to.equal(200);
      await eventually(async () => (await fetchVia(`leak.${D}`)).status === 200, 30_000, 'the fixed entry to serve');
      const st = (await call('GET', '/proxy/host-status', undefined, read)).body;
      expect(st.refused.map((x: any) => x.name)).to.deep.equal([LOOPBACK_DNS, `adm.${D}:2019`, `clu.${D}:443`, `lo.${D}:443`, `ssh.${D}:22`]);
      nothingLeaked();
      guard.assertNoRootProcess(sentinel.secret);
    });
  });
});
