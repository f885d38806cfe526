/** The system domain: host health, and allocation of the guests the other domains run. */
import { defineDomain } from '../domain.js';
import { SystemContext } from './context.js';
import { systemHandlers } from './handlers.js';
import { ProcfsProbe } from './procfs/index.js';

export const systemDomain = defineDomain({
  name: 'system',
  ops: ['system_health', 'system_allocation'] as const,
  async open(deps) {
    const probe = new ProcfsProbe();
    const c = new SystemContext(deps.config.pools, probe, {
      nodeId: deps.node.id,
      nodeName: deps.node.name,
      guests: async () => (await Promise.all(deps.ports.all('guests').map((g) => g.guests()))).flat(),
      domains: () => deps.domainInfo(),
    });
    probe.start();
    return {
      handlers: systemHandlers(c),
      info: async () => ({ name: 'system', built: true, runtimes: [] }),
      close: async () => probe.stop(),
    };
  },
});
