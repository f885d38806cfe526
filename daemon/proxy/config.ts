/**
 * The proxy domain's replicated configuration: its schema, its default and
 * its validation. The cluster replicates it (cluster/replicated.ts) without
 * knowing its shape.
 *
 * SECRETS ARE NOT PART OF THIS OBJECT. ACME DNS provider credentials (`PUT /proxy/acme/credentials`)
 * go to the secret store, never here: this object is copied to every member, shown by
 * `GET /proxy/config` and logged. validateProxyConfig refuses credential-looking keys.
 */
import { PATTERNS, headerMap } from '../../api/registry/schema.js';
import { badRequest } from '../lib/errors.js';
import type { LeaseView, ReplicatedSnapshot } from '../domain.js';

export interface ProxyDomain {
  name: string;
  /** `internal` for the internal CA, or a DNS provider name for a public ACME certificate. */
  cert_source: string;
  entries: ProxyEntry[];
}

/**
 * One subdomain entry. `(subdomain, listen_port)` is unique within a domain;
 * `listen_port` is stored resolved (443, never 0). Exactly one of `host` and
 * `target_id` is set; a `target_id` is resolved to the guest's current address
 * each time the configuration is built.
 */
export interface ProxyEntry {
  subdomain: string;
  listen_port: number;
  port: number;
  host: string | null;
  /** `vm:<id>`, `lxc:<id>` or `app:<id>` (see GET /proxy/upstreams). */
  target_id: string | null;
  /** '' auto-detects from the port (443 gives https). */
  upstream_scheme: 'http' | 'https' | '';
  /** null: legacy auto-detection (skip verification on port 443). */
  tls_skip_verify: boolean | null;
  header_up: Record<string, string>;
}

// The registry's rules for these arguments, applied here to what is stored (an upgrade or a
// member may have stored what the arguments would refuse now): one source for each rule.
const DNS_LABEL = new RegExp(PATTERNS.dnsLabel);
const HEADER_TOKEN = new RegExp((headerMap().propertyNames as { pattern: string }).pattern);

/** A stored label: the registry's DNS label, lowercase (services store names lowercase). */
export const isLabel = (s: string): boolean => DNS_LABEL.test(s) && s === s.toLowerCase();

/** 0 or omitted means 443. */
export const listenPortOf = (p: number | null | undefined): number => (p ? p : 443);

/** The scheme Caddy uses toward the upstream: explicit, else https on port 443, else http. */
export const effectiveScheme = (e: Pick<ProxyEntry, 'upstream_scheme' | 'port'>): 'http' | 'https' =>
  e.upstream_scheme === 'http' || e.upstream_scheme === 'https' ? e.upstream_scheme : e.port === 443 ? 'https' : 'http';

/** Whether upstream TLS verification is skipped: authoritative when set, else on port 443; only for https. */
export const effectiveSkipVerify = (e: Pick<ProxyEntry, 'upstream_scheme' | 'port' | 'tls_skip_verify'>): boolean =>
  effectiveScheme(e) === 'https' && (e.tls_skip_verify ?? e.port === 443);

/**
 * What is wrong with a stored base domain name (the registry's `dnsName` of
 * two labels or more, lowercase), or null. Arguments are checked by the
 * registry's schema; this checks what is stored, before Caddy is given it.
 */
export function domainNameProblem(name: string): string | null {
  if (name.length > 253) return 'is longer than 253 characters';
  const labels = name.split('.');
  if (labels.length < 2) return 'needs at least two labels (e.g. home.example)';
  const bad = labels.find((l) => !isLabel(l));
  if (bad !== undefined) return `has an invalid label '${bad}' (lowercase letters, digits and inner hyphens, 1-63 characters)`;
  return null;
}

/** An entry's key in the built configuration and in host-status: `<subdomain>.<domain>:<listen_port>`. */
export const entryKey = (domain: string, e: Pick<ProxyEntry, 'subdomain' | 'listen_port'>): string => `${e.subdomain}.${domain}:${e.listen_port}`;

