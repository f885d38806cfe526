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
import type { ProxyService } from './service.js';
import type { OperationName } from '../../api/registry/index.js';

type ProxyOp = Extract<OperationName, `proxy_${string}`>;

export function proxyLeaseHandlers(
  cluster: ClusterPorts,
  selfId: string,
  onTakeover?: (previous: string | null, now: LeaseView) => Promise<void>,
): HandlersOf<'proxy_config_get' | 'proxy_move'> {
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
      if (onTakeover && s.holding && s.epoch !== before.epoch) await onTakeover(before.holder, s);
      return answer(s);
    },
  };
}

/** Every other proxy operation: arguments to the service, nothing else. */
export function proxyHandlers(svc: ProxyService): HandlersOf<Exclude<ProxyOp, 'proxy_config_get' | 'proxy_move'>> {
  return {
    proxy_update: (a, ctx) => svc.setEnabled(a, ctx),
    proxy_upstreams_list: () => svc.upstreams(),
    proxy_providers_list: () => svc.providers(),
    proxy_host_status: () => svc.hostStatus(),
    proxy_acme_credentials_set: (a, ctx) => svc.acmeCredentialsSet(a, ctx),
    proxy_acme_config_set: (a, ctx) => svc.acmeConfigSet(a, ctx),
    proxy_vip_set: (a, ctx) => svc.vipSet(a, ctx),
    proxy_dns_set: (a, ctx) => svc.dnsSet(a, ctx),
    proxy_http3_update: (a, ctx) => svc.setHttp3(a, ctx),
    proxy_certs_list: (_a, ctx) => svc.certs(ctx),
    proxy_diagnostics_get: (_a, ctx) => svc.diagnostics(ctx),
    proxy_incidents_list: () => svc.incidents(),
    proxy_incidents_get: (a) => svc.incident(a.incident_id),
    proxy_domains_create: (a, ctx) => svc.domainsCreate(a, ctx),
    proxy_domains_update: (a, ctx) => svc.domainsUpdate(a, ctx),
    proxy_domains_delete: (a, ctx) => svc.domainsDelete(a, ctx),
    proxy_entries_create: (a, ctx) => svc.entriesCreate(a, ctx),
    proxy_entries_update: (a, ctx) => svc.entriesUpdate(a, ctx),
    proxy_entries_delete: (a, ctx) => svc.entriesDelete(a, ctx),
    proxy_certs_renew: (a, ctx) => svc.renew(a, ctx),
  };
}
