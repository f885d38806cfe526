/**
 * Who holds the proxy: GET /proxy/config (the lease and the replicated
 * configuration) and POST /proxy/move. With peer_id, move hands the holder
 * role to that member (503 when no majority stored the new epoch or the
 * target is unreachable); without it, this node takes the role over, only
 * when the recorded holder is unreachable (409 otherwise). Both answer
 * {holder, epoch, holding}. A peer_id that names no member is 404 `no cluster
 * member '<id>'`: here the peer_id is the resource the call names, not a route.
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { CallContext } from '../lib/caller.js';
import { notFound } from '../lib/errors.js';
import type { ClusterPorts, LeaseView } from '../domain.js';
import { proxyConfigView, type ProxyConfigSnapshot } from './config.js';

export class HolderOps {
  constructor(
    private readonly cluster: ClusterPorts,
    private readonly selfId: string,
    /** Records a takeover asked for here (an incident on this node, the new holder). */
    private readonly onTakeover?: (previous: string | null, now: LeaseView) => Promise<void>,
  ) {}

  async config(): Promise<ResultOf<'proxy_config_get'>> {
    return proxyConfigView(this.cluster.lease, this.cluster.proxyConfig as { get(): ProxyConfigSnapshot }, this.selfId, this.cluster.members().length <= 1);
  }

  async move(args: ArgsOf<'proxy_move'>, call: CallContext): Promise<ResultOf<'proxy_move'>> {
    const { cluster } = this;
    const answer = (s: LeaseView) => ({ holder: s.holder, epoch: s.epoch, holding: s.holding });
    const target = args.peer_id;
    const before = cluster.lease.state();
    if (typeof target === 'string') {
      if (!cluster.members().includes(target)) throw notFound(`no cluster member '${target}'`);
      const s = await cluster.lease.move(target);
      call.note({
        summary:
          before.holder === s.holder
            ? `Proxy holder stays ${s.holder} (epoch ${s.epoch})`
            : `Proxy moved from ${before.holder ?? 'nobody'} to ${s.holder} at epoch ${s.epoch}`,
        target: `proxy/holder/${target}`,
        metadata: { holder: s.holder, epoch: s.epoch, previous_holder: before.holder },
      });
      return answer(s);
    }
    const s = await cluster.lease.takeover();
    call.note({
      summary: `Proxy taken over by ${s.holder} at epoch ${s.epoch} (was ${before.holder ?? 'nobody'})`,
      target: `proxy/holder/${this.selfId}`,
      metadata: { holder: s.holder, epoch: s.epoch, previous_holder: before.holder, takeover: true },
    });
    if (this.onTakeover && s.holding && s.epoch !== before.epoch) await this.onTakeover(before.holder, s);
    return answer(s);
  }
}
