import type { ActivityLog } from './log.js';
import type { HandlersOf } from '../../api/registry/handlers.js';

export function activityHandlers(log: ActivityLog): HandlersOf<'activity_list'> {
  return {
    activity_list: async (a) =>
      log.query({
        category: a.category,
        severity: a.severity,
        search: a.search,
        since: a.since,
        until: a.until,
        limit: a.limit,
        cursor: a.cursor,
      }),
  };
}
