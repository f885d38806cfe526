/**
 * The proxy's containment rules, in one place: what an entry may listen on,
 * what it may dial, and which placeholders its headers may use. The service
 * applies them to a call (400, or 403 naming the setting that would allow
 * it); the data plane applies them again to every entry each time it builds
 * Caddy's configuration, on the node that serves it, with that node's
 * settings and listeners: an entry stored before these rules, replicated from
 * a member with wider settings, or whose target or DNS answer changed since,
 * is left out of what Caddy dials and listed in `GET /proxy/host-status`.
 * Nothing stored is deleted.
 *
 * Status: 403 when an operator setting would allow the request (the LXC
 * domain's `allow_privileged` refusal is the same kind), 400 when nothing
 * makes it acceptable (docs/api-decisions.md).
 */
import net from 'node:net';
import { PATTERNS } from '../../../api/registry/schema.js';
import { ApiError } from '../../lib/errors.js';
import { canonicalIp, classifyIp, loopbackName, numericHostForm, type AddressKind } from './addresses.js';
import type { HeldPorts } from './listeners.js';
import { hasBrace, placeholderProblem } from './placeholders.js';
import type { NameResolver } from './resolve.js';

export type RuleName =
  | 'header-placeholder'
  | 'upstream-host'
  | 'hostd-port'
  | 'proxy-loop'
  | 'loopback-upstream'
  | 'target-address'
  | 'privileged-listen-port'
  | 'held-listen-port';

export interface Refusal {
  rule: RuleName;
  /** 400: never acceptable; 403: a setting would allow it. */
  status: 400 | 403;
  message: string;
}

export interface RuleContext {
  /** `proxy.allow_loopback_upstreams` */
  allowLoopback: boolean;
  /** `proxy.allow_privileged_listen_ports` */
  allowPrivilegedPorts: boolean;
  /** Ports hostd and Caddy's admin hold on this node. */
  held: HeldPorts;
  /** This node's own addresses (canonical). */
  local(): Set<string>;
  resolver: NameResolver;
  /** The proxy's own listeners, when what is checked is an entry's upstream (proxyListeners()). */
  proxy?: ProxyListeners;
}

/** Where the proxy itself listens: an entry that dials one of these is a loop. */
export interface ProxyListeners {
  /** Every listen port of the configuration. */
  ports: ReadonlySet<number>;
  /** `proxy.listen_host` ('' for every address of this host). */
  listenHost: string;
  /** The configured floating addresses (canonical): the proxy's wherever it is held. */
  floating: ReadonlySet<string>;
}

/** The proxy's listeners for a configuration (its entries' listen ports, its floating addresses). */
export function proxyListeners(
  cfg: { domains: Array<{ entries: Array<{ listen_port: number }> }>; vip: { vip: string; vip6: string | null } | null },
  listenHost: string,
): ProxyListeners {
  const floating = new Set<string>();
  for (const a of [cfg.vip?.vip, cfg.vip?.vip6]) {
    const c = a ? canonicalIp(a) : null;
    if (c) floating.add(c);
  }
  return { ports: new Set(cfg.domains.flatMap((d) => d.entries.map((e) => e.listen_port))), listenHost, floating };
}

export const refusalError = (r: Refusal): ApiError => new ApiError(r.status, r.message);

const refuse = (rule: RuleName, status: 400 | 403, message: string): Refusal => ({ rule, status, message });

// The registry's label rule (api/registry/schema.ts), for hosts stored before the schema said so.
const HOST_LABEL = new RegExp(PATTERNS.dnsLabel);

// ------------------------------------------------------------------ listen ports

/** Ports below 1024 other than these need `proxy.allow_privileged_listen_ports`. */
export const OPEN_PRIVILEGED_PORTS = [80, 443];

