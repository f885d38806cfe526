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
import { domainNameProblem, effectiveScheme, effectiveSkipVerify, entryKey, type ProxyConfig, type ProxyEntry } from '../config.js';
import type { ServePlan, UpstreamDial } from '../driver.js';
import { caddyLiteral } from '../policy/placeholders.js';
import { acmeSettingsProblem, credentialKeysWithBraces, headerRefusal } from '../policy/rules.js';

export interface BuildOptions {
  /** Absolute path of Caddy's admin unix socket. */
  adminSocket: string;
  /** Absolute directory of Caddy's certificate storage. */
  storageRoot: string;
  /** Host part of every listener; '' binds all addresses. */
  listenHost: string;
  /**
   * Dial address (`ip:port`, checked by the proxy's rules) of each entry's
   * upstream by entryKey(), with the TLS server name when the entry named a
   * host; or why there is none now.
   */
  upstreams: Map<string, UpstreamDial>;
  /**
   * Entries the proxy's rules refuse on this node (policy/rules.ts), by
   * entryKey(): Caddy dials nothing for them and sends none of their headers.
   * One refused for its listen port gets no listener at all.
   */
  refused?: Map<string, { rule: string }>;
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

/** Rules about the listen port: an entry refused by one of them is left out whole. */
const LISTEN_RULES = new Set(['privileged-listen-port', 'held-listen-port']);

const listenAddr = (host: string, port: number): string => (host === '' ? `:${port}` : host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);

/** A route that answers 502 with `text`; Caddy expands placeholders in a static body, so it goes escaped. */
function stub(host: string, text: string): Record<string, unknown> {
  return {
    match: [{ host: [host] }],
    handle: [{ handler: 'static_response', status_code: 502, body: caddyLiteral(`hostd proxy: ${text}\n`) }],
    terminal: true,
  };
}

function route(domain: string, e: ProxyEntry, up: UpstreamDial | undefined, refused: { rule: string } | undefined): Record<string, unknown> {
  const host = `${e.subdomain}.${domain}`;
  // The rule's name only: what it found (ports, addresses) is for the operator's host-status, not for every client.
  if (refused) return stub(host, `this entry is refused by the host's proxy rules (${refused.rule}); GET /proxy/host-status says why`);
  // Keep the other entries serving; this one says why it cannot.
  if (!up || 'error' in up) return stub(host, up ? up.error : 'upstream not resolved');
  const rp: Record<string, unknown> = { handler: 'reverse_proxy', upstreams: [{ dial: up.dial }] };
  if (effectiveScheme(e) === 'https') {
    const tls: Record<string, unknown> = effectiveSkipVerify(e) ? { insecure_skip_verify: true } : {};
    // Dialled by address (resolved and checked by hostd): the name is still the one to verify and send as SNI.
    if (up.serverName) tls.server_name = up.serverName;
    rp.transport = { protocol: 'http', tls };
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
  // The rules that need nothing but the configuration hold here too, whatever the caller passed.
  const acmeBad = acmeSettingsProblem(cfg.acme) !== null;
  const domains = cfg.domains.filter(
    (d) =>
      !o.skipDomains?.has(d.name) &&
      domainNameProblem(d.name) === null &&
      !(d.cert_source !== 'internal' && (acmeBad || credentialKeysWithBraces(o.credentials.get(d.cert_source) ?? {}).length > 0)),
  );
  for (const d of domains) {
    for (const e of d.entries) {
      const refused = o.refused?.get(entryKey(d.name, e)) ?? headerRefusal(e.header_up) ?? undefined;
      if (refused && LISTEN_RULES.has(refused.rule)) continue;
      let s = byPort.get(e.listen_port);
      if (!s) byPort.set(e.listen_port, (s = { routes: [], hosts: [] }));
      s.routes.push(route(d.name, e, o.upstreams.get(entryKey(d.name, e)), refused));
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

/** What buildCaddyConfig is given for a plan: the plan, and where this Caddy keeps its admin socket and storage. */
export function buildPlan(plan: ServePlan, place: Pick<BuildOptions, 'adminSocket' | 'storageRoot'>): Record<string, unknown> {
  return buildCaddyConfig(plan.config, {
    ...place,
    listenHost: plan.listenHost,
    upstreams: plan.upstreams,
    refused: plan.refused,
    credentials: plan.credentials,
    skipDomains: plan.skipDomains,
    caRoot: plan.caRoot,
  });
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
