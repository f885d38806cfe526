import type { OperationSpec } from './types.js';
import { ACTIVITY_CATEGORIES, SEVERITIES } from './types.js';
import type { Schema } from './types.js';
import { str, int, oneOf, object, arrayOf, nullable, bool, dateTime, activityRow, strArray } from './schema.js';

const num = (description?: string): Schema<number> => ({ type: 'number', ...(description ? { description } : {}) }) as Schema<number>;

/** A storage pool's disk usage (daemon/system/context.ts poolUsage). */
const poolUsage = () =>
  object(
    {
      storage_id: str('Storage pool id'),
      path: str('Its directory'),
      total_bytes: nullable(int('Size of its file system; null when the directory could not be read', 0)),
      available_bytes: nullable(int('Bytes free; null when the directory could not be read', 0)),
      used_percent: nullable(num('Percent used; null when the directory could not be read')),
      error: str('Why the figures are missing (only then present)'),
    },
    ['storage_id', 'path', 'total_bytes', 'available_bytes', 'used_percent'],
  );

/** A host program a domain drives, and whether it can run (daemon/lib/availability.ts). */
const availability = () =>
  object(
    {
      name: str('Host program'),
      version: nullable(str('Its version as it reports it')),
      available: bool(),
      reason: nullable(str('Why it is unavailable, and what to install')),
    },
    ['name', 'version', 'available', 'reason'],
  );

const cpuMemory = (description: string) =>
  object({ cpu_cores: int('CPU cores', 0), memory_mb: int('Memory in MiB', 0) }, ['cpu_cores', 'memory_mb'], { description });

const countPair = () => object({ count: int('How many', 0), running: int('How many are running', 0) }, ['count', 'running']);

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
    result: object(
      {
        node: object({ id: str('Node id'), name: str('Node name') }, ['id', 'name']),
        status: oneOf(['ok', 'degraded', 'critical'] as const, 'Overall health of the host'),
        reasons: strArray('Which rules set the status; empty when it is ok'),
        cpu: object(
          {
            cores: int('CPU cores', 0),
            model: str('CPU model'),
            usage_percent: num('CPU usage in percent'),
            load: arrayOf(num(), 'Load averages over 1, 5 and 15 minutes', { minItems: 3, maxItems: 3 }),
          },
          ['cores', 'model', 'usage_percent', 'load'],
        ),
        memory: object(
          {
            total_bytes: int('Memory in bytes', 0),
            available_bytes: int('Available memory in bytes', 0),
            used_percent: num('Percent used'),
          },
          ['total_bytes', 'available_bytes', 'used_percent'],
        ),
        uptime_seconds: num('Seconds since the host booted'),
        pools: arrayOf(poolUsage()),
        domains: arrayOf(
          object(
            {
              name: str('Domain, e.g. vms'),
              built: bool('Whether this build serves its operations (false: they answer 501)'),
              runtimes: arrayOf(availability(), 'The host programs it drives, as they are now'),
            },
            ['name', 'built', 'runtimes'],
          ),
        ),
        checked_at: dateTime(),
      },
      ['node', 'status', 'reasons', 'cpu', 'memory', 'uptime_seconds', 'pools', 'domains', 'checked_at'],
    ),
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
    result: object(
      {
        capacity: cpuMemory('What the host has'),
        allocated: object(
          {
            cpu_cores: int('CPU cores guests reserve', 0),
            memory_mb: int('Memory in MiB guests reserve', 0),
            vms: countPair(),
            containers: countPair(),
          },
          ['cpu_cores', 'memory_mb', 'vms', 'containers'],
          { description: 'What VMs, sandboxes and containers reserve' },
        ),
        running: cpuMemory("What guests in state 'running' hold"),
        ratio: object({ cpu: num('allocated / capacity'), memory: num('allocated / capacity') }, ['cpu', 'memory'], {
          description: 'allocated / capacity (over 1 when overcommitted; 0 when capacity is unknown)',
        }),
        pools: arrayOf(poolUsage()),
      },
      ['capacity', 'allocated', 'running', 'ratio', 'pools'],
    ),
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
      search: str('Substring matched against the event summary and target label; at most 1000 characters (the longest summary a row keeps)', {
        maxLength: 1000,
      }),
      since: str('RFC 3339 timestamp; only events at or after it', { format: 'date-time' }),
      until: str('RFC 3339 timestamp; only events at or before it', { format: 'date-time' }),
      limit: int('Maximum number of events to return, 1-200; default 50', 1, 200),
      cursor: str('The next_cursor of a previous call'),
    },
    result: object(
      {
        events: arrayOf(activityRow()),
        next_cursor: nullable(str('Pass as cursor for the next page; null on the last')),
      },
      ['events', 'next_cursor'],
    ),
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
    result: object(
      {
        peers: arrayOf(
          object(
            {
              peer_id: str('Member id'),
              name: str('Member name'),
              address: nullable(str('Its cluster address; null when unknown')),
              is_self: bool('Whether it is the server called'),
              reachable: bool(),
              last_seen: nullable(dateTime('When it was last heard from')),
            },
            ['peer_id', 'name', 'address', 'is_self', 'reachable', 'last_seen'],
          ),
        ),
      },
      ['peers'],
    ),
    peerId: 'none',
  },
] as const satisfies readonly OperationSpec[];
