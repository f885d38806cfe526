/**
 * What the proxy's runtime folders make without running anything: the Caddy
 * configuration built from a plan (servers, routes, certificates, redaction),
 * entry targets and their dial addresses, the proxy settings of the config
 * file, host:port parsing, and the DNS responder's answers.
 */
import { expect } from 'chai';
import dnsPacket from 'dns-packet';
import { buildCaddyConfig, redactCaddyConfig } from '../../../daemon/proxy/caddy/build.js';
import {
  defaultProxyConfig,
  effectiveScheme,
  effectiveSkipVerify,
  validateProxyConfig,
  type ProxyConfig,
  type ProxyEntry,
} from '../../../daemon/proxy/config.js';
import { dialFor, findTarget, type UpstreamTarget } from '../../../daemon/proxy/targets.js';
import { parseProxySettings } from '../../../daemon/proxy/settings.js';
import { DnsResponder } from '../../../daemon/proxy/dns/responder.js';
import { parseHostPort } from '../../../daemon/proxy/host-port.js';
import { ApiError } from '../../../daemon/lib/errors.js';

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
  adminSocket: '/d/proxy/run/a.sock',
  storageRoot: '/d/proxy/caddy/storage',
  listenHost: '',
  upstreams: new Map(),
  credentials: new Map(),
  ...over,
});

