/** The activity domain: searching the log that dispatch writes. */
import { defineDomain } from '../domain.js';
import type { ActivityLog } from './log.js';
import { activityHandlers } from './handlers.js';

export const activityDomain = (log: ActivityLog) =>
  defineDomain({
    name: 'activity',
    ops: ['activity_list'] as const,
    async open() {
      return {
        handlers: activityHandlers(log),
        info: async () => ({ name: 'activity', built: true, runtimes: [] }),
        close: async () => {},
      };
    },
  });
