/**
 * The proxy's containment rules (daemon/proxy/policy/), without Caddy:
 * placeholders in header values, what an upstream address reaches, hostd's
 * own ports, listen ports, host names resolved by hostd, and the builder
 * leaving refused entries out. test/runtime/proxy/caddy-placeholders.test.ts
 * holds the placeholder scan to the real Caddy; test/security/proxy/ runs
 * the attempts against a daemon.
 */
import { expect } from 'chai';
import { buildCaddyConfig } from '../../../daemon/proxy/caddy/build.js';
import { defaultProxyConfig, type ProxyConfig, type ProxyEntry } from '../../../daemon/proxy/config.js';
import { canonicalIp, classifyIp, loopbackName, numericHostForm } from '../../../daemon/proxy/policy/addresses.js';
import { CADDY_ADMIN_PORT, HeldPorts, configuredPorts, ownListeningPorts } from '../../../daemon/proxy/policy/listeners.js';
import { caddyLiteral, placeholderKeys, placeholderProblem } from '../../../daemon/proxy/policy/placeholders.js';
import { NameResolver } from '../../../daemon/proxy/policy/resolve.js';
import {
  acmeSettingsProblem,
  credentialKeysWithBraces,
  dialRefusal,
  dnsUpstreamRefusal,
  headerRefusal,
  hostFormRefusal,
  listenPortRefusal,
  proxyListeners,
  resolveHost,
  type RuleContext,
} from '../../../daemon/proxy/policy/rules.js';
import type { Config } from '../../../daemon/config.js';
import net from 'node:net';

const ONLY_REQUEST = "only the request's placeholders ({http.request.*}) are allowed";

describe('proxy rules: placeholders in header values', () => {
  it('allows the request placeholders, escaped braces and plain text', () => {
    for (const v of [
      'plain',
      '',
      '{http.request.host}',
      'for={http.request.remote.host};proto={http.request.scheme}',
      '{http.request.header.X-Forwarded-For}',
      '{http.request.uri.query.page}',
      '{http.request.tls.client.fingerprint}',
      '{http.request.remote.host/24,64}',
      '\\{env.HOME}',
      'a \\{literal\\} brace',
      '}',
    ])
      expect(placeholderProblem(v), v).to.equal(null);
  });

  it('refuses every other family, naming the placeholder', () => {
    const cases: Array<[string, string]> = [
      ['{env.HOME}', `placeholder {env.HOME} is refused: ${ONLY_REQUEST}`],
      ['x-{env.PATH}-y', `placeholder {env.PATH} is refused: ${ONLY_REQUEST}`],
      ['{system.hostname}', `placeholder {system.hostname} is refused: ${ONLY_REQUEST}`],
      ['{system.wd}', `placeholder {system.wd} is refused: ${ONLY_REQUEST}`],
      ['{file./etc/shadow}', `placeholder {file./etc/shadow} is refused: ${ONLY_REQUEST}`],
      ['{time.now.unix}', `placeholder {time.now.unix} is refused: ${ONLY_REQUEST}`],
      ['{http.vars.client_ip}', `placeholder {http.vars.client_ip} is refused: ${ONLY_REQUEST}`],
      ['{vars.x}', `placeholder {vars.x} is refused: ${ONLY_REQUEST}`],
      ['{http.reverse_proxy.upstream.address}', `placeholder {http.reverse_proxy.upstream.address} is refused: ${ONLY_REQUEST}`],
      ['{http.response.header.Server}', `placeholder {http.response.header.Server} is refused: ${ONLY_REQUEST}`],
      ['{HTTP.request.host}', `placeholder {HTTP.request.host} is refused: ${ONLY_REQUEST}`],
      ['{}', `placeholder {} is refused: ${ONLY_REQUEST}`],
      ['{http.request.body}', 'placeholder {http.request.body} is refused: it makes Caddy read the whole request body into memory'],
      ['{http.request.body_base64}', 'placeholder {http.request.body_base64} is refused: it makes Caddy read the whole request body into memory'],
      [
        '{host}',
        'placeholder {host} is refused: it is a Caddyfile shorthand, which Caddy sends as written from its JSON configuration; use {http.request.host}',
      ],
      [
        '{path}',
        'placeholder {path} is refused: it is a Caddyfile shorthand, which Caddy sends as written from its JSON configuration; use {http.request.uri.path}',
      ],
      // Caddy's ReplaceKnown rescans inside an unknown placeholder: the inner one would expand.
      ['{x{env.HOME}}', 'placeholder {x{env.HOME} is refused: placeholders do not nest (write \\{ for a literal brace)'],
      ['{http.request.header.{env.HOME}}', 'placeholder {http.request.header.{env.HOME} is refused: placeholders do not nest (write \\{ for a literal brace)'],
      ['{http.request.host\\}{env.HOME}}', 'placeholder {http.request.host\\}{env.HOME} is refused: placeholders do not nest (write \\{ for a literal brace)'],
      ['{unclosed', "'{' opens no placeholder (write \\{ for a literal brace)"],
    ];
    for (const [v, msg] of cases) expect(placeholderProblem(v), v).to.equal(msg);
  });

  it("finds keys the way Caddy's replacer does: an escaped brace opens nothing, an escaped closing brace does not close", () => {
    expect(placeholderKeys('\\{env.HOME}')).to.deep.equal([]);
    expect(placeholderKeys('a{b\\}c}d')).to.deep.equal([{ key: 'b\\}c', closed: true }]);
    expect(placeholderKeys('{a}{b}')).to.deep.equal([
      { key: 'a', closed: true },
      { key: 'b', closed: true },
    ]);
    expect(placeholderKeys('{a{b}')).to.deep.equal([
      { key: 'a{b', closed: true },
      { key: 'b', closed: true },
    ]);
  });

  it('escapes what hostd means literally; header_up refusals name the header', () => {
    expect(caddyLiteral('target {env.HOME} \\{x}')).to.equal('target \\{env.HOME\\} \\\\{x\\}');
    expect(headerRefusal({ 'X-Ok': '{http.request.host}', 'X-Leak': '{env.PATH}' })).to.deep.equal({
      rule: 'header-placeholder',
      status: 400,
      message: `header_up.X-Leak: placeholder {env.PATH} is refused: ${ONLY_REQUEST}`,
    });
    expect(headerRefusal({ 'X-Ok': '{http.request.host}' })).to.equal(null);
  });

  it('ACME email, directory and credentials hold no brace (Caddy and the provider modules expand them)', () => {
    expect(acmeSettingsProblem({ email: 'a@b.test', dir_url: '' })).to.equal(null);
    expect(acmeSettingsProblem({ email: '{env.HOME}@b.test', dir_url: '' })).to.equal(
      'the ACME email holds a brace, which Caddy would expand as a placeholder',
    );
    expect(acmeSettingsProblem({ email: 'a@b.test', dir_url: 'https://x.test/{file./etc/shadow}' })).to.equal(
      'the ACME dir_url holds a brace, which Caddy would expand as a placeholder',
    );
    expect(credentialKeysWithBraces({ api_token: 'abc', zone: '{env.X}', key: 'x}' })).to.deep.equal(['key', 'zone']);
  });
});

