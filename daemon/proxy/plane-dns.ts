/**
 * The built-in DNS responder on this node: it runs wherever the proxy is
 * enabled and `proxy.dns_listen` is set. Names under a base domain get the
 * floating address, or without one the holder's address; other names go to
 * the forwarders the rules allow (screen.ts).
 */
import net from 'node:net';
import type { PeerInfo } from '../domain.js';
import type { ProxyConfig } from './config.js';
import type { ProxyContext } from './context.js';
import type { DnsServer, DnsStats, ZoneAnswer } from './driver.js';
import type { Screening } from './screen.js';

export interface DnsStatus {
  listen: string | null;
  running: boolean;
  error: string | null;
}

export class DnsPlane {
  private server: DnsServer | null = null;
  private error: string | null = null;

  constructor(
    private readonly ctx: ProxyContext,
    private readonly screening: Screening,
    /** The cluster's peers as the data plane last read them (for the holder's address). */
    private readonly peers: () => PeerInfo[],
  ) {}

  async reconcile(cfg: ProxyConfig): Promise<void> {
    const want = cfg.enabled ? this.ctx.settings.dnsListen : null;
    const s = this.server;
    if (s && (!want || s.listen.host !== want.host || s.listen.port !== want.port)) {
      await s.stop();
      this.server = null;
    }
    if (!want || this.server) return;
    try {
      this.server = await this.ctx.drivers.dns.serve(want, {
        zone: (name) => this.zoneAnswer(name),
        upstreams: () => this.screening.dnsUpstreams(this.ctx.config().config.dns_upstreams).allowed,
      });
      this.error = null;
    } catch (err) {
      this.error = `cannot listen on ${want.host}:${want.port}: ${(err as Error).message}`;
    }
  }

  async stop(): Promise<void> {
    await this.server?.stop();
    this.server = null;
  }

  status(): DnsStatus {
    const l = this.ctx.settings.dnsListen;
    return {
      listen: l ? `${l.host}:${l.port}` : null,
      running: !!this.server?.running(),
      error: l ? this.error : 'not configured: set proxy.dns_listen in the config file',
    };
  }

  stats(): DnsStats | null {
    return this.server?.stats() ?? null;
  }

  /** What the responder answers for a name under a base domain. */
  zoneAnswer(name: string): ZoneAnswer {
    const cfg = this.ctx.config().config;
    const inZone = cfg.domains.some((d) => name === d.name || name.endsWith(`.${d.name}`));
    if (!inZone) return { inZone, a: [], aaaa: [] };
    if (cfg.vip) return { inZone, a: [cfg.vip.vip], aaaa: cfg.vip.vip6 ? [cfg.vip.vip6] : [] };
    const addr = this.holderAddress();
    return { inZone, a: addr && net.isIPv4(addr) ? [addr] : [], aaaa: addr && net.isIPv6(addr) ? [addr] : [] };
  }

  /** The holder's address: this node's `address` setting when it holds, else the holder's cluster address. */
  private holderAddress(): string | null {
    const { settings } = this.ctx;
    if (this.ctx.holdsProxy()) {
      if (settings.address) return settings.address;
      const h = settings.dnsListen?.host;
      return h && h !== '0.0.0.0' && h !== '::' ? h : null;
    }
    const holder = this.ctx.lease().holder;
    const p = this.peers().find((x) => x.peer_id === holder);
    if (!p?.address) return null;
    const m = /^\[?([^\]]+?)\]?:\d+$/.exec(p.address);
    return m ? m[1] : p.address;
  }
}
