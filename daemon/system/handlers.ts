/**
 * Handlers of the system domain's operations (GET /system/health and
 * GET /system/allocation). Both are read-only and take only `peer_id`, which the
 * dispatcher consumes before a handler runs.
 */
import type { HandlersOf } from '../../api/registry/handlers.js';
import { allocation } from './allocation.js';
import type { SystemContext } from './context.js';
import { health } from './health.js';

export function systemHandlers(c: SystemContext): HandlersOf<'system_health' | 'system_allocation'> {
  return {
    system_health: async () => health(c),
    system_allocation: async () => allocation(c),
  };
}
