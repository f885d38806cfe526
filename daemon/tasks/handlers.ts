import type { TaskRunner } from './runner.js';
import type { HandlersOf } from '../../api/registry/handlers.js';

export function taskHandlers(runner: TaskRunner): HandlersOf<'tasks_list' | 'tasks_get' | 'tasks_logs'> {
  return {
    tasks_list: async () => ({ tasks: await runner.listActive() }),
    tasks_get: async (a) => ({ task: await runner.get(a.task_id) }),
    tasks_logs: async (a) => runner.logLines(a.task_id, a.after_line ?? 0, a.limit ?? 200),
  };
}
