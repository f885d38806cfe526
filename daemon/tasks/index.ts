/** The tasks domain: reading the background tasks of this node (the runner is the daemon's). */
import { defineDomain, type AdminCommand } from '../domain.js';
import type { TaskRunner } from './runner.js';
import { taskHandlers } from './handlers.js';

export const tasksDomain = (runner: TaskRunner) => defineDomain({
  name: 'tasks',
  ops: ['tasks_list', 'tasks_get', 'tasks_logs'] as const,
  async open(deps) {
    return {
      handlers: taskHandlers(runner),
      info: async () => ({ name: 'tasks', built: true, runtimes: [] }),
      close: async () => {},
      admin: deps.env.HOSTD_TEST_HOOKS === '1' ? testHooks(runner) : undefined,
    };
  },
});

/**
 * Test-only (HOSTD_TEST_HOOKS=1, never set on a real host): no API operation
 * of this build starts a task yet, so the cluster tests start one here to
 * read it across members. `POST /admin/test/tasks {ms?}` starts a task that
 * logs a line and runs for `ms` (at most 60 s) or until cancelled.
 */
function testHooks(runner: TaskRunner): Record<string, AdminCommand> {
  return {
    'POST /admin/test/tasks': async (body) => {
      const ms = Math.max(0, Math.min(60_000, Number(body.ms ?? 0) || 0));
      const task = runner.start({ kind: 'test', title: 'Test task', owner: 'local-admin', resource: 'test' }, async (t) => {
        t.log('started by the test hook');
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, ms);
          t.signal.addEventListener('abort', () => {
            clearTimeout(timer);
            resolve();
          });
        });
        return { waited_ms: ms };
      });
      return [201, { task }];
    },
  };
}