export function listenPortRefusal(port: number, ctx: Pick<RuleContext, 'allowPrivilegedPorts' | 'held'>): Refusal | null {
  const held = ctx.held.holder(port);
  if (held)
    return refuse('held-listen-port', 400, `listen_port ${port} is held by ${held.what}; the proxy never listens on a port hostd or Caddy's admin holds`);
  if (port < 1024 && !OPEN_PRIVILEGED_PORTS.includes(port) && !ctx.allowPrivilegedPorts) {
    return refuse(
      'privileged-listen-port',
      403,
      `listen_port ${port} is a privileged port (below 1024) other than 80 and 443; refused unless proxy.allow_privileged_listen_ports is true in the config file`,
    );
  }
  return null;
}

// ------------------------------------------------------------------ headers

export function headerRefusal(headers: Record<string, string>): Refusal | null {
  for (const [k, v] of Object.entries(headers)) {
    const p = placeholderProblem(v);
    if (p) return refuse('header-placeholder', 400, `header_up.${k}: ${p}`);
  }
  return null;
}

// ------------------------------------------------------------------ upstreams

/** The form of a `host` argument: an IP address or a host name; never a numeric shorthand, a zone or a brace. */
export function hostFormRefusal(host: string): Refusal | null {
  if (net.isIP(host)) return host.includes('%') ? refuse('upstream-host', 400, `host '${host}': an address with a zone is not accepted`) : null;
  if (hasBrace(host) || host.length > 253 || !host.split('.').every((l) => HOST_LABEL.test(l))) {
    return refuse('upstream-host', 400, `host '${host}' must be an IP address or a hostname`);
  }
  if (numericHostForm(host))
    return refuse('upstream-host', 400, `host '${host}' is a numeric address form a resolver reads as IPv4 (write the address as a.b.c.d)`);
  return null;
}

const KIND_WORDS: Record<Exclude<AddressKind, 'other'>, string> = {
  loopback: 'a loopback address',
  unspecified: "the unspecified address (it reaches this host's loopback)",
  'this-host': "one of this host's own addresses",
};

/**
 * What dialling `ip:port` from this node is refused for, or null.
 * `via`: how the address was chosen. A `host` the caller gave may reach
 * this host's loopback only with `proxy.allow_loopback_upstreams`, and
 * hostd's own ports never, on any address of this host, nor the proxy's own
 * listeners (`ctx.proxy`: a loop, also on a floating address); an app's published
 * port is set up by hostd and allowed; a VM
 * or container never has an address of this host (one reporting it is not
 * to be believed: its guest agent or its network namespace says so).
 */
export function dialRefusal(
  ip: string,
  port: number,
  via: { host: string } | { target: string; kind: 'app' | 'vm' | 'lxc' | 'sandbox' },
  ctx: RuleContext,
): Refusal | null {
  const kind = classifyIp(ip, ctx.local());
  const shown = 'host' in via && via.host !== ip ? `'${via.host}' (${ip})` : `'${ip}'`;
  const loop =
    'host' in via && ctx.proxy && dialsProxy(ip, kind, port, ctx.proxy)
      ? refuse('proxy-loop', 400, `upstream host ${shown} port ${port} is one of the proxy's own listeners; an entry that dials the proxy itself is a loop`)
      : null;
  if (kind === 'other') return loop;
  const held = ctx.held.holder(port);
  if (held) {
    return refuse(
      'hostd-port',
      400,
      `upstream ${'host' in via ? `host ${shown}` : `${via.target} at ${ip}`} port ${port} is ${held.what} on this host; the proxy never publishes hostd's listeners or Caddy's admin endpoint`,
    );
  }
  if (loop) return loop;
  if ('target' in via) {
    if (via.kind === 'app') return null;
    return refuse(
      'target-address',
      400,
      `${via.target} reports ${ip}, ${KIND_WORDS[kind]}, as its address; a ${via.kind === 'lxc' ? 'container' : 'VM'} never has one, so the proxy does not dial it`,
    );
  }
  // This host's own addresses (LAN, floating) reach only what already listens on them for the
  // network, never a loopback-only service: allowed, but for hostd's ports (above).
  if (kind === 'this-host' || ctx.allowLoopback) return null;
  return refuse(
    'loopback-upstream',
    403,
    `host ${shown} is ${KIND_WORDS[kind]}; upstreams on this host are refused unless proxy.allow_loopback_upstreams is true in the config file (an app, VM or container is reached through its target_id)`,
  );
}

