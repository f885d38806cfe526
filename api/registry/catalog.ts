import type { OperationSpec } from './types.js';

export const operations = [
  {
    name: 'catalog_get',
    domain: 'catalog',
    method: 'GET',
    path: '/catalog',
    scopes: [],
    hints: ['RO'],
    summary: 'Return the live catalog of what the running server can do (endpoints, methods, paths, summaries, scopes, argument schemas).',
    category: 'system',
    params: {},
    args: {},
  },
] as const satisfies readonly OperationSpec[];
