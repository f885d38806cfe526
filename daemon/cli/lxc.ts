/**
 * `hostctl lxc ...`: operator commands for LXC containers.
 *
 *   lxc image import <rootfs.tar[.xz|.gz|.zst]> --id <image_id> [--storage <pool>]
 *       copies a local rootfs tarball into a pool's image cache (a task, with a progress bar)
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { commandGroups, type Command } from './groups.js';
import { watchTask } from './watch.js';
import { withVerbs, type Verb } from './everyday.js';

const USAGE = `usage: hostctl lxc image import <rootfs.tar.xz> --id <image_id> [--storage <pool>] [--no-wait]
`;

export const lxcCommand: Command = async (argv, client) => {
  const [group, sub, ...rest] = argv;
  if (group !== 'image' || sub !== 'import') {
    process.stderr.write(USAGE);
    return 2;
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: rest,
      options: { id: { type: 'string' }, storage: { type: 'string' }, 'no-wait': { type: 'boolean' } },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    process.stderr.write(`hostctl: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (positionals.length !== 1 || !values.id) {
    process.stderr.write(USAGE);
    return 2;
  }
  const body: Record<string, unknown> = { path: path.resolve(positionals[0]), image_id: values.id };
  if (values.storage) body.storage_id = values.storage;
  const r = await client.request('POST', '/admin/lxc/images/import', body);
  if (r.status !== 201) {
    process.stderr.write(`hostctl: ${r.body?.error ?? `status ${r.status}`}\n`);
    return 1;
  }
  const taskId = r.body.task.task_id as string;
  process.stdout.write(`importing ${values.id}: task ${taskId}\n`);
  if (values['no-wait']) return 0;
  return watchTask(client, taskId);
};

/** `hostctl lxc list|create|delete|start|stop|restart|exec`: one operation each (everyday.ts). */
const LXC_VERBS: Record<string, Verb> = {
  list: {
    kind: 'list',
    op: 'lxc_list',
    rows: 'containers',
    columns: [
      ['LXCID', (c) => c.lxcid],
      ['NAME', (c) => c.name],
      ['STATE', (c) => c.state],
      ['CPU', (c) => c.cpu_cores],
      ['MEMORY MB', (c) => c.memory_mb],
      ['TEMPLATE', (c) => c.template],
    ],
  },
  create: { kind: 'create', op: 'lxc_create', resource: 'container', idKey: 'lxcid' },
  delete: { kind: 'action', ops: ['lxc_delete'], id: 'id', done: 'deleted' },
  start: { kind: 'action', ops: ['lxc_start'], id: 'id', done: 'started' },
  stop: { kind: 'action', ops: ['lxc_stop'], id: 'id', done: 'stopped' },
  restart: { kind: 'action', ops: ['lxc_restart'], id: 'id', done: 'restarted' },
  exec: { kind: 'exec', op: 'lxc_exec', id: 'id' },
};

commandGroups.set('lxc', withVerbs('lxc', LXC_VERBS, lxcCommand, USAGE));
