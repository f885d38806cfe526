/**
 * `host:port` with an IP address for host, as the proxy's settings and DNS
 * arguments take it (`dns_listen`, `dns_upstreams`, `dns_resolvers`).
 */
import net from 'node:net';

export interface HostPort {
  host: string;
  port: number;
}

/** `host`, `host:port`, `[v6]:port` or a bare IPv6 address into host and port (53 by default). */
export function parseHostPort(s: string, defPort = 53): HostPort | null {
  const t = s.trim();
  if (net.isIP(t)) return { host: t, port: defPort };
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(t) ?? /^([^:]+):(\d{1,5})$/.exec(t);
  if (!m || !net.isIP(m[1])) return null;
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { host: m[1], port } : null;
}

/** `ip:port`, bracketing an IPv6 address. */
export const hostPort = (host: string, port: number): string => (net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`);
