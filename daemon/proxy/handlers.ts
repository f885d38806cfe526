/** The proxy operations: each to the file of the resource it names, nothing else. */
import type { HandlersOf } from '../../api/registry/handlers.js';
import type { OperationName } from '../../api/registry/index.js';
import type { ProxyOps } from './ops.js';

type ProxyOp = Extract<OperationName, `proxy_${string}`>;

export function proxyHandlers(o: ProxyOps): HandlersOf<ProxyOp> {
  return {
    proxy_config_get: () => o.holder.config(),
    proxy_move: (a, call) => o.holder.move(a, call),
    proxy_update: (a, call) => o.serving.setEnabled(a, call),
    proxy_http3_update: (a, call) => o.serving.setHttp3(a, call),
    proxy_upstreams_list: () => o.entries.upstreams(),
    proxy_providers_list: () => o.acme.providersList(),
    proxy_acme_credentials_set: (a, call) => o.acme.setCredentials(a, call),
    proxy_acme_config_set: (a, call) => o.acme.setConfig(a, call),
    proxy_vip_set: (a, call) => o.network.setVip(a, call),
    proxy_dns_set: (a, call) => o.network.setDns(a, call),
    proxy_host_status: () => o.status.hostStatus(),
    proxy_diagnostics_get: (_a, call) => o.status.diagnostics(call),
    proxy_certs_list: (_a, call) => o.certs.list(call),
    proxy_certs_renew: (a, call) => o.certs.renew(a, call),
    proxy_incidents_list: () => o.incidents.list(),
    proxy_incidents_get: (a) => o.incidents.get(a.incident_id),
    proxy_domains_create: (a, call) => o.domains.create(a, call),
    proxy_domains_update: (a, call) => o.domains.update(a, call),
    proxy_domains_delete: (a, call) => o.domains.delete(a, call),
    proxy_entries_create: (a, call) => o.entries.create(a, call),
    proxy_entries_update: (a, call) => o.entries.update(a, call),
    proxy_entries_delete: (a, call) => o.entries.delete(a, call),
  };
}
