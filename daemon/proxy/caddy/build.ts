/**
 * The whole Caddy JSON configuration for one proxy configuration: a pure
 * function, so that what Caddy is asked to load is decided in one place and
 * unit-tested without Caddy.
 *
 * Shape (Caddy 2.6 JSON):
 *  - one HTTP server per distinct listen port (`p<port>`), bound to
 *    `<listen_host>:<port>`, with a host-matched route per entry;
 *  - one wildcard certificate per base domain (`*.<domain>`), managed by an
 *    automation policy with the internal issuer or ACME DNS-01 with the
 *    domain's provider. Entries are single labels, so the wildcard covers
 *    every entry and adding an entry never waits for a certificate; the
 *    per-host names are listed in `skip_certificates` so that automatic HTTPS
 *    does not obtain a second certificate for each;
 *  - the local CA never installs into a trust store; storage and the admin
 *    socket live under the data dir; the admin API does not persist the
 *    configuration (it can hold provider credentials).
 */
import { effectiveScheme, effectiveSkipVerify, type ProxyConfig, type ProxyEntry } from '../config.js';

export interface BuildOptions {
  /** Absolute path of Caddy's admin unix socket. */
  adminSocket: string;
  /** Absolute directory of Caddy's certificate storage. */
  storageRoot: string;
  /** Host part of every listener; '' binds all addresses. */
  listenHost: string;
  /** Dial address (`host:port`) of each entry's upstream, by entryKey(); null: unresolved (why). */
  upstreams: Map<string, { dial: string } | { error: string }>;
  /** Provider credentials by provider name (from the secret store). */
  credentials: Map<string, Record<string, string>>;
  /** Domains left out of the configuration, with the reason (reported, not loaded). */
  skipDomains?: Set<string>;
  /** The internal CA's root, the same on every member (caddy/ca.ts); Caddy's own when absent. */
  caRoot?: { certFile: string; keyFile: string };
}

/** The `local` CA: never in the system trust store; the members' shared root when given. */
function pkiApp(root?: { certFile: string; keyFile: string }): Record<string, unknown> {
  const local: Record<string, unknown> = { install_trust: false };
  if (root) local.root = { certificate: root.certFile, private_key: root.keyFile, format: 'pem_file' };
  return { certificate_authorities: { local } };
}

export const entryKey = (domain: string, e: Pick<ProxyEntry, 'subdomain' | 'listen_port'>): string => `${e.subdomain}.${domain}:${e.listen_port}`;

const listenAddr = (host: string, port: number): string => (host === '' ? `:${port}` : host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);

function route(domain: string, e: ProxyEntry, up: { dial: string } | { error: string } | undefined): Record<string, unknown> {
  const host = `${e.subdomain}.${domain}`;
  if (!up || 'error' in up) {
    // Keep the other entries serving; this one says why it cannot.
    return {
      match: [{ host: [host] }],
      handle: [{ handler: 'static_response', status_code: 502, body: `hostd proxy: ${up ? up.error : 'upstream not resolved'}\n` }],
      terminal: true,
    };
  }
  const rp: Record<string, unknown> = { handler: 'reverse_proxy', upstreams: [{ dial: up.dial }] };
  if (effectiveScheme(e) === 'https') {
    rp.transport = { protocol: 'http', tls: effectiveSkipVerify(e) ? { insecure_skip_verify: true } : {} };
  }
  const set: Record<string, string[]> = {};
  const del: string[] = [];
  for (const [k, v] of Object.entries(e.header_up)) {
    // Go's HTTP client sends its own User-Agent when the header is absent and
    // none when it is present but empty: clearing it means setting it empty.
    if (v === '' && k.toLowerCase() === 'user-agent') set[k] = [''];
    else if (v === '') del.push(k);
    else set[k] = [v];
  }
  if (del.length || Object.keys(set).length) {
    rp.headers = { request: { ...(Object.keys(set).length ? { set } : {}), ...(del.length ? { delete: del } : {}) } };
  }
  return { match: [{ host: [host] }], handle: [rp], terminal: true };
}

export function buildCaddyConfig(cfg: ProxyConfig, o: BuildOptions): Record<string, unknown> {
  const byPort = new Map<number, { routes: unknown[]; hosts: string[] }>();
  const domains = cfg.domains.filter((d) => !o.skipDomains?.has(d.name));
  for (const d of domains) {
    for (const e of d.entries) {
      let s = byPort.get(e.listen_port);
      if (!s) byPort.set(e.listen_port, (s = { routes: [], hosts: [] }));
      s.routes.push(route(d.name, e, o.upstreams.get(entryKey(d.name, e))));
      s.hosts.push(`${e.subdomain}.${d.name}`);
    }
  }
  const servers: Record<string, unknown> = {};
  for (const port of [...byPort.keys()].sort((a, b) => a - b)) {
    const s = byPort.get(port)!;
    servers[`p${port}`] = {
      listen: [listenAddr(o.listenHost, port)],
      protocols: cfg.http3 ? ['h1', 'h2', 'h3'] : ['h1', 'h2'],
      automatic_https: { disable_redirects: true, skip_certificates: s.hosts },
      routes: s.routes,
    };
  }
  const policies = domains.map((d) => {
    const subjects = [`*.${d.name}`];
    if (d.cert_source === 'internal') return { subjects, issuers: [{ module: 'internal', ca: 'local' }] };
    const acme: Record<string, unknown> = { module: 'acme' };
    if (cfg.acme?.email) acme.email = cfg.acme.email;
    if (cfg.acme?.dir_url) acme.ca = cfg.acme.dir_url;
    const dns: Record<string, unknown> = { provider: { ...(o.credentials.get(d.cert_source) ?? {}), name: d.cert_source } };
    dns.resolvers = cfg.acme?.dns_resolvers?.length ? cfg.acme.dns_resolvers : ['1.1.1.1', '8.8.8.8'];
    acme.challenges = { http: { disabled: true }, 'tls-alpn': { disabled: true }, dns };
    return { subjects, issuers: [acme] };
  });
  const apps: Record<string, unknown> = { pki: pkiApp(o.caRoot) };
  if (domains.length) {
    apps.tls = { certificates: { automate: domains.map((d) => `*.${d.name}`) }, automation: { policies } };
  }
  if (Object.keys(servers).length) apps.http = { servers };
  return {
    admin: { listen: `unix/${o.adminSocket}`, config: { persist: false } },
    storage: { module: 'file_system', root: o.storageRoot },
    apps,
  };
}

/** The bootstrap configuration Caddy starts with: admin socket and storage only. */
export function bootConfig(o: Pick<BuildOptions, 'adminSocket' | 'storageRoot' | 'caRoot'>): Record<string, unknown> {
  return {
    admin: { listen: `unix/${o.adminSocket}`, config: { persist: false } },
    storage: { module: 'file_system', root: o.storageRoot },
    apps: { pki: pkiApp(o.caRoot) },
  };
}

/** A copy with provider credentials replaced (for incident bundles and diagnostics). */
export function redactCaddyConfig(c: unknown): unknown {
  const walk = (v: unknown, underProvider: boolean): unknown => {
    if (Array.isArray(v)) return v.map((x) => walk(x, underProvider));
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        if (underProvider && k !== 'name') out[k] = '[redacted]';
        else out[k] = walk(x, k === 'provider');
      }
      return out;
    }
    return v;
  };
  return walk(c, false);
}
