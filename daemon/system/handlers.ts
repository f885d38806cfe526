/**
 * Handlers of the system domain's operations (GET /system/health and
 * GET /system/allocation). Both are read-only and take only `peer_id`, which the
 * dispatcher consumes before a handler runs.
 */
import type { HandlersOf } from '../../api/registry/handlers.js';
import type { SystemService } from './service.js';

export function systemHandlers(svc: SystemService): HandlersOf<'system_health' | 'system_allocation'> {
  return {
    system_health: async () => svc.health(),
    system_allocation: async () => svc.allocation(),
  };
}