/**
 * Whether `ip:port` reaches the proxy's own listener: a listen port of the
 * configuration on a floating address, or on an address of this host that
 * Caddy listens on (every one when `listen_host` is empty or a wildcard).
 */
function dialsProxy(ip: string, kind: AddressKind, port: number, p: ProxyListeners): boolean {
  if (!p.ports.has(port)) return false;
  const c = canonicalIp(ip);
  if (c && p.floating.has(c)) return true;
  if (kind === 'other') return false;
  if (p.listenHost === '' || p.listenHost === '0.0.0.0' || p.listenHost === '::' || kind === 'unspecified') return true;
  return c !== null && c === canonicalIp(p.listenHost);
}

export type HostDial = { dial: string; ip: string; serverName: string | null } | { refusal: Refusal } | { error: string; kind: 'missing' | 'unavailable' };

const hostPort = (ip: string, port: number) => (net.isIPv6(ip) ? `[${ip}]:${port}` : `${ip}:${port}`);

/**
 * Where Caddy is to dial an entry's `host`: an IP address is dialled as it
 * is; a name is resolved here and every address it has is checked (any
 * refused one refuses the entry), then its first address is dialled with
 * the name as TLS server name.
 */
export async function resolveHost(host: string, port: number, ctx: RuleContext, timeoutMs?: number): Promise<HostDial> {
  const form = hostFormRefusal(host);
  if (form) return { refusal: form };
  if (net.isIP(host)) {
    const r = dialRefusal(host, port, { host }, ctx);
    return r ? { refusal: r } : { dial: hostPort(host, port), ip: host, serverName: null };
  }
  if (loopbackName(host)) {
    const r = dialRefusal('127.0.0.1', port, { host }, ctx);
    if (r) return { refusal: r };
  }
  const res = await ctx.resolver.resolve(host, timeoutMs);
  if ('error' in res) return { error: `upstream host ${res.error}`, kind: res.kind };
  for (const ip of res.addresses) {
    const r = dialRefusal(ip, port, { host }, ctx);
    if (r) return { refusal: r };
  }
  const ip = res.addresses[0];
  return { dial: hostPort(ip, port), ip, serverName: host };
}

// ------------------------------------------------------------------ ACME settings and credentials

/**
 * Caddy expands placeholders in the ACME issuer's `email` and `ca` (2.5 and
 * later) and DNS provider modules expand them in their credential fields
 * (that is how a Caddyfile reads `{env.CF_API_TOKEN}`): a brace there would
 * send host values to the directory or the provider.
 */
export function acmeSettingsProblem(acme: { email: string; dir_url: string } | null): string | null {
  if (!acme) return null;
  if (hasBrace(acme.email)) return 'the ACME email holds a brace, which Caddy would expand as a placeholder';
  if (hasBrace(acme.dir_url)) return 'the ACME dir_url holds a brace, which Caddy would expand as a placeholder';
  return null;
}

/** The credential keys whose value holds a brace (names only: the values are secrets). */
export function credentialKeysWithBraces(creds: Record<string, string>): string[] {
  return Object.entries(creds)
    .filter(([, v]) => hasBrace(v))
    .map(([k]) => k)
    .sort();
}

// ------------------------------------------------------------------ DNS forwarders

/**
 * A resolver the built-in DNS responder forwards to. The responder sends a
 * client's query bytes on as they came, so a forwarder is an upstream like
 * an entry's: this host's loopback only with `proxy.allow_loopback_upstreams`,
 * hostd's own ports never (its own responder would be a forwarding loop).
 */
export function dnsUpstreamRefusal(text: string, hp: { host: string; port: number }, ctx: RuleContext): Refusal | null {
  // A forwarder on a proxy listen port is no loop (the responder speaks DNS, not HTTP).
  const r = dialRefusal(hp.host, hp.port, { host: hp.host }, { ...ctx, proxy: undefined });
  return r ? { ...r, message: `dns_upstreams '${text}': ${r.message}` } : null;
}
