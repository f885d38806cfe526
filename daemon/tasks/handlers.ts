import type { TaskRunner } from './runner.js';
import type { Handler } from '../context.js';

export function taskHandlers(runner: TaskRunner): { tasks_list: Handler; tasks_get: Handler; tasks_logs: Handler } {
  return {
    tasks_list: async () => ({ tasks: await runner.listActive() }),
    tasks_get: async (a) => ({ task: await runner.get(a.task_id) }),
    tasks_logs: async (a) => runner.logLines(a.task_id, a.after_line ?? 0, a.limit ?? 200),
  };
}