/** ACME account settings. The DNS provider credentials are NOT here: they go to the secret store. */
export interface ProxyAcme {
  email: string;
  /** Empty uses the public production directory. */
  dir_url: string;
  /** Resolvers for the DNS-01 propagation precheck; null or empty uses 1.1.1.1 and 8.8.8.8. */
  dns_resolvers: string[] | null;
}

export interface ProxyVip {
  vip: string;
  vip_iface: string;
  vip_prefix: number;
  vip6: string | null;
  vip6_prefix: number | null;
}

export interface ProxyConfig {
  enabled: boolean;
  http3: boolean;
  domains: ProxyDomain[];
  acme: ProxyAcme | null;
  vip: ProxyVip | null;
  dns_upstreams: string[];
}

export type ProxyConfigSnapshot = ReplicatedSnapshot<ProxyConfig>;

/** What GET /proxy/config shows. */
export interface ProxyConfigView {
  holder: string | null;
  epoch: number;
  holding_here: boolean;
  version: number;
  config: ProxyConfig;
}

export function defaultProxyConfig(): ProxyConfig {
  return { enabled: false, http3: false, domains: [], acme: null, vip: null, dns_upstreams: [] };
}

// ---------------------------------------------------------------------------
// Validation

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStrArray = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
const SECRET_KEY = /credential|secret|password|passwd|token|api_?key|private_?key/i;

function onlyKeys(o: Record<string, unknown>, allowed: readonly string[], what: string): void {
  for (const k of Object.keys(o)) {
    if (SECRET_KEY.test(k)) throw badRequest(`${what}.${k}: credentials do not belong in the replicated proxy configuration; they go to the secret store`);
    if (!allowed.includes(k)) throw badRequest(`${what} has an unknown field '${k}'`);
  }
}

/** Checks a whole configuration; throws 400 naming the first problem. Returns a deep copy. */
export function validateProxyConfig(v: unknown): ProxyConfig {
  if (!isObj(v)) throw badRequest('proxy configuration must be an object');
  onlyKeys(v, ['enabled', 'http3', 'domains', 'acme', 'vip', 'dns_upstreams'], 'config');
  if (typeof v.enabled !== 'boolean') throw badRequest('config.enabled must be a boolean');
  if (typeof v.http3 !== 'boolean') throw badRequest('config.http3 must be a boolean');
  if (!Array.isArray(v.domains)) throw badRequest('config.domains must be an array');
  const names = new Set<string>();
  v.domains.forEach((d, i) => {
    const what = `config.domains[${i}]`;
    if (!isObj(d)) throw badRequest(`${what} must be an object`);
    onlyKeys(d, ['name', 'cert_source', 'entries'], what);
    if (typeof d.name !== 'string' || d.name === '') throw badRequest(`${what}.name must be a non-empty string`);
    if (names.has(d.name)) throw badRequest(`${what}.name '${d.name}' appears twice`);
    names.add(d.name);
    if (typeof d.cert_source !== 'string' || d.cert_source === '') throw badRequest(`${what}.cert_source must be a non-empty string`);
    if (!Array.isArray(d.entries) || !d.entries.every(isObj)) throw badRequest(`${what}.entries must be an array of objects`);
    const keys = new Set<string>();
    d.entries.forEach((e, j) => {
      const ew = `${what}.entries[${j}]`;
      validateEntry(e as Record<string, unknown>, ew);
      const k = `${e.subdomain}:${e.listen_port}`;
      if (keys.has(k)) throw badRequest(`${ew}: subdomain '${e.subdomain}' on listen port ${e.listen_port} appears twice`);
      keys.add(k);
    });
  });
  if (v.acme !== null) {
    if (!isObj(v.acme)) throw badRequest('config.acme must be an object or null');
    onlyKeys(v.acme, ['email', 'dir_url', 'dns_resolvers'], 'config.acme');
    if (typeof v.acme.email !== 'string') throw badRequest('config.acme.email must be a string');
    if (typeof v.acme.dir_url !== 'string') throw badRequest('config.acme.dir_url must be a string');
    if (v.acme.dns_resolvers !== null && !isStrArray(v.acme.dns_resolvers)) throw badRequest('config.acme.dns_resolvers must be an array of strings or null');
  }
  if (v.vip !== null) {
    if (!isObj(v.vip)) throw badRequest('config.vip must be an object or null');
    onlyKeys(v.vip, ['vip', 'vip_iface', 'vip_prefix', 'vip6', 'vip6_prefix'], 'config.vip');
    const { vip, vip_iface, vip_prefix, vip6, vip6_prefix } = v.vip;
    if (typeof vip !== 'string' || typeof vip_iface !== 'string') throw badRequest('config.vip.vip and vip_iface must be strings');
    if (!Number.isInteger(vip_prefix) || (vip_prefix as number) < 1 || (vip_prefix as number) > 32)
      throw badRequest('config.vip.vip_prefix must be an integer 1-32');
    if (vip6 !== null && typeof vip6 !== 'string') throw badRequest('config.vip.vip6 must be a string or null');
    if (vip6_prefix !== null && (!Number.isInteger(vip6_prefix) || (vip6_prefix as number) < 1 || (vip6_prefix as number) > 128)) {
      throw badRequest('config.vip.vip6_prefix must be an integer 1-128 or null');
    }
  }
  if (!isStrArray(v.dns_upstreams)) throw badRequest('config.dns_upstreams must be an array of strings');
  return structuredClone(v) as unknown as ProxyConfig;
}