describe('proxy: Caddy configuration builder', () => {
  it('one server per listen port, host-matched routes, a wildcard certificate per domain, no trust store, no persisted config', () => {
    const cfg: ProxyConfig = {
      ...defaultProxyConfig(),
      enabled: true,
      domains: [{ name: 'home.test', cert_source: 'internal', entries: [entry(), entry({ listen_port: 8443 }), entry({ subdomain: 'git', port: 443 })] }],
    };
    const c = buildCaddyConfig(
      cfg,
      opts({
        listenHost: '10.0.0.5',
        upstreams: new Map([
          ['web.home.test:443', { dial: '10.0.0.9:8080' }],
          ['web.home.test:8443', { dial: '10.0.0.9:8080' }],
          ['git.home.test:443', { error: 'target vm:1 has no address now (state stopped)' }],
        ]),
      }),
    ) as any;
    expect(c.admin).to.deep.equal({ listen: 'unix//d/proxy/run/a.sock', config: { persist: false } });
    expect(c.storage).to.deep.equal({ module: 'file_system', root: '/d/proxy/caddy/storage' });
    expect(c.apps.pki).to.deep.equal({ certificate_authorities: { local: { install_trust: false } } });
    expect(Object.keys(c.apps.http.servers)).to.deep.equal(['p443', 'p8443']);
    const s = c.apps.http.servers.p443;
    expect(s.listen).to.deep.equal(['10.0.0.5:443']);
    expect(s.protocols).to.deep.equal(['h1', 'h2']);
    expect(s.automatic_https).to.deep.equal({ disable_redirects: true, skip_certificates: ['web.home.test', 'git.home.test'] });
    expect(s.routes[0]).to.deep.equal({
      match: [{ host: ['web.home.test'] }],
      handle: [{ handler: 'reverse_proxy', upstreams: [{ dial: '10.0.0.9:8080' }] }],
      terminal: true,
    });
    expect(s.routes[1].handle[0]).to.deep.equal({
      handler: 'static_response',
      status_code: 502,
      body: 'hostd proxy: target vm:1 has no address now (state stopped)\n',
    });
    expect(c.apps.tls).to.deep.equal({
      certificates: { automate: ['*.home.test'] },
      automation: { policies: [{ subjects: ['*.home.test'], issuers: [{ module: 'internal', ca: 'local' }] }] },
    });
  });

  it('HTTP/3 adds h3; IPv6 listen hosts are bracketed; https upstreams, skip-verify and header_up', () => {
    const cfg: ProxyConfig = {
      ...defaultProxyConfig(),
      http3: true,
      domains: [
        {
          name: 'h.test',
          cert_source: 'internal',
          entries: [
            entry({ port: 443, header_up: { 'X-A': '{http.request.remote.host}', 'X-Gone': '', 'User-Agent': '' } }),
            entry({ subdomain: 'v', upstream_scheme: 'https', tls_skip_verify: false }),
          ],
        },
      ],
    };
    const c = buildCaddyConfig(
      cfg,
      opts({
        listenHost: '::1',
        upstreams: new Map([
          ['web.h.test:443', { dial: '10.0.0.9:443' }],
          ['v.h.test:443', { dial: '10.0.0.9:8080', serverName: 'v.upstream.test' }],
        ]),
      }),
    ) as any;
    const s = c.apps.http.servers.p443;
    expect(s.listen).to.deep.equal(['[::1]:443']);
    expect(s.protocols).to.deep.equal(['h1', 'h2', 'h3']);
    expect(s.routes[0].handle[0].transport).to.deep.equal({ protocol: 'http', tls: { insecure_skip_verify: true } });
    expect(s.routes[0].handle[0].headers).to.deep.equal({
      request: { set: { 'X-A': ['{http.request.remote.host}'], 'User-Agent': [''] }, delete: ['X-Gone'] },
    });
    // A host name is dialled by the address hostd resolved and checked, and verified by its name.
    expect(s.routes[1].handle[0].transport).to.deep.equal({ protocol: 'http', tls: { server_name: 'v.upstream.test' } });
  });

  it('ACME DNS-01 with the provider and its credentials; redaction hides them', () => {
    const cfg: ProxyConfig = {
      ...defaultProxyConfig(),
      acme: { email: 'a@b.test', dir_url: 'https://acme.test/dir', dns_resolvers: null },
      domains: [{ name: 'p.test', cert_source: 'cloudflare', entries: [] }],
    };
    const c = buildCaddyConfig(cfg, opts({ credentials: new Map([['cloudflare', { api_token: 's3cret' }]]) })) as any;
    expect(c.apps.tls.automation.policies[0]).to.deep.equal({
      subjects: ['*.p.test'],
      issuers: [
        {
          module: 'acme',
          email: 'a@b.test',
          ca: 'https://acme.test/dir',
          challenges: {
            http: { disabled: true },
            'tls-alpn': { disabled: true },
            dns: { provider: { api_token: 's3cret', name: 'cloudflare' }, resolvers: ['1.1.1.1', '8.8.8.8'] },
          },
        },
      ],
    });
    expect(c.apps.http).to.equal(undefined);
    expect(JSON.stringify(redactCaddyConfig(c))).to.not.include('s3cret');
    expect((redactCaddyConfig(c) as any).apps.tls.automation.policies[0].issuers[0].challenges.dns.provider).to.deep.equal({
      api_token: '[redacted]',
      name: 'cloudflare',
    });
    // A domain whose provider the build lacks is left out (and reported by the service).
    const skipped = buildCaddyConfig(cfg, opts({ skipDomains: new Set(['p.test']) })) as any;
    expect(skipped.apps.tls).to.equal(undefined);
  });

  it('scheme and verification: auto-detected from the port, authoritative when set', () => {
    expect(effectiveScheme(entry({ port: 443 }))).to.equal('https');
    expect(effectiveScheme(entry({ port: 8443 }))).to.equal('http');
    expect(effectiveScheme(entry({ port: 443, upstream_scheme: 'http' }))).to.equal('http');
    expect(effectiveSkipVerify(entry({ port: 443 }))).to.equal(true);
    expect(effectiveSkipVerify(entry({ port: 443, tls_skip_verify: false }))).to.equal(false);
    expect(effectiveSkipVerify(entry({ port: 8443, upstream_scheme: 'https' }))).to.equal(false);
    expect(effectiveSkipVerify(entry({ port: 8080, tls_skip_verify: true }))).to.equal(false);
  });

  it('validation: entries need exactly one of host and target_id, one label, unique (subdomain, listen_port)', () => {
    const base = (entries: unknown[]) => ({ ...defaultProxyConfig(), domains: [{ name: 'a.test', cert_source: 'internal', entries }] });
    const bad = (entries: unknown[]) => {
      try {
        validateProxyConfig(base(entries));
      } catch (err) {
        expect(err).to.be.instanceOf(ApiError);
        return (err as ApiError).message;
      }
      return 'accepted';
    };
    expect(bad([entry({ host: null })])).to.equal('config.domains[0].entries[0] needs exactly one of host and target_id');
    expect(bad([entry({ target_id: 'vm:1' })])).to.equal('config.domains[0].entries[0] needs exactly one of host and target_id');
    expect(bad([entry({ subdomain: 'a.b' })])).to.equal('config.domains[0].entries[0].subdomain must be one DNS label');
    expect(bad([entry(), entry()])).to.equal("config.domains[0].entries[1]: subdomain 'web' on listen port 443 appears twice");
    expect(bad([entry(), entry({ listen_port: 8443 })])).to.equal('accepted');
    expect(bad([{ ...entry(), api_token: 'x' }])).to.match(/secret store/);
  });
});

