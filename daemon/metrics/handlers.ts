import type { HandlersOf } from '../../api/registry/handlers.js';
import type { MetricsService } from './service.js';

export const metricsHandlers = (svc: MetricsService): HandlersOf<'metrics_get'> => ({
  metrics_get: async (args, ctx) => svc.expose(args.format ?? 'prometheus', { scopes: ctx.caller.scopes }),
});
