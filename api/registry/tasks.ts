import type { OperationSpec } from './types.js';
import { str, int, object, arrayOf, dateTime, taskRecord } from './schema.js';

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
    result: object({ tasks: arrayOf(taskRecord(), 'Queued and running tasks') }, ['tasks']),
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
    result: object({ task: taskRecord() }, ['task']),
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
    result: object(
      {
        task_id: str('Task id'),
        lines: arrayOf(
          object(
            {
              line: int('Line number, from 1', 1),
              time: dateTime('When the task wrote it'),
              text: str(),
            },
            ['line', 'time', 'text'],
          ),
        ),
        next_after_line: int('after_line for the next call', 0),
        total_lines: int('Log lines so far', 0),
      },
      ['task_id', 'lines', 'next_after_line', 'total_lines'],
    ),
  },
] as const satisfies readonly OperationSpec[];
