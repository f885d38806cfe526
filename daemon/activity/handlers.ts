import type { ActivityLog } from './log.js';
import type { Handler } from '../context.js';

export function activityHandlers(log: ActivityLog): { activity_list: Handler } {
  return {
    activity_list: async (a) => log.query({
      category: a.category, severity: a.severity, search: a.search,
      since: a.since, until: a.until, limit: a.limit, cursor: a.cursor,
    }),
  };
}
