/**
 * The TCP ports hostd itself holds on this node, which no proxy entry may
 * publish (as its upstream) or take (as its listen port):
 *
 *  - every listener in the daemon's config: each `host:port` field of it
 *    (`http_addr`, `cluster_addr`, and any listener added later the same
 *    way), and the proxy's own DNS responder (`proxy.dns_listen`);
 *  - every TCP socket this process listens on, read from /proc: a listener
 *    configured with port 0 (tests), or one that is not in the config;
 *  - Caddy's admin endpoint: hostd's Caddy has it on a unix socket, but any
 *    other Caddy on the host (Debian's caddy.service) has it on
 *    localhost:2019, where it loads any configuration it is sent.
 */
import fs from 'node:fs';
import type { Config, HostAddr } from '../../config.js';

export const CADDY_ADMIN_PORT = 2019;

export interface HeldPort {
  port: number;
  /** What holds it, for messages: "hostd's API listener (http_addr)". */
  what: string;
}

const isHostAddr = (v: unknown): v is HostAddr =>
  !!v && typeof v === 'object' && typeof (v as HostAddr).host === 'string' && typeof (v as HostAddr).port === 'number';

/** Config field names to the keys an operator knows them by. */
const KNOWN: Record<string, string> = { http: "hostd's API listener (http_addr)", cluster: "hostd's cluster listener (cluster_addr)" };

/** The listeners named in the daemon's config. */
export function configuredPorts(config: Config, dnsPort: number | null): HeldPort[] {
  const out: HeldPort[] = [];
  for (const [k, v] of Object.entries(config as unknown as Record<string, unknown>)) {
    if (isHostAddr(v) && v.port > 0) out.push({ port: v.port, what: KNOWN[k] ?? `a hostd listener (${k} in the config)` });
  }
  if (dnsPort) out.push({ port: dnsPort, what: "hostd's DNS responder (proxy.dns_listen)" });
  out.push({ port: CADDY_ADMIN_PORT, what: "Caddy's admin endpoint (its default port)" });
  return out;
}

/** Ports of TCP sockets in LISTEN state held by this process (Linux /proc). */
export function ownListeningPorts(): number[] {
  const inodes = new Set<string>();
  let fds: string[] = [];
  try {
    fds = fs.readdirSync('/proc/self/fd');
  } catch {
    return [];
  }
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/self/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch {
      /* closed meanwhile */
    }
  }
  const ports = new Set<number>();
  for (const file of ['/proc/self/net/tcp', '/proc/self/net/tcp6']) {
    let text = '';
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is f[1] (hex ip:port), st is f[3] (0A = LISTEN), inode is f[9].
      if (f.length > 9 && f[3] === '0A' && inodes.has(f[9])) ports.add(parseInt(f[1].split(':')[1], 16));
    }
  }
  return [...ports];
}

/** Everything hostd holds, read again at most every `ttlMs` (a listener bound after start is found then). */
export class HeldPorts {
  private cache: { at: number; ports: HeldPort[] } | null = null;

  constructor(
    private readonly configured: () => HeldPort[],
    private readonly ttlMs = 2000,
    private readonly own: () => number[] = ownListeningPorts,
  ) {}

  list(): HeldPort[] {
    if (this.cache && Date.now() - this.cache.at < this.ttlMs) return this.cache.ports;
    return this.read();
  }

  /**
   * What holds `port`, or null. A port the cached list does not name is
   * looked up afresh: the cache may predate a listener (the API binds after
   * the domains open), and a refusal must never miss a port hostd holds.
   */
  holder(port: number): HeldPort | null {
    return this.list().find((p) => p.port === port) ?? this.read().find((p) => p.port === port) ?? null;
  }

  private read(): HeldPort[] {
    const ports = [...this.configured()];
    for (const p of this.own()) if (!ports.some((x) => x.port === p)) ports.push({ port: p, what: 'a listening socket of hostd' });
    this.cache = { at: Date.now(), ports };
    return ports;
  }
}
