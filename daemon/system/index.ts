/** The system domain: host health, and allocation of the guests the other domains run. */
import { defineDomain } from '../domain.js';
import { SystemService } from './service.js';
import { systemHandlers } from './handlers.js';

export const systemDomain = defineDomain({
  name: 'system',
  ops: ['system_health', 'system_allocation'] as const,
  async open(deps) {
    const svc = new SystemService(deps.config.pools, {
      nodeId: deps.node.id,
      nodeName: deps.node.name,
      guests: async () => (await Promise.all(deps.ports.all('guests').map((g) => g.guests()))).flat(),
      domains: () => deps.domainInfo(),
    });
    svc.start();
    return {
      handlers: systemHandlers(svc),
      info: async () => ({ name: 'system', built: true, runtimes: [] }),
      close: async () => svc.stop(),
    };
  },
});
