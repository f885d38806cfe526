/** The tasks domain: reading the background tasks of this node (the runner is the daemon's). */
import { defineDomain } from '../domain.js';
import type { TaskRunner } from './runner.js';
import { taskHandlers } from './handlers.js';

export const tasksDomain = (runner: TaskRunner) =>
  defineDomain({
    name: 'tasks',
    ops: ['tasks_list', 'tasks_get', 'tasks_logs'] as const,
    async open() {
      return {
        handlers: taskHandlers(runner),
        info: async () => ({ name: 'tasks', built: true, runtimes: [] }),
        close: async () => {},
      };
    },
  });