describe('proxy: targets', () => {
  const t = (kind: UpstreamTarget['kind'], id: string, addresses: string[]): UpstreamTarget => ({
    target_id: `${kind}:${id}`,
    kind,
    id,
    name: id,
    state: 'running',
    running: true,
    addresses,
  });
  const all = [
    t('vm', '101', ['fe80::1', '192.168.1.5']),
    t('lxc', '101', ['10.0.3.7']),
    t('app', 'wiki', ['127.0.0.1:8081', '127.0.0.1:8082']),
    t('lxc', '7', []),
  ];

  it('resolves kind:id, a unique bare id; 400 when ambiguous, 404 when unknown', () => {
    expect(findTarget(all, 'lxc:101').kind).to.equal('lxc');
    expect(findTarget(all, 'wiki').target_id).to.equal('app:wiki');
    expect(() => findTarget(all, '101')).to.throw("target_id '101' is ambiguous: vm:101, lxc:101; use one of those");
    expect(() => findTarget(all, 'vm:9')).to.throw("target 'vm:9' not found (GET /proxy/upstreams lists the apps, VMs and containers)");
  });

  it('dials an app only on a port it publishes; a VM or container on its first IPv4 address with the entry port', () => {
    expect(dialFor(all[0], 80)).to.deep.equal({ dial: '192.168.1.5:80', ip: '192.168.1.5' });
    expect(dialFor(all[2], 8082)).to.deep.equal({ dial: '127.0.0.1:8082', ip: '127.0.0.1' });
    // Any other port of the app's address is whatever else listens there (hostd's API, another service): never dialled.
    expect(dialFor(all[2], 9000)).to.deep.equal({ error: 'app:wiki publishes no host port 9000 (it publishes 8081, 8082)' });
    expect(dialFor(t('app', 'idle', []), 80)).to.deep.equal({ error: 'app:idle publishes no port now (state running)' });
    expect(dialFor(all[3], 80)).to.deep.equal({ error: 'target lxc:7 has no address now (state running)' });
    expect(dialFor(t('vm', '2', ['fd00::2']), 80)).to.deep.equal({ dial: '[fd00::2]:80', ip: 'fd00::2' });
  });
});

describe('proxy: settings and DNS responder', () => {
  it('settings: defaults and errors naming the key', () => {
    expect(parseProxySettings(undefined)).to.deep.equal({
      listenHost: '',
      dnsListen: null,
      address: null,
      caddyBinary: 'caddy',
      upstreamCheckMs: 10000,
      autoTakeover: true,
      takeoverGraceMs: 0,
      tickMs: 250,
      handoffMs: 3000,
      allowLoopbackUpstreams: false,
      allowPrivilegedListenPorts: false,
    });
    expect(parseProxySettings({ allow_loopback_upstreams: true, allow_privileged_listen_ports: true })).to.include({
      allowLoopbackUpstreams: true,
      allowPrivilegedListenPorts: true,
    });
    expect(() => parseProxySettings({ allow_loopback_upstreams: 'yes' })).to.throw('proxy.allow_loopback_upstreams must be a boolean');
    expect(parseProxySettings({ dns_listen: '[::1]:5353' }).dnsListen).to.deep.equal({ host: '::1', port: 5353 });
    expect(() => parseProxySettings({ listen_host: 'eth0' })).to.throw("proxy.listen_host must be an IP address or empty, got 'eth0'");
    expect(() => parseProxySettings({ bogus: 1 })).to.throw(/unknown setting 'bogus'/);
  });

  it('host:port parsing', () => {
    expect(parseHostPort('9.9.9.9')).to.deep.equal({ host: '9.9.9.9', port: 53 });
    expect(parseHostPort('9.9.9.9:5353')).to.deep.equal({ host: '9.9.9.9', port: 5353 });
    expect(parseHostPort('2001:db8::1')).to.deep.equal({ host: '2001:db8::1', port: 53 });
    expect(parseHostPort('[2001:db8::1]:53')).to.deep.equal({ host: '2001:db8::1', port: 53 });
    expect(parseHostPort('dns.example')).to.equal(null);
    expect(parseHostPort('1.2.3.4:0')).to.equal(null);
  });

  it('answers zone names authoritatively; SERVFAIL when a forward has no upstream', async () => {
    const r = new DnsResponder(
      { host: '127.0.0.1', port: 0 },
      { zone: (n) => ({ inZone: n.endsWith('home.test'), a: ['10.0.0.50'], aaaa: ['fd00::50'] }), upstreams: () => [] },
    );
    const q = (name: string, type: 'A' | 'AAAA' | 'MX') =>
      dnsPacket.encode({ type: 'query', id: 7, flags: dnsPacket.RECURSION_DESIRED, questions: [{ type, name }] });
    const a = dnsPacket.decode((await r.answer(q('Web.Home.Test', 'A')))!);
    expect(a.flag_aa).to.equal(true);
    expect(a.id).to.equal(7);
    expect(a.answers).to.deep.equal([{ name: 'Web.Home.Test', type: 'A', ttl: 30, class: 'IN', flush: false, data: '10.0.0.50' }]);
    const aaaa = dnsPacket.decode((await r.answer(q('web.home.test', 'AAAA')))!);
    expect(aaaa.answers?.map((x) => (x as { data: string }).data)).to.deep.equal(['fd00::50']);
    const mx = dnsPacket.decode((await r.answer(q('web.home.test', 'MX')))!);
    expect(mx.answers).to.deep.equal([]);
    const other = dnsPacket.decode((await r.answer(q('example.org', 'A')))!);
    expect((other as { rcode?: string }).rcode).to.equal('SERVFAIL');
    expect(await r.answer(Buffer.from('junk'))).to.equal(null);
  });
});
