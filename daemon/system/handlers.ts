/**
 * Handlers of the system domain's operations (GET /system/health and
 * GET /system/allocation). Both are read-only and take only `peer_id`, which the
 * dispatcher consumes before a handler runs.
 */
import type { Handler } from '../lib/caller.js';
import type { SystemService } from './service.js';

export function systemHandlers(svc: SystemService): { system_health: Handler; system_allocation: Handler } {
  return {
    system_health: async () => svc.health(),
    system_allocation: async () => svc.allocation(),
  };
}
