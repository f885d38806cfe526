/**
 * The metrics domain: the Prometheus exposition of this member (docs/metrics.md).
 * The service exists before the domains open (it counts requests and tasks
 * from the first); opening the domain attaches what is read at scrape time.
 */
import { defineDomain } from '../domain.js';
import { metricsHandlers } from './handlers.js';
import type { MetricsService } from './service.js';

export const metricsDomain = (svc: MetricsService, version: string) => defineDomain({
  name: 'metrics',
  ops: ['metrics_get'] as const,
  async open(deps) {
    svc.attach({
      nodeId: deps.node.id, nodeName: deps.node.name, version,
      lease: deps.cluster.lease, peers: () => deps.cluster.peers(), domainInfo: () => deps.domainInfo(),
      guests: () => deps.ports.all('guests'), usage: () => deps.ports.all('usage'),
    });
    return {
      handlers: metricsHandlers(svc),
      info: async () => ({ name: 'metrics', built: true, runtimes: [] }),
      close: async () => svc.close(),
    };
  },
});