describe('proxy rules: addresses', () => {
  const local = new Set(['127.0.0.1', '0:0:0:0:0:0:0:1', '192.0.2.7', 'fd00:0:0:0:0:0:0:7']);

  it('every form of loopback and the unspecified address is this host', () => {
    for (const ip of ['127.0.0.1', '127.3.4.5', '::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '::127.0.0.1', '64:ff9b::7f00:1', '0:0:0:0:0:0:0:1'])
      expect(classifyIp(ip, local), ip).to.equal('loopback');
    for (const ip of ['0.0.0.0', '0.1.2.3', '::', '::ffff:0.0.0.0']) expect(classifyIp(ip, local), ip).to.equal('unspecified');
    for (const ip of ['192.0.2.7', '::ffff:192.0.2.7', 'fd00::7']) expect(classifyIp(ip, local), ip).to.equal('this-host');
    for (const ip of ['192.0.2.8', '10.0.0.1', 'fd00::8', 'fe80::1', '::ffff:10.0.0.1']) expect(classifyIp(ip, local), ip).to.equal('other');
    expect(canonicalIp('::FFFF:7F00:0001')).to.equal('127.0.0.1');
    expect(canonicalIp('2001:db8::1')).to.equal('2001:db8:0:0:0:0:0:1');
    expect(canonicalIp('not-an-ip')).to.equal(null);
  });

  it('numeric shorthands a resolver reads as IPv4, and localhost names, are recognised', () => {
    for (const h of ['2130706433', '0x7f000001', '0177.0.0.1', '127.1', '0x7f.1', 'svc.123']) expect(numericHostForm(h), h).to.equal(true);
    for (const h of ['127.0.0.1', 'nas.lan', '0x10.example', 'a1.b2']) expect(numericHostForm(h), h).to.equal(false);
    for (const h of ['localhost', 'LOCALHOST', 'localhost.', 'web.localhost']) expect(loopbackName(h), h).to.equal(true);
    expect(loopbackName('localhost.example')).to.equal(false);
  });

  it('host forms: IP or host name; numeric shorthands, zones and braces are 400', () => {
    expect(hostFormRefusal('10.0.0.1')).to.equal(null);
    expect(hostFormRefusal('nas.lan')).to.equal(null);
    expect(hostFormRefusal('2130706433')).to.deep.equal({
      rule: 'upstream-host',
      status: 400,
      message: "host '2130706433' is a numeric address form a resolver reads as IPv4 (write the address as a.b.c.d)",
    });
    expect(hostFormRefusal('{env.HOST}')).to.deep.equal({
      rule: 'upstream-host',
      status: 400,
      message: "host '{env.HOST}' must be an IP address or a hostname",
    });
    expect(hostFormRefusal('unix//run/hostd.sock')).to.deep.equal({
      rule: 'upstream-host',
      status: 400,
      message: "host 'unix//run/hostd.sock' must be an IP address or a hostname",
    });
    if (net.isIPv6('fe80::1%lo')) expect(hostFormRefusal('fe80::1%lo')?.rule).to.equal('upstream-host');
  });
});

describe('proxy rules: ports hostd holds, listen ports, upstreams', () => {
  const cfg = {
    http: { host: '127.0.0.1', port: 8787 },
    cluster: { host: '0.0.0.0', port: 8788 },
    future_tls: { host: '0.0.0.0', port: 8789 },
    dataDir: '/d',
  } as unknown as Config;
  const held = new HeldPorts(
    () => configuredPorts(cfg, 5353),
    0,
    () => [40123],
  );
  const local = new Set(['127.0.0.1', '0:0:0:0:0:0:0:1', '192.0.2.7']);
  const resolver = new NameResolver(async (name) => {
    const table: Record<string, string[]> = { 'nas.lan': ['192.0.2.50'], 'sneaky.lan': ['192.0.2.51', '127.0.0.9'], 'self.lan': ['::ffff:127.0.0.1'] };
    if (table[name]) return table[name];
    throw Object.assign(new Error('nx'), { code: 'ENOTFOUND' });
  });
  const ctx = (over: Partial<RuleContext> = {}): RuleContext => ({
    allowLoopback: false,
    allowPrivilegedPorts: false,
    held,
    local: () => local,
    resolver,
    ...over,
  });

  it("hostd's ports: every host:port of the config (a later listener too), the DNS responder, Caddy's admin, and what this process listens on", () => {
    expect(held.list()).to.deep.equal([
      { port: 8787, what: "hostd's API listener (http_addr)" },
      { port: 8788, what: "hostd's cluster listener (cluster_addr)" },
      { port: 8789, what: 'a hostd listener (future_tls in the config)' },
      { port: 5353, what: "hostd's DNS responder (proxy.dns_listen)" },
      { port: CADDY_ADMIN_PORT, what: "Caddy's admin endpoint (its default port)" },
      { port: 40123, what: 'a listening socket of hostd' },
    ]);
  });

  it('a listener bound after the list was cached is still found (the API binds after the domains open)', () => {
    let own: number[] = [];
    const late = new HeldPorts(
      () => [],
      60_000,
      () => own,
    );
    expect(late.holder(40999)).to.equal(null);
    own = [40999];
    expect(late.holder(40999)).to.deep.equal({ port: 40999, what: 'a listening socket of hostd' });
  });

  it("this process's listening sockets are read from /proc", async () => {
    const srv = net.createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    try {
      const port = (srv.address() as net.AddressInfo).port;
      expect(ownListeningPorts()).to.include(port);
    } finally {
      await new Promise((r) => srv.close(r));
    }
  });

  it('listen ports: 80 and 443 and unprivileged ones; below 1024 is 403 naming the setting; a port hostd holds is 400', () => {
    for (const p of [80, 443, 1024, 8443]) expect(listenPortRefusal(p, ctx()), String(p)).to.equal(null);
    expect(listenPortRefusal(22, ctx())).to.deep.equal({
      rule: 'privileged-listen-port',
      status: 403,
      message:
        'listen_port 22 is a privileged port (below 1024) other than 80 and 443; refused unless proxy.allow_privileged_listen_ports is true in the config file',
    });
    expect(listenPortRefusal(22, ctx({ allowPrivilegedPorts: true }))).to.equal(null);
    expect(listenPortRefusal(8787, ctx({ allowPrivilegedPorts: true }))).to.deep.equal({
      rule: 'held-listen-port',
      status: 400,
      message: "listen_port 8787 is held by hostd's API listener (http_addr); the proxy never listens on a port hostd or Caddy's admin holds",
    });
    expect(listenPortRefusal(2019, ctx())?.message).to.equal(
      "listen_port 2019 is held by Caddy's admin endpoint (its default port); the proxy never listens on a port hostd or Caddy's admin holds",
    );
  });

  it("upstreams: loopback is 403 naming the setting; hostd's ports on any address of this host are 400 whatever the setting; other hosts pass", () => {
    expect(dialRefusal('10.0.0.1', 8787, { host: '10.0.0.1' }, ctx())).to.equal(null);
    expect(dialRefusal('192.0.2.7', 8080, { host: '192.0.2.7' }, ctx())).to.equal(null);
    expect(dialRefusal('::ffff:127.0.0.1', 8080, { host: '::ffff:127.0.0.1' }, ctx())).to.deep.equal({
      rule: 'loopback-upstream',
      status: 403,
      message:
        "host '::ffff:127.0.0.1' is a loopback address; upstreams on this host are refused unless proxy.allow_loopback_upstreams is true in the config file (an app, VM or container is reached through its target_id)",
    });
    expect(dialRefusal('127.0.0.1', 8080, { host: '127.0.0.1' }, ctx({ allowLoopback: true }))).to.equal(null);
    for (const [ip, port] of [
      ['127.0.0.1', 8787],
      ['0.0.0.0', 8788],
      ['192.0.2.7', 8788],
      ['::1', 2019],
    ] as const) {
      const r = dialRefusal(ip, port, { host: ip }, ctx({ allowLoopback: true }));
      expect(r?.rule, `${ip}:${port}`).to.equal('hostd-port');
      expect(r?.status).to.equal(400);
    }
    expect(dialRefusal('127.0.0.1', 8787, { host: '127.0.0.1' }, ctx())?.message).to.equal(
      "upstream host '127.0.0.1' port 8787 is hostd's API listener (http_addr) on this host; the proxy never publishes hostd's listeners or Caddy's admin endpoint",
    );
  });

  it("an upstream on one of the proxy's own listeners is a loop (400), on this host's addresses and on the floating ones; other ports and hosts pass", () => {
    const cfg = {
      domains: [{ entries: [{ listen_port: 443 }, { listen_port: 8443 }] }],
      vip: { vip: '198.51.100.10', vip6: 'fd00:5eed::10' },
    };
    const all = ctx({ proxy: proxyListeners(cfg, '') });
    expect(dialRefusal('192.0.2.7', 443, { host: 'lan.example' }, all)).to.deep.equal({
      rule: 'proxy-loop',
      status: 400,
      message: "upstream host 'lan.example' (192.0.2.7) port 443 is one of the proxy's own listeners; an entry that dials the proxy itself is a loop",
    });
    // Floating addresses are the proxy's wherever it is held, also when this node does not carry them now.
    for (const ip of ['198.51.100.10', 'fd00:5eed::10']) expect(dialRefusal(ip, 8443, { host: ip }, all)?.rule, ip).to.equal('proxy-loop');
    // Loopback allowed by the operator is still no way around it.
    expect(dialRefusal('127.0.0.1', 443, { host: '127.0.0.1' }, ctx({ allowLoopback: true, proxy: proxyListeners(cfg, '') }))?.rule).to.equal('proxy-loop');
    expect(dialRefusal('192.0.2.7', 8080, { host: '192.0.2.7' }, all)).to.equal(null);
    expect(dialRefusal('10.0.0.1', 443, { host: '10.0.0.1' }, all)).to.equal(null);
    // Caddy bound to one address: this host's other addresses are no loop.
    expect(dialRefusal('192.0.2.7', 443, { host: '192.0.2.7' }, ctx({ proxy: proxyListeners(cfg, '127.0.0.1') }))).to.equal(null);
    // Without the proxy's listeners (a DNS forwarder: the responder speaks DNS, not HTTP) nothing is a loop.
    expect(dnsUpstreamRefusal('192.0.2.7:443', { host: '192.0.2.7', port: 443 }, all)).to.equal(null);
  });

  it("targets: an app's published loopback port passes; a VM or container claiming an address of this host does not", () => {
    expect(dialRefusal('127.0.0.1', 8081, { target: 'app:wiki', kind: 'app' }, ctx())).to.equal(null);
    expect(dialRefusal('127.0.0.1', 8787, { target: 'app:wiki', kind: 'app' }, ctx())?.rule).to.equal('hostd-port');
    expect(dialRefusal('127.0.0.1', 22, { target: 'vm:101', kind: 'vm' }, ctx({ allowLoopback: true }))).to.deep.equal({
      rule: 'target-address',
      status: 400,
      message: 'vm:101 reports 127.0.0.1, a loopback address, as its address; a VM never has one, so the proxy does not dial it',
    });
    expect(dialRefusal('192.0.2.7', 80, { target: 'lxc:7', kind: 'lxc' }, ctx())?.rule).to.equal('target-address');
    expect(dialRefusal('10.0.3.7', 80, { target: 'lxc:7', kind: 'lxc' }, ctx())).to.equal(null);
  });

  it("DNS forwarders are upstreams: loopback needs the setting; hostd's ports (its own responder: a loop) never", () => {
    expect(dnsUpstreamRefusal('9.9.9.9', { host: '9.9.9.9', port: 53 }, ctx())).to.equal(null);
    expect(dnsUpstreamRefusal('127.0.0.53', { host: '127.0.0.53', port: 53 }, ctx())?.message).to.equal(
      `dns_upstreams '127.0.0.53': host '127.0.0.53' is a loopback address; upstreams on this host are refused unless proxy.allow_loopback_upstreams is true in the config file (an app, VM or container is reached through its target_id)`,
    );
    expect(dnsUpstreamRefusal('127.0.0.53', { host: '127.0.0.53', port: 53 }, ctx({ allowLoopback: true }))).to.equal(null);
    expect(dnsUpstreamRefusal('192.0.2.7:5353', { host: '192.0.2.7', port: 5353 }, ctx({ allowLoopback: true }))?.rule).to.equal('hostd-port');
  });

  it('host names are resolved by hostd: every address checked, the first dialled with the name as TLS server name', async () => {
    expect(await resolveHost('nas.lan', 443, ctx())).to.deep.equal({ dial: '192.0.2.50:443', ip: '192.0.2.50', serverName: 'nas.lan' });
    expect(await resolveHost('10.0.0.1', 80, ctx())).to.deep.equal({ dial: '10.0.0.1:80', ip: '10.0.0.1', serverName: null });
    expect(await resolveHost('fd00::9', 80, ctx())).to.deep.equal({ dial: '[fd00::9]:80', ip: 'fd00::9', serverName: null });
    expect(((await resolveHost('sneaky.lan', 80, ctx())) as any).refusal.rule).to.equal('loopback-upstream');
    expect(((await resolveHost('self.lan', 8787, ctx({ allowLoopback: true }))) as any).refusal.rule).to.equal('hostd-port');
    expect(((await resolveHost('localhost', 80, ctx())) as any).refusal.message).to.include("host 'localhost' (127.0.0.1) is a loopback address");
    expect(((await resolveHost('0x7f000001', 80, ctx({ allowLoopback: true }))) as any).refusal.rule).to.equal('upstream-host');
    expect(await resolveHost('gone.lan', 80, ctx())).to.deep.equal({ error: "upstream host 'gone.lan' does not resolve (ENOTFOUND)", kind: 'missing' });
  });

  it('a resolver that does not answer is bounded, and asked again next time; answers are kept', async () => {
    let asked = 0;
    const slow = new NameResolver(
      () => {
        asked++;
        return asked === 1 ? new Promise(() => undefined) : Promise.resolve(['192.0.2.9']);
      },
      5000,
      50,
    );
    expect(await slow.resolve('stuck.lan')).to.deep.equal({ error: "'stuck.lan' did not resolve within 50 ms", kind: 'unavailable' });
    expect(await slow.resolve('stuck.lan')).to.deep.equal({ addresses: ['192.0.2.9'] });
    expect(await slow.resolve('stuck.lan')).to.deep.equal({ addresses: ['192.0.2.9'] });
    expect(asked).to.equal(2);
  });
});

describe('proxy rules: the builder leaves refused entries out', () => {
  const entry = (over: Partial<ProxyEntry> = {}): ProxyEntry => ({
    subdomain: 'web',
    listen_port: 443,
    port: 8080,
    host: '10.0.0.9',
    target_id: null,
    upstream_scheme: '',
    tls_skip_verify: null,
    header_up: {},
    ...over,
  });
  const opts = (over: Partial<Parameters<typeof buildCaddyConfig>[1]> = {}) => ({
    adminSocket: '/d/a.sock',
    storageRoot: '/d/s',
    listenHost: '',
    upstreams: new Map(),
    credentials: new Map(),
    ...over,
  });

  it('a refused upstream gets a 502 naming only the rule; a refused listen port no listener; a refused header is never sent', () => {
    const cfg: ProxyConfig = {
      ...defaultProxyConfig(),
      domains: [
        {
          name: 'h.test',
          cert_source: 'internal',
          entries: [
            entry(),
            entry({ subdomain: 'lo', host: '127.0.0.1' }),
            entry({ subdomain: 'ssh', listen_port: 22 }),
            entry({ subdomain: 'leak', header_up: { 'X-Env': '{env.PATH}' } }),
          ],
        },
      ],
    };
    const c = buildCaddyConfig(
      cfg,
      opts({
        upstreams: new Map([
          ['web.h.test:443', { dial: '10.0.0.9:8080' }],
          ['leak.h.test:443', { dial: '10.0.0.9:8080' }],
        ]),
        refused: new Map([
          ['lo.h.test:443', { rule: 'loopback-upstream' }],
          ['ssh.h.test:22', { rule: 'privileged-listen-port' }],
        ]),
      }),
    ) as any;
    expect(Object.keys(c.apps.http.servers)).to.deep.equal(['p443']);
    const routes = c.apps.http.servers.p443.routes;
    expect(routes.map((r: any) => r.match[0].host[0])).to.deep.equal(['web.h.test', 'lo.h.test', 'leak.h.test']);
    expect(routes[1].handle).to.deep.equal([
      {
        handler: 'static_response',
        status_code: 502,
        body: "hostd proxy: this entry is refused by the host's proxy rules (loopback-upstream); GET /proxy/host-status says why\n",
      },
    ]);
    // Even when the caller did not pass the refusal, a header with a host placeholder never reaches Caddy.
    expect(routes[2].handle[0].handler).to.equal('static_response');
    expect(JSON.stringify(c)).to.not.include('env.PATH');
  });

  it('an error text Caddy would expand in a 502 body goes escaped', () => {
    const cfg: ProxyConfig = {
      ...defaultProxyConfig(),
      domains: [{ name: 'h.test', cert_source: 'internal', entries: [entry({ host: null, target_id: 'vm:{env.HOME}' })] }],
    };
    const c = buildCaddyConfig(cfg, opts({ upstreams: new Map([['web.h.test:443', { error: "target 'vm:{env.HOME}' not found" }]]) })) as any;
    expect(c.apps.http.servers.p443.routes[0].handle[0].body).to.equal("hostd proxy: target 'vm:\\{env.HOME\\}' not found\n");
  });

  it('ACME domains whose email, directory or credentials hold a brace, and domain names that are not names, are left out', () => {
    const base = {
      ...defaultProxyConfig(),
      domains: [
        { name: 'p.test', cert_source: 'cloudflare', entries: [] },
        { name: 'i.test', cert_source: 'internal', entries: [] },
      ],
    };
    const good = buildCaddyConfig(
      { ...base, acme: { email: 'a@b.test', dir_url: '', dns_resolvers: null } },
      opts({ credentials: new Map([['cloudflare', { api_token: 'x' }]]) }),
    ) as any;
    expect(good.apps.tls.certificates.automate).to.deep.equal(['*.p.test', '*.i.test']);
    const badEmail = buildCaddyConfig(
      { ...base, acme: { email: '{env.HOME}@b.test', dir_url: '', dns_resolvers: null } },
      opts({ credentials: new Map([['cloudflare', { api_token: 'x' }]]) }),
    ) as any;
    expect(badEmail.apps.tls.certificates.automate).to.deep.equal(['*.i.test']);
    const badCreds = buildCaddyConfig({ ...base, acme: null }, opts({ credentials: new Map([['cloudflare', { api_token: '{file./etc/shadow}' }]]) })) as any;
    expect(badCreds.apps.tls.certificates.automate).to.deep.equal(['*.i.test']);
    const badName = buildCaddyConfig(
      { ...defaultProxyConfig(), domains: [{ name: '{env.HOME}.test', cert_source: 'internal', entries: [entry()] }] },
      opts(),
    ) as any;
    expect(badName.apps.tls).to.equal(undefined);
    expect(badName.apps.http).to.equal(undefined);
  });
});
