/**
 * The `proxy:` section of the config file (all optional):
 *
 *   proxy:
 *     listen_host: ""          # address Caddy binds for every entry's listen port; "" = all addresses
 *     dns_listen: ""           # host:port of the built-in DNS responder; "" = no responder
 *     address: ""              # this node's address for DNS answers when no floating address is set
 *     caddy_binary: caddy
 *     upstream_check_ms: 10000 # TCP checks of every entry's upstream on the holder
 *     auto_takeover: true      # take the proxy over when the cluster's probes find the holder unreachable
 *     takeover_grace_ms: 0     # extra wait before that (members wait 1 s more per rank)
 *     tick_ms: 250             # how often the data plane re-checks the lease, members and targets
 *     handoff_ms: 3000         # how long a released IPv4 floating address stays parked on lo
 *     allow_loopback_upstreams: false      # entries may dial this host's loopback by `host` (127/8, ::1, 0.0.0.0, ::, localhost)
 *     allow_privileged_listen_ports: false # entries may listen on ports below 1024 other than 80 and 443
 *
 * The two `allow_` settings widen what a `proxy.manage` token reaches
 * (docs/security.md): each is the operator's knowing choice, per node.
 */
import net from 'node:net';
import { parseHostPort } from './host-port.js';

export interface ProxySettings {
  listenHost: string;
  dnsListen: { host: string; port: number } | null;
  address: string | null;
  caddyBinary: string;
  upstreamCheckMs: number;
  autoTakeover: boolean;
  takeoverGraceMs: number;
  tickMs: number;
  handoffMs: number;
  allowLoopbackUpstreams: boolean;
  allowPrivilegedListenPorts: boolean;
}

const KEYS = [
  'listen_host',
  'dns_listen',
  'address',
  'caddy_binary',
  'upstream_check_ms',
  'auto_takeover',
  'takeover_grace_ms',
  'tick_ms',
  'handoff_ms',
  'allow_loopback_upstreams',
  'allow_privileged_listen_ports',
];

export function parseProxySettings(raw: unknown): ProxySettings {
  const s = (raw ?? {}) as Record<string, unknown>;
  if (typeof s !== 'object' || Array.isArray(s)) throw new Error('proxy: the section must be a mapping');
  for (const k of Object.keys(s)) if (!KEYS.includes(k)) throw new Error(`proxy: unknown setting '${k}' (known: ${KEYS.join(', ')})`);
  const str = (k: string, def: string): string => {
    const v = s[k] ?? def;
    if (typeof v !== 'string') throw new Error(`proxy.${k} must be a string`);
    return v;
  };
  const num = (k: string, def: number, min: number): number => {
    const v = s[k] ?? def;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min) throw new Error(`proxy.${k} must be an integer >= ${min}`);
    return v;
  };
  const listenHost = str('listen_host', '');
  if (listenHost !== '' && !net.isIP(listenHost)) throw new Error(`proxy.listen_host must be an IP address or empty, got '${listenHost}'`);
  const dl = str('dns_listen', '');
  const dnsListen = dl === '' ? null : parseHostPort(dl);
  if (dl !== '' && !dnsListen) throw new Error(`proxy.dns_listen must be host:port with an IP host, got '${dl}'`);
  const address = str('address', '');
  if (address !== '' && !net.isIP(address)) throw new Error(`proxy.address must be an IP address, got '${address}'`);
  const bool = (k: string, def: boolean): boolean => {
    const v = s[k] ?? def;
    if (typeof v !== 'boolean') throw new Error(`proxy.${k} must be a boolean`);
    return v;
  };
  const at = bool('auto_takeover', true);
  return {
    listenHost,
    dnsListen,
    address: address || null,
    caddyBinary: str('caddy_binary', 'caddy'),
    upstreamCheckMs: num('upstream_check_ms', 10_000, 100),
    autoTakeover: at,
    takeoverGraceMs: num('takeover_grace_ms', 0, 0),
    tickMs: num('tick_ms', 250, 50),
    handoffMs: num('handoff_ms', 3000, 0),
    allowLoopbackUpstreams: bool('allow_loopback_upstreams', false),
    allowPrivilegedListenPorts: bool('allow_privileged_listen_ports', false),
  };
}
