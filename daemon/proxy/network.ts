/**
 * Where clients reach the proxy: PUT /proxy/vip (the floating addresses the
 * holder carries) and PUT /proxy/dns (where the built-in DNS responder
 * forwards names outside the base domains).
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import { ensureAvailable } from '../lib/availability.js';
import type { CallContext } from '../lib/caller.js';
import { badRequest } from '../lib/errors.js';
import type { ConfigChanges } from './change.js';
import type { ProxyVip } from './config.js';
import type { ProxyContext } from './context.js';
import { parseHostPort } from './host-port.js';
import type { DnsPlane } from './plane-dns.js';
import { dnsUpstreamRefusal, refusalError } from './policy/rules.js';

export class NetworkOps {
  constructor(
    private readonly ctx: ProxyContext,
    private readonly changes: ConfigChanges,
    private readonly dns: DnsPlane,
  ) {}

  async setVip(args: ArgsOf<'proxy_vip_set'>, call: CallContext): Promise<ResultOf<'proxy_vip_set'>> {
    let vip: ProxyVip | null = null;
    if (args.vip !== undefined && args.vip !== '') {
      if (!args.vip_iface) throw badRequest('vip_iface is required when a vip is set');
      if (!/^[A-Za-z0-9_.:@-]{1,15}$/.test(args.vip_iface)) throw badRequest(`vip_iface '${args.vip_iface}' is not an interface name`);
      const { addresses } = this.ctx.drivers;
      await ensureAvailable(addresses, ['ip', 'arping']);
      if (!(await addresses.interfaceExists(args.vip_iface))) throw badRequest(`vip_iface '${args.vip_iface}': no such interface on this node`);
      const v6 = args.vip6 ? args.vip6 : null;
      vip = { vip: args.vip, vip_iface: args.vip_iface, vip_prefix: args.vip_prefix ?? 32, vip6: v6, vip6_prefix: v6 ? (args.vip6_prefix ?? 128) : null };
    } else if (args.vip6) {
      throw badRequest('vip6 needs a vip (IPv4) as well');
    }
    const r = await this.changes.run(
      (c) => ({ ...c, vip }),
      (c) => ({ vip: c.vip }),
    );
    call.note({
      summary: vip
        ? `Floating address ${vip.vip}/${vip.vip_prefix}${vip.vip6 ? ` and ${vip.vip6}/${vip.vip6_prefix}` : ''} on ${vip.vip_iface}`
        : 'Floating addresses cleared',
      target: 'proxy/vip',
      metadata: { vip },
    });
    return r;
  }

  async setDns(args: ArgsOf<'proxy_dns_set'>, call: CallContext): Promise<ResultOf<'proxy_dns_set'>> {
    const ups = args.dns_upstreams ?? [];
    for (const u of ups) {
      const hp = parseHostPort(u);
      if (!hp) throw badRequest(`dns_upstreams: '${u}' is not an IP address (optionally with :port)`);
      const r = dnsUpstreamRefusal(u, hp, this.ctx.rules);
      if (r) throw refusalError(r);
    }
    const r = await this.changes.run(
      (c) => ({ ...c, dns_upstreams: [...ups] }),
      (c) => ({ dns_upstreams: c.dns_upstreams, responder: this.dns.status() }),
    );
    call.note({
      summary: ups.length ? `Proxy DNS forwards to ${ups.join(', ')}` : 'Proxy DNS upstreams cleared',
      target: 'proxy/dns',
      metadata: { dns_upstreams: ups },
    });
    return r;
  }
}
