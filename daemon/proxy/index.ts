/**
 * The proxy domain: the cluster's reverse proxy. Today: the lease and the
 * replicated configuration (GET /proxy/config, POST /proxy/move); the data
 * plane on Caddy is not built yet and its operations answer 501.
 */
import { opsOf } from '../../api/registry/index.js';
import { defineDomain, notBuiltDomain } from '../domain.js';
import { proxyLeaseHandlers } from './handlers.js';

export const proxyDomain = defineDomain({
  name: 'proxy',
  ops: opsOf('proxy'),
  async open(deps) {
    const rest = await notBuiltDomain('proxy', opsOf('proxy')).open(deps);
    return {
      handlers: { ...rest.handlers, ...proxyLeaseHandlers(deps.cluster, deps.node.id) },
      info: async () => ({ name: 'proxy', built: false, runtimes: [] }),
      close: async () => {},
    };
  },
});