const ENTRY_KEYS = ['subdomain', 'listen_port', 'port', 'host', 'target_id', 'upstream_scheme', 'tls_skip_verify', 'header_up'] as const;
const isPort = (v: unknown): boolean => Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 65535;

function validateEntry(e: Record<string, unknown>, what: string): void {
  onlyKeys(e, ENTRY_KEYS, what);
  for (const k of ENTRY_KEYS) if (!(k in e)) throw badRequest(`${what}.${k} is missing`);
  if (typeof e.subdomain !== 'string' || !isLabel(e.subdomain)) throw badRequest(`${what}.subdomain must be one DNS label`);
  if (!isPort(e.listen_port)) throw badRequest(`${what}.listen_port must be an integer 1-65535`);
  if (!isPort(e.port)) throw badRequest(`${what}.port must be an integer 1-65535`);
  if (e.host !== null && (typeof e.host !== 'string' || e.host === '')) throw badRequest(`${what}.host must be a non-empty string or null`);
  if (e.target_id !== null && (typeof e.target_id !== 'string' || e.target_id === '')) throw badRequest(`${what}.target_id must be a non-empty string or null`);
  if ((e.host === null) === (e.target_id === null)) throw badRequest(`${what} needs exactly one of host and target_id`);
  if (!['http', 'https', ''].includes(e.upstream_scheme as string)) throw badRequest(`${what}.upstream_scheme must be http, https or empty`);
  if (e.tls_skip_verify !== null && typeof e.tls_skip_verify !== 'boolean') throw badRequest(`${what}.tls_skip_verify must be a boolean or null`);
  if (!isObj(e.header_up)) throw badRequest(`${what}.header_up must be an object`);
  for (const [k, v] of Object.entries(e.header_up)) {
    if (!HEADER_TOKEN.test(k)) throw badRequest(`${what}.header_up: '${k}' is not an HTTP header name (RFC 7230 token)`);
    if (typeof v !== 'string') throw badRequest(`${what}.header_up.${k} must be a string`);
  }
}

/** How the cluster replicates it. */
export const proxyConfigSpec = {
  sublevel: 'proxy-config',
  what: 'proxy configuration',
  initial: defaultProxyConfig,
  validate: validateProxyConfig,
};

/** What GET /proxy/config returns on node `selfId`. */
export function proxyConfigView(lease: { state(): LeaseView }, configStore: { get(): ProxyConfigSnapshot }, selfId: string, alone = false): ProxyConfigView {
  const l = lease.state();
  const c = configStore.get();
  // A node outside a cluster holds the proxy without a lease: say so, as host-status does.
  if (alone && !l.holder) return { holder: selfId, epoch: l.epoch, holding_here: true, version: c.version, config: c.config };
  return { holder: l.holder, epoch: l.epoch, holding_here: l.holding && l.holder === selfId, version: c.version, config: c.config };
}
