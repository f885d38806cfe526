/**
 * The metrics domain: the Prometheus exposition of this member (docs/metrics.md).
 * The service exists before the domains open (it counts requests and tasks
 * from the first); opening the domain attaches what is read at scrape time.
 */
import { defineDomain } from '../domain.js';
import { metricsHandlers } from './handlers.js';
import type { MetricsService } from './service.js';
import { parseMetricsSettings } from './settings.js';
import { startListener, type MetricsListener } from './listener.js';

export const metricsDomain = (svc: MetricsService, version: string) =>
  defineDomain({
    name: 'metrics',
    ops: ['metrics_get'] as const,
    async open(deps) {
      const settings = parseMetricsSettings(deps.settings);
      svc.attach({
        nodeId: deps.node.id,
        nodeName: deps.node.name,
        version,
        lease: deps.cluster.lease,
        peers: () => deps.cluster.peers(),
        domainInfo: () => deps.domainInfo(),
        guests: () => deps.ports.all('guests'),
        usage: () => deps.ports.all('usage'),
        mountStates: () => deps.ports.all('mountStates'),
        proxyFigures: () => deps.ports.all('proxyFigures'),
        sandboxStarts: () => deps.ports.all('sandboxStarts'),
        warmResumes: () => deps.ports.all('warmResumes'),
      });
      let listener: MetricsListener | null;
      try {
        listener = settings.listen ? await startListener(svc, settings.listen, deps.log.child({ domain: 'metrics' })) : null;
      } catch (err) {
        svc.close();
        throw new Error(`metrics: the token-less listener cannot listen on ${settings.listen!.host}:${settings.listen!.port}: ${(err as Error).message}`);
      }
      return {
        handlers: metricsHandlers(svc),
        info: async () => ({ name: 'metrics', built: true, runtimes: [] }),
        close: async () => {
          await listener?.close();
          svc.close();
        },
      };
    },
  });
