/**
 * The proxy on one node (a cluster of one holds the lease), against the real
 * Caddy, in a lab of network namespaces: the node, a client and an upstream
 * (test/helpers/proxy-lab.ts). Exact statuses and bodies through the API;
 * traffic from the client namespace only.
 */
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { startDaemon, eventually, hostctl, type TestDaemon, type Reply } from '../../helpers/daemon.js';
import { LAN_DEV, ProxyLab } from '../../helpers/proxy-lab.js';
import { labMissing, proxyAvailability, proxyNodeEnv, proxyResultProblem, proxyYaml } from '../../helpers/proxy-node.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';

const D = 'lab.test';
const SECRET = 'cf-token-Zq8x1w-very-secret';

describe('proxy on one node (Caddy, namespaces)', function () {
  this.timeout(120_000);
  let lab: ProxyLab;
  let d: TestDaemon;
  let token: string;
  let admin: string;
  let upHost: string;
  let upPort: number;

  /** A call with the suite's token; every success answer must fit its result schema. */
  const api = async (method: string, p: string, body?: unknown): Promise<Reply> => {
    const r = await d.request(method, `/api/v1${p}`, { token, body });
    expect(proxyResultProblem(method, p, r.status, r.body), `${method} ${p}`).to.equal(undefined);
    return r;
  };
  const expectError = (r: Reply, status: number, error: string) => {
    expect({ status: r.status, body: r.body }).to.deep.equal({ status, body: { error } });
  };
  /** The internal CA's root this node made (one per seed: a node outside a cluster has one). */
  const ca = () => {
    const dir = path.join(d.dataDir, 'proxy/ca');
    const roots = fs.readdirSync(dir).filter((f) => f.endsWith('.crt'));
    expect(roots, 'one internal CA root').to.have.length(1);
    return path.join(dir, roots[0]);
  };
  /** curl from the client namespace to https://<name>:<port>/ resolved to `addr`. */
  const fetchVia = async (name: string, port = 443, addr = lab.nodes[0].addr, extra: string[] = []) => {
    const r = await lab.exec(lab.client.ns, [
      'curl',
      '-sS',
      '--max-time',
      '5',
      '--cacert',
      ca(),
      '--resolve',
      `${name}:${port}:${addr}`,
      ...extra,
      '-w',
      '\n%{http_code}',
      `https://${name}:${port}/`,
    ]);
    const i = r.stdout.lastIndexOf('\n');
    const text = r.stdout.slice(0, i);
    let json: any = null;
    try {
      json = JSON.parse(text);
    } catch {
      /* not the upstream */
    }
    return { code: r.code, status: Number(r.stdout.slice(i + 1)), text, json, stderr: r.stderr };
  };
  const nsExec = (args: string[]) => lab.exec(lab.nodes[0].ns, args);

  before(async function () {
    await requireRuntime(this, 'proxy', proxyAvailability, { also: labMissing });
    lab = new ProxyLab(1);
    await lab.setup();
    [upHost, upPort] = (await lab.startUpstream(8080)).split(':') as [string, any];
    upPort = Number(upPort);
    const n = lab.nodes[0];
    d = await startDaemon({ netns: n.ns, env: proxyNodeEnv(n.addr, 'px-one'), configYaml: proxyYaml(n.addr, { upstream_check_ms: 500 }) });
    token = await d.token('px', ['proxy.read', 'proxy.manage']);
    admin = await d.token('px-admin', ['system.read']);
  });

  after(async () => {
    await d?.stop();
    await lab?.cleanup();
  });

  it('host-status: Caddy version, a node alone holds the lease, nothing missing, not serving while disabled', async () => {
    const r = await api('GET', '/proxy/host-status');
    expect(r.status).to.equal(200);
    expect(r.body).to.include({ caddy_version: '2.6.2', holding: true, holder: d.nodeId, epoch: 0, enabled: false, serving: false, caddy_running: false });
    expect(r.body.runtimes.map((x: any) => [x.name, x.available])).to.deep.equal([
      ['caddy', true],
      ['setpriv', true],
      ['ip', true],
      ['arping', true],
    ]);
    expect(r.body.missing).to.deep.equal([]);
    expect(r.body.dns).to.deep.equal({ listen: `${lab.nodes[0].addr}:53`, running: false, error: null });
    // /proxy/config says the same of the holder (it said null on a node alone).
    expect((await api('GET', '/proxy/config')).body).to.include({ holder: d.nodeId, holding_here: true, epoch: 0 });
  });

  it('PATCH /proxy enables (idempotent): Caddy runs; domains and entries are checked', async () => {
    for (let i = 0; i < 2; i++) {
      const r = await api('PATCH', '/proxy', { enabled: true });
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.include({ enabled: true, serving: true, holder: d.nodeId });
    }
    expect((await api('GET', '/proxy/host-status')).body.caddy_running).to.equal(true);
    expectError(
      await api('POST', '/proxy/domains', { name: 'Bad_Name.test', cert_source: 'internal' }),
      400,
      "argument 'name' must be a DNS name of at least 2 labels (letters, digits and inner hyphens, 1-63 characters per label, 253 in all)",
    );
    expectError(
      await api('POST', '/proxy/domains', { name: 'single', cert_source: 'internal' }),
      400,
      "argument 'name' must be a DNS name of at least 2 labels (letters, digits and inner hyphens, 1-63 characters per label, 253 in all)",
    );
    expectError(
      await api('POST', '/proxy/domains', { name: 'pub.test', cert_source: 'cloudflare' }),
      400,
      "cert_source 'cloudflare': this Caddy build (2.6.2) has no module dns.providers.cloudflare; ACME DNS-01 with cloudflare needs a Caddy built with it (xcaddy build --with github.com/caddy-dns/cloudflare)",
    );
    const c = await api('POST', '/proxy/domains', { name: D, cert_source: 'internal' });
    expect(c.status, c.text).to.equal(201);
    expect(c.body.domain).to.deep.equal({ name: D, cert_source: 'internal', entries: [] });
    expectError(await api('POST', '/proxy/domains', { name: D, cert_source: 'internal' }), 409, `domain '${D}' already exists`);
    expectError(
      await api('POST', '/proxy/domains/nowhere.test/entries', { subdomain: 'x', port: 80, host: '10.0.0.1' }),
      404,
      "domain 'nowhere.test' not found",
    );
    expectError(await api('POST', `/proxy/domains/${D}/entries`, { subdomain: 'x', port: 80 }), 400, 'host is required when no target_id is given');
    expectError(
      await api('POST', `/proxy/domains/${D}/entries`, { subdomain: 'a.b', port: 80, host: '10.0.0.1' }),
      400,
      "argument 'subdomain' must be one DNS label (letters, digits and inner hyphens, 1-63 characters)",
    );
    expectError(
      await api('POST', `/proxy/domains/${D}/entries`, { subdomain: 'x', port: 80, target_id: 'vm:999' }),
      404,
      "target 'vm:999' not found (GET /proxy/upstreams lists the apps, VMs and containers)",
    );
    const badHeader = await api('POST', `/proxy/domains/${D}/entries`, { subdomain: 'x', port: 80, host: '10.0.0.1', header_up: { 'Bad Header': 'v' } });
    expect(badHeader.status).to.equal(400);
    expect(badHeader.body.error).to.include('header_up');
  });

  it('an entry serves https://web.<domain>/ through Caddy with header_up set and cleared', async () => {
    const r = await api('POST', `/proxy/domains/${D}/entries`, {
      subdomain: 'web',
      host: upHost,
      port: upPort,
      header_up: { 'X-Via-Hostd': '{http.request.host}', 'User-Agent': '' },
    });
    expect(r.status, r.text).to.equal(201);
    expect(r.body.entry).to.deep.equal({
      domain: D,
      subdomain: 'web',
      fqdn: `web.${D}`,
      listen_port: 443,
      port: upPort,
      host: upHost,
      target_id: null,
      upstream_scheme: '',
      effective_scheme: 'http',
      tls_skip_verify: null,
      effective_tls_skip_verify: false,
      header_up: { 'X-Via-Hostd': '{http.request.host}', 'User-Agent': '' },
    });
    const got = await fetchVia(`web.${D}`);
    expect(got.status, got.stderr).to.equal(200);
    expect(got.json.headers['x-via-hostd']).to.equal(`web.${D}`);
    expect(got.json.headers).to.not.have.property('user-agent');
    expectError(
      await api('POST', `/proxy/domains/${D}/entries`, { subdomain: 'web', host: upHost, port: upPort, listen_port: 0 }),
      409,
      `entry web.${D} on listen port 443 already exists; two entries may share a subdomain only on different listen ports`,
    );
    const alt = await api('POST', `/proxy/domains/${D}/entries`, { subdomain: 'web', host: upHost, port: upPort, listen_port: 8443 });
    expect(alt.status, alt.text).to.equal(201);
    expect((await fetchVia(`web.${D}`, 8443)).status).to.equal(200);
  });

  it('PATCH moves an entry between subdomains, listen ports and domains; 409 on a taken place', async () => {
    expect((await api('POST', '/proxy/domains', { name: 'other.test', cert_source: 'internal' })).status).to.equal(201);
    expectError(
      await api('PATCH', `/proxy/domains/${D}/entries/web`, { port: upPort, listen_port: 8443, new_listen_port: 443 }),
      409,
      `entry web.${D} on listen port 443 already exists; two entries may share a subdomain only on different listen ports`,
    );
    expectError(await api('PATCH', `/proxy/domains/${D}/entries/nope`, { port: upPort }), 404, `entry 'nope.${D}' on listen port 443 not found`);
    const mv = await api('PATCH', `/proxy/domains/${D}/entries/web`, {
      port: upPort,
      listen_port: 8443,
      new_subdomain: 'app',
      new_domain: 'other.test',
      new_listen_port: 9443,
    });
    expect(mv.status, mv.text).to.equal(200);
    expect(mv.body.entry).to.include({ domain: 'other.test', subdomain: 'app', listen_port: 9443 });
    expect((await fetchVia('app.other.test', 9443)).status).to.equal(200);
    const gone = await fetchVia(`web.${D}`, 8443);
    expect(gone.code).to.not.equal(0); // nothing listens on 8443 any more
    // Rename a domain: its entries follow; delete: they go too.
    const ren = await api('PATCH', '/proxy/domains/other.test', { new_name: 'renamed.test', cert_source: 'internal' });
    expect(ren.status, ren.text).to.equal(200);
    expect(ren.body.domain.entries.map((e: any) => e.fqdn)).to.deep.equal(['app.renamed.test']);
    expect((await fetchVia('app.renamed.test', 9443)).status).to.equal(200);
    const del = await api('DELETE', '/proxy/domains/renamed.test');
    expect(del.status).to.equal(200);
    expect(del.body).to.include({ deleted: 'renamed.test', entries_deleted: 1 });
    expectError(await api('DELETE', '/proxy/domains/renamed.test'), 404, "domain 'renamed.test' not found");
  });

  it('a configuration Caddy refuses is a 400 naming its reason; the last good one keeps serving; an incident is captured', async () => {
    await lab.helper(lab.nodes[0].ns, 'proxy-occupy.js', '9099');
    const before = (await api('GET', '/proxy/config')).body.version;
    const applies = async (result: string) => {
      const r = await d.request('GET', '/api/v1/metrics', { token: admin });
      expect(r.status).to.equal(200);
      const m = new RegExp(`^hostd_proxy_config_apply_duration_seconds_count\\{result="${result}"\\} (\\d+)$`, 'm').exec(r.text);
      return m ? Number(m[1]) : 0;
    };
    const [loadedBefore, refusedBefore] = [await applies('loaded'), await applies('refused')];
    expect(loadedBefore, 'the entries served so far were loads into Caddy').to.be.greaterThan(0);
    // Several refusals, each followed by several handshakes: Caddy 2.6 can leave a refused configuration's
    // sockets listening beside the good ones (hostd restarts it on the last good one; docs/proxy.md).
    for (let round = 0; round < 3; round++) {
      const r = await api('POST', `/proxy/domains/${D}/entries`, { subdomain: 'taken', host: upHost, port: upPort, listen_port: 9099 });
      expectError(
        r,
        400,
        'Caddy refused the configuration: loading config: loading new config: http app module: start: listening on :9099: listen tcp :9099: bind: address already in use',
      );
      expect((await api('GET', '/proxy/config')).body.version).to.equal(before);
      const listening = (await nsExec(['ss', '-Hltn', 'sport', '= :443'])).stdout.trim().split('\n');
      expect(listening, 'sockets listening on :443').to.have.length(1);
      for (let i = 0; i < 8; i++) expect((await fetchVia(`web.${D}`)).status, `round ${round}, request ${i}`).to.equal(200);
    }
    // The metrics saw each refusal as an apply that Caddy refused, and the restores are not loads of a new configuration.
    expect(await applies('refused')).to.equal(refusedBefore + 3);
    const list = await api('GET', '/proxy/incidents');
    const inc = list.body.incidents.find((i: any) => i.kind === 'config_refused');
    expect(inc.summary).to.include('address already in use');
    const one = await api('GET', `/proxy/incidents/${inc.incident_id}`);
    expect(one.status).to.equal(200);
    expect(one.body).to.include.keys('lease', 'config', 'config_version', 'caddy_config', 'caddy_log', 'details');
    expect(one.body.lease).to.deep.equal({ holder: d.nodeId, epoch: 0, holding: true });
    expect(one.body.caddy_log.length).to.be.greaterThan(0);
    expectError(await api('GET', '/proxy/incidents/inc_nope'), 404, "incident 'inc_nope' not found");
  });

  it('HTTP/3 on: Alt-Svc and a UDP listener; off: neither', async () => {
    const on = await api('PATCH', '/proxy/http3', { enabled: true });
    expect(on.status).to.equal(200);
    expect(on.body).to.include({ http3: true });
    // Caddy starts its QUIC server just after the load returns.
    await eventually(
      async () => (await fetchVia(`web.${D}`, 443, lab.nodes[0].addr, ['-D', '-', '-o', '/dev/null'])).text.toLowerCase().includes('alt-svc: h3=":443"'),
      5000,
      'Alt-Svc: h3',
    );
    expect((await nsExec(['ss', '-Hlun', 'sport', '= :443'])).stdout).to.include(':443');
    expect((await api('PATCH', '/proxy/http3', { enabled: false })).body).to.include({ http3: false });
    const head2 = await fetchVia(`web.${D}`, 443, lab.nodes[0].addr, ['-D', '-', '-o', '/dev/null']);
    expect(head2.text.toLowerCase()).to.not.include('alt-svc');
    expect((await nsExec(['ss', '-Hlun', 'sport', '= :443'])).stdout.trim()).to.equal('');
  });

  it('certificates: read from Caddy per domain; renewal gives a new one that Caddy serves', async () => {
    const r = await api('GET', '/proxy/certs');
    expect(r.status).to.equal(200);
    const c = r.body.certs.find((x: any) => x.domain === D);
    expect(c).to.include({ cert_source: 'internal', subject: `*.${D}`, issuer_kind: 'internal', managed: true, last_error: null });
    expect(c.issuer).to.include('Caddy Local Authority');
    expect(new Date(c.not_after).getTime()).to.be.greaterThan(Date.now());
    const rn = await api('POST', `/proxy/domains/${D}/certs/renew`);
    expect(rn.status, rn.text).to.equal(200);
    expect(rn.body.previous_serial).to.equal(c.serial);
    expect(rn.body.cert.serial).to.not.equal(c.serial);
    // What a client is served is what GET /proxy/certs reports, and not the old one.
    const served = async () =>
      (
        await lab.exec(lab.client.ns, [
          'sh',
          '-c',
          `echo | openssl s_client -connect ${lab.nodes[0].addr}:443 -servername web.${D} 2>/dev/null | openssl x509 -noout -serial`,
        ])
      ).stdout.trim();
    await eventually(
      async () => {
        const now = (await api('GET', '/proxy/certs')).body.certs.find((x: any) => x.domain === D).serial;
        return now !== c.serial && (await served()) === `serial=${now}`;
      },
      10_000,
      'the served certificate to be the renewed one',
    );
    expectError(await api('POST', '/proxy/domains/nope.test/certs/renew'), 404, "domain 'nope.test' not found");
  });

  it('ACME: credentials go to the secret store, never into a response, the configuration, the activity log or hostd log; providers tell the truth', async () => {
    const put = await api('PUT', '/proxy/acme/credentials', { provider: 'cloudflare', credentials: { api_token: SECRET } });
    expect(put.status, put.text).to.equal(200);
    expect(put.body).to.deep.equal({ provider: 'cloudflare', keys: ['api_token'], stored: true, available: false });
    expectError(
      await api('PUT', '/proxy/acme/credentials', { provider: 'Cloud Flare', credentials: { a: 'b' } }),
      400,
      "provider 'Cloud Flare' must be 1-64 of [a-z0-9_]",
    );
    const pv = await api('GET', '/proxy/providers');
    const cf = pv.body.providers.find((p: any) => p.name === 'cloudflare');
    expect(cf).to.deep.equal({
      name: 'cloudflare',
      module: 'dns.providers.cloudflare',
      available: false,
      credentials_stored: true,
      reason:
        'this Caddy build (2.6.2) has no module dns.providers.cloudflare; ACME DNS-01 with cloudflare needs a Caddy built with it (xcaddy build --with github.com/caddy-dns/cloudflare)',
    });
    expect(pv.body.internal).to.deep.equal({ available: true, reason: null });
    expectError(await api('PUT', '/proxy/acme/config', { email: 'not-an-email' }), 400, "email 'not-an-email' is not an email address");
    expectError(await api('PUT', '/proxy/acme/config', { email: 'ops@lab.test', dir_url: 'http://x' }), 400, "dir_url 'http://x' must be an https URL");
    const ok = await api('PUT', '/proxy/acme/config', { email: 'ops@lab.test', dir_url: '', dns_resolvers: ['192.0.2.53'] });
    expect(ok.status, ok.text).to.equal(200);
    expect(ok.body.acme).to.deep.equal({ email: 'ops@lab.test', dir_url: '', dns_resolvers: ['192.0.2.53'] });
    const everywhere = [
      (await api('GET', '/proxy/config')).text,
      (await d.request('GET', '/api/v1/activity?limit=200', { token: admin })).text,
      (await api('GET', '/proxy/diagnostics')).text,
      JSON.stringify(d.logs),
      fs.readFileSync(path.join(d.dataDir, 'proxy/run/caddy-boot.json'), 'utf8'),
    ];
    for (const t of everywhere) expect(t).to.not.include(SECRET);
    const onDisk = fs.readdirSync(path.join(d.dataDir, 'secrets', 'proxy-acme'));
    expect(onDisk).to.deep.equal(['cloudflare']);
    expect(fs.readFileSync(path.join(d.dataDir, 'secrets', 'proxy-acme', 'cloudflare')).includes(Buffer.from(SECRET))).to.equal(false);
  });

  it('floating address: claimed on the holder, answered through, moved off on clear; a host that still answers for it blocks the claim', async () => {
    expectError(await api('PUT', '/proxy/vip', { vip: lab.vip }), 400, 'vip_iface is required when a vip is set');
    expectError(await api('PUT', '/proxy/vip', { vip: 'x', vip_iface: LAN_DEV }), 400, "argument 'vip' must be an IPv4 address, or empty");
    expectError(await api('PUT', '/proxy/vip', { vip: lab.vip, vip_iface: 'nope0' }), 400, "vip_iface 'nope0': no such interface on this node");
    // Someone else (the client namespace) answers for the address: the node must not take it.
    await lab.exec(lab.client.ns, ['ip', 'addr', 'add', `${lab.vip}/24`, 'dev', LAN_DEV]);
    const r = await api('PUT', '/proxy/vip', { vip: lab.vip, vip_iface: LAN_DEV, vip_prefix: 24 });
    expect(r.status, r.text).to.equal(200);
    expect(r.body.vip).to.deep.equal({ vip: lab.vip, vip_iface: LAN_DEV, vip_prefix: 24, vip6: null, vip6_prefix: null });
    await eventually(
      async () => (await api('GET', '/proxy/host-status')).body.vip.error?.includes('is still answered by'),
      10_000,
      'the conflict to be reported',
    );
    expect((await nsExec(['ip', '-j', 'addr', 'show', 'dev', LAN_DEV])).stdout).to.not.include(`"${lab.vip}"`);
    expect((await api('GET', '/proxy/incidents')).body.incidents.map((i: any) => i.kind)).to.include('vip_conflict');
    await lab.exec(lab.client.ns, ['ip', 'addr', 'del', `${lab.vip}/24`, 'dev', LAN_DEV]);
    await eventually(async () => (await api('GET', '/proxy/host-status')).body.vip.claimed, 10_000, 'the claim once the address is free');
    expect((await fetchVia(`web.${D}`, 443, lab.vip)).status).to.equal(200);
    const clear = await api('PUT', '/proxy/vip', {});
    expect(clear.body.vip).to.equal(null);
    await eventually(async () => !(await nsExec(['ip', '-j', 'addr', 'show', 'dev', LAN_DEV])).stdout.includes(`"${lab.vip}"`), 10_000, 'the address removed');
  });

  it('DNS: base-domain names answer with the floating address (or the holder), other names go to the upstreams', async () => {
    const node = lab.nodes[0].addr;
    const dig = async (name: string) => (await lab.exec(lab.client.ns, ['dig', '+short', '+time=3', '+tries=1', `@${node}`, name, 'A'])).stdout.trim();
    const digStatus = async (name: string) =>
      /status: (\w+)/.exec((await lab.exec(lab.client.ns, ['dig', '+time=3', '+tries=1', `@${node}`, name, 'A'])).stdout)?.[1];
    expect(await dig(`web.${D}`)).to.equal(node);
    expect(await digStatus('elsewhere.example')).to.equal('SERVFAIL');
    await lab.helper(lab.upstream.ns, 'proxy-dns-upstream.js', lab.upstream.addr, '5353', '192.0.2.77');
    expectError(
      await api('PUT', '/proxy/dns', { dns_upstreams: ['not-an-ip'] }),
      400,
      "dns_upstreams: 'not-an-ip' is not an IP address (optionally with :port)",
    );
    const set = await api('PUT', '/proxy/dns', { dns_upstreams: [`${lab.upstream.addr}:5353`] });
    expect(set.status, set.text).to.equal(200);
    expect(set.body.dns_upstreams).to.deep.equal([`${lab.upstream.addr}:5353`]);
    expect(await dig('elsewhere.example')).to.equal('192.0.2.77');
    const v6 = 'fd00:5eed::50';
    expect((await api('PUT', '/proxy/vip', { vip: lab.vip, vip_iface: LAN_DEV, vip_prefix: 24, vip6: v6, vip6_prefix: 64 })).status).to.equal(200);
    expect(await dig(`web.${D}`)).to.equal(lab.vip);
    expect((await lab.exec(lab.client.ns, ['dig', '+short', '+time=3', '+tries=1', `@${node}`, `web.${D}`, 'AAAA'])).stdout.trim()).to.equal(v6);
    await eventually(async () => (await nsExec(['ip', '-j', 'addr', 'show', 'dev', LAN_DEV])).stdout.includes(`"${v6}"`), 10_000, 'the IPv6 floating address');
    expect((await nsExec(['cat', `/proc/sys/net/ipv6/conf/${LAN_DEV}/ndisc_notify`])).stdout.trim()).to.equal('1');
  });

  it('diagnostics: Caddy state, versions, listeners, upstream reachability per entry; an upstream that fails its checks is an incident', async () => {
    expect((await api('POST', `/proxy/domains/${D}/entries`, { subdomain: 'dead', host: lab.upstream.addr, port: 9 })).status).to.equal(201);
    await eventually(
      async () => (await api('GET', '/proxy/incidents')).body.incidents.some((i: any) => i.kind === 'upstream_failed' && i.summary.includes(`dead.${D}`)),
      10_000,
      'an upstream_failed incident',
    );
    const r = await api('GET', '/proxy/diagnostics');
    expect(r.status).to.equal(200);
    const cfg = (await api('GET', '/proxy/config')).body;
    expect(r.body.caddy).to.include({ running: true, version: '2.6.2', admin_ok: true });
    expect(r.body.config).to.include({ replicated_version: cfg.version, applied_version: cfg.version, last_apply_error: null });
    expect(r.body.listeners).to.deep.include({ port: 443, address: '127.0.0.1:443', listening: true, error: null, http3: false });
    const up = (e: string) => r.body.upstreams.find((u: any) => u.entry === e);
    expect(up(`web.${D}:443`)).to.include({ dial: `${upHost}:${upPort}`, reachable: true });
    expect(up(`dead.${D}:443`)).to.include({ dial: `${lab.upstream.addr}:9`, reachable: false });
    expect(r.body.vip).to.include({ claimed: true });
  });

  it('GET /proxy/upstreams lists targets (none without a guest domain)', async () => {
    const r = await api('GET', '/proxy/upstreams');
    expect(r.status).to.equal(200);
    expect(r.body).to.deep.equal({ upstreams: [] });
  });

  it('hostctl proxy status and incidents read the same through the admin socket', async () => {
    const st = await hostctl(d.dataDir, ['proxy', 'status']);
    expect(st.code, st.stderr).to.equal(0);
    expect(st.stdout).to.include(`holder ${d.nodeId} (epoch 0)  <- this node`).and.include('caddy 2.6.2 running');
    const inc = await hostctl(d.dataDir, ['proxy', 'incidents']);
    expect(inc.stdout).to.include('config_refused');
  });

  it('disabling stops Caddy and releases the floating address (idempotent)', async () => {
    for (let i = 0; i < 2; i++) expect((await api('PATCH', '/proxy', { enabled: false })).body).to.include({ enabled: false, serving: false });
    await eventually(async () => !(await api('GET', '/proxy/host-status')).body.caddy_running, 10_000, 'caddy stopped');
    await eventually(async () => !(await nsExec(['ip', '-j', 'addr', 'show', 'dev', LAN_DEV])).stdout.includes(`"${lab.vip}"`), 10_000, 'the address released');
    expect((await nsExec(['ip', '-j', 'addr', 'show', 'dev', LAN_DEV])).stdout).to.not.include('fd00:5eed::50');
    expect((await nsExec(['ss', '-Hltn', 'sport', '= :443'])).stdout.trim()).to.equal('');
  });
});
