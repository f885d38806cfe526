import type { OperationSpec } from './types.js';
import { str, int } from './schema.js';

const taskId = { task_id: str('Background task ID') };

export const operations = [
  {
    name: 'tasks_list',
    domain: 'tasks',
    method: 'GET',
    path: '/tasks',
    scopes: ['vm.read'],
    hints: ['RO'],
    summary: 'List queued and running background tasks.',
    category: 'system',
    params: {},
    args: {},
  },
  {
    name: 'tasks_get',
    domain: 'tasks',
    method: 'GET',
    path: '/tasks/{task_id}',
    scopes: ['vm.read'],
    hints: ['RO'],
    summary: 'Get a background task.',
    category: 'system',
    params: taskId,
    args: {},
  },
  {
    name: 'tasks_logs',
    domain: 'tasks',
    method: 'GET',
    path: '/tasks/{task_id}/logs',
    scopes: ['vm.read'],
    hints: ['RO'],
    summary: 'Get log lines a task produced.',
    category: 'system',
    params: taskId,
    args: {
      after_line: int('Only lines after this line number; default 0', 0),
      limit: int('Maximum number of lines to return, 1-500; default 200', 1, 500),
    },
  },
] as const satisfies readonly OperationSpec[];
