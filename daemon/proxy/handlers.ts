/**
 * The proxy operations. GET /proxy/config and POST /proxy/move work on the
 * lease and the replicated configuration; POST /proxy/move with peer_id moves
 * the holder role to that member (503 when no majority stored the new epoch
 * or the target is unreachable); without it, this node takes the role over,
 * only when the recorded holder is unreachable (409 otherwise). Both answer
 * {holder, epoch, holding}. A peer_id that names no member is 404 `no cluster
 * member '<id>'`: here the peer_id is the resource the call names, not a route.
 */
import type { HandlersOf } from '../../api/registry/handlers.js';
import { notFound } from '../lib/errors.js';
import type { ClusterPorts, LeaseView } from '../domain.js';
import { proxyConfigView, type ProxyConfigSnapshot } from './config.js';

export function proxyLeaseHandlers(cluster: ClusterPorts, selfId: string): HandlersOf<'proxy_config_get' | 'proxy_move'> {
  const config = cluster.proxyConfig as { get(): ProxyConfigSnapshot };
  const view = () => proxyConfigView(cluster.lease, config, selfId);
  const answer = (s: LeaseView) => ({ holder: s.holder, epoch: s.epoch, holding: s.holding });
  return {
    proxy_config_get: async () => view(),
    proxy_move: async (args, ctx) => {
      const target = args.peer_id;
      const before = cluster.lease.state();
      if (typeof target === 'string') {
        if (!cluster.members().includes(target)) throw notFound(`no cluster member '${target}'`);
        const s = await cluster.lease.move(target);
        ctx.note({
          summary: before.holder === s.holder ? `Proxy holder stays ${s.holder} (epoch ${s.epoch})` : `Proxy moved from ${before.holder ?? 'nobody'} to ${s.holder} at epoch ${s.epoch}`,
          target: `proxy/holder/${target}`,
          metadata: { holder: s.holder, epoch: s.epoch, previous_holder: before.holder },
        });
        return answer(s);
      }
      const s = await cluster.lease.takeover();
      ctx.note({
        summary: `Proxy taken over by ${s.holder} at epoch ${s.epoch} (was ${before.holder ?? 'nobody'})`,
        target: `proxy/holder/${selfId}`,
        metadata: { holder: s.holder, epoch: s.epoch, previous_holder: before.holder, takeover: true },
      });
      return answer(s);
    },
  };
}
