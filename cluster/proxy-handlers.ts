/**
 * GET /proxy/config and POST /proxy/move on top of the lease
 * (cluster/lease.ts) and the replicated proxy configuration
 * (cluster/proxy-config.ts).
 *
 * POST /proxy/move with peer_id moves the holder role to that member (503
 * when no majority stored the new epoch or the target is unreachable); without
 * it, this node takes the role over, only when the recorded holder is
 * unreachable (409 otherwise). Both answer {holder, epoch, holding}. A
 * peer_id that names no member is 404 `no cluster member '<id>'`: here the
 * peer_id is the resource the call names, not a route.
 */
import type { Handler } from '../daemon/context.js';
import { notFound } from '../api/errors.js';
import type { LeaseManager } from './lease.js';
import { proxyConfigView, type ProxyConfigStore } from './proxy-config.js';

export interface ProxyLeaseDeps {
  lease: LeaseManager;
  config: ProxyConfigStore;
  selfId: string;
  /** All member ids, this node included. */
  members(): string[];
}

export function proxyLeaseHandlers(d: ProxyLeaseDeps): { proxy_config_get: Handler; proxy_move: Handler } {
  const view = () => proxyConfigView(d.lease, d.config, d.selfId);
  // The lease as this member now sees it (docs/failover.md): holding is about this member.
  const answer = (s: { holder: string | null; epoch: number; holding: boolean }) => ({ holder: s.holder, epoch: s.epoch, holding: s.holding });
  return {
    proxy_config_get: async () => view(),
    proxy_move: async (args, ctx) => {
      const target = args.peer_id;
      if (typeof target === 'string') {
        if (!d.members().includes(target)) throw notFound(`no cluster member '${target}'`);
        const before = d.lease.state();
        const s = await d.lease.move(target);
        ctx.note({
          summary: before.holder === s.holder ? `Proxy holder stays ${s.holder} (epoch ${s.epoch})` : `Proxy moved from ${before.holder ?? 'nobody'} to ${s.holder} at epoch ${s.epoch}`,
          target: `proxy/holder/${target}`,
          metadata: { holder: s.holder, epoch: s.epoch, previous_holder: before.holder },
        });
        return answer(s);
      }
      const before = d.lease.state();
      const s = await d.lease.takeover();
      ctx.note({
        summary: `Proxy taken over by ${s.holder} at epoch ${s.epoch} (was ${before.holder ?? 'nobody'})`,
        target: `proxy/holder/${d.selfId}`,
        metadata: { holder: s.holder, epoch: s.epoch, previous_holder: before.holder, takeover: true },
      });
      return answer(s);
    },
  };
}
