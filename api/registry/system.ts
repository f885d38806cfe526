import type { OperationSpec } from './types.js';
import { ACTIVITY_CATEGORIES, SEVERITIES } from './types.js';
import { str, int, oneOf } from './schema.js';

export const operations = [
  {
    name: 'system_health',
    domain: 'system',
    method: 'GET',
    path: '/system/health',
    scopes: ['system.read'],
    hints: ['RO'],
    summary: 'Host CPU, memory and overall health.',
    category: 'system',
    params: {},
    args: {},
  },
  {
    name: 'system_allocation',
    domain: 'system',
    method: 'GET',
    path: '/system/allocation',
    scopes: ['system.read'],
    hints: ['RO'],
    summary: 'CPU and memory allocation against host capacity.',
    category: 'system',
    params: {},
    args: {},
  },
  {
    name: 'activity_list',
    domain: 'system',
    method: 'GET',
    path: '/activity',
    scopes: ['system.read'],
    hints: ['RO'],
    summary: 'Search the activity log.',
    category: 'system',
    params: {},
    args: {
      category: oneOf([...ACTIVITY_CATEGORIES], 'Only events of this category; omit for all'),
      severity: oneOf([...SEVERITIES], 'Only events of this severity; omit for all'),
      // A row's summary is at most 1000 characters and its target 500 (daemon/activity/log.ts ROW_LIMITS):
      // a longer needle can never match, and its grams cost the daemon about 25 bytes per character.
      search: str('Substring matched against the event summary and target label; at most 1000 characters (the longest summary a row keeps)', { maxLength: 1000 }),
      since: str('RFC 3339 timestamp; only events at or after it', { format: 'date-time' }),
      until: str('RFC 3339 timestamp; only events at or before it', { format: 'date-time' }),
      limit: int('Maximum number of events to return, 1-200; default 50', 1, 200),
      cursor: str('The next_cursor of a previous call'),
    },
  },
  {
    name: 'peers_list',
    domain: 'system',
    method: 'GET',
    path: '/peers',
    scopes: ['system.read'],
    hints: ['RO'],
    summary: 'List the paired servers in the cluster.',
    category: 'system',
    params: {},
    args: {},
    peerId: 'none',
  },
] as const satisfies readonly OperationSpec[];
