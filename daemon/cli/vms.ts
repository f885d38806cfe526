/**
 * `hostctl vm ...`: operator commands of the VM domain, through the admin socket.
 *
 *   vm image import FILE --id IMAGE_ID [--storage POOL] [--name NAME] [--default-user USER] [--no-wait]
 *                        a local qcow2 or raw file becomes an image (converted to qcow2; a task with a progress bar)
 *   vm image fetch CATALOG_ID [--storage POOL] [--no-wait]
 *                        download a catalog image (resumable; checksum verified)
 *   vm image list [--json]
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { commandGroups, type Command } from './groups.js';
import { watchTask } from './watch.js';
import { withVerbs, type Verb } from './everyday.js';
import { errorOut } from './output.js';

const USAGE = `usage: hostctl vm image <command>

  import FILE --id IMAGE_ID [--storage POOL] [--name NAME] [--default-user USER] [--no-wait]
                          import a local qcow2 or raw disk image (converted to qcow2)
  fetch CATALOG_ID [--storage POOL] [--no-wait]
                          download an image of the catalog (GET /vms/images/catalog)
  list [--json]           images and templates on this host
`;

async function followTask(client: Parameters<Command>[1], body: any, noWait: boolean): Promise<number> {
  const id = body.task?.task_id;
  if (!id) {
    process.stdout.write(JSON.stringify(body, null, 2) + '\n');
    return 0;
  }
  if (noWait) {
    process.stdout.write(`${id}\n`);
    return 0;
  }
  process.stdout.write(`task ${id}: ${body.task.title}\n`);
  return watchTask(client, id);
}

export const vmCommand: Command = async (argv, client) => {
  const [group, sub, ...rest] = argv;
  if (group !== 'image') {
    process.stderr.write(USAGE);
    return 2;
  }
  switch (sub) {
    case 'import': {
      const { values, positionals } = parseArgs({
        args: rest,
        options: {
          id: { type: 'string' },
          storage: { type: 'string' },
          name: { type: 'string' },
          'default-user': { type: 'string' },
          'no-wait': { type: 'boolean' },
        },
        allowPositionals: true,
        strict: true,
      });
      if (positionals.length !== 1 || !values.id) {
        process.stderr.write('hostctl: vm image import needs FILE and --id IMAGE_ID\n');
        return 2;
      }
      const body: Record<string, unknown> = { file: path.resolve(positionals[0]), image_id: values.id };
      if (values.storage) body.storage_id = values.storage;
      if (values.name) body.name = values.name;
      if (values['default-user']) body.default_user = values['default-user'];
      const r = await client.request('POST', '/admin/vms/images/import', body);
      if (r.status !== 201) return errorOut(r);
      return followTask(client, r.body, Boolean(values['no-wait']));
    }
    case 'fetch': {
      const { values, positionals } = parseArgs({
        args: rest,
        options: { storage: { type: 'string' }, 'no-wait': { type: 'boolean' } },
        allowPositionals: true,
        strict: true,
      });
      if (positionals.length !== 1) {
        process.stderr.write('hostctl: vm image fetch needs exactly one CATALOG_ID\n');
        return 2;
      }
      const body: Record<string, unknown> = { image_id: positionals[0] };
      if (values.storage) body.storage_id = values.storage;
      const r = await client.request('POST', '/admin/vms/images/fetch', body);
      if (r.status !== 201) return errorOut(r);
      return followTask(client, r.body, Boolean(values['no-wait']));
    }
    case 'list': {
      const { values } = parseArgs({ args: rest, options: { json: { type: 'boolean' } }, strict: true });
      const r = await client.request('GET', '/admin/vms/images');
      if (r.status !== 200) return errorOut(r);
      if (values.json) {
        process.stdout.write(JSON.stringify(r.body, null, 2) + '\n');
        return 0;
      }
      const rows = (r.body.images as any[]).map((i) => [
        i.image_id,
        i.kind,
        i.storage_id,
        `${Math.ceil(i.virtual_size_bytes / 1024 ** 3)}G`,
        String(i.linked_clones.length),
      ]);
      const head = ['IMAGE_ID', 'KIND', 'POOL', 'SIZE', 'LINKED'];
      const widths = head.map((h, i) => Math.max(h.length, ...rows.map((x) => x[i].length)));
      const line = (x: string[]) =>
        x
          .map((c, i) => c.padEnd(widths[i]))
          .join('  ')
          .trimEnd();
      process.stdout.write([line(head), ...rows.map(line)].join('\n') + '\n');
      return 0;
    }
    default:
      process.stderr.write(USAGE);
      return 2;
  }
};

/** `hostctl vm list|create|delete|start|stop|restart|suspend|resume|exec`: one operation each (everyday.ts). */
const VM_VERBS: Record<string, Verb> = {
  list: {
    kind: 'list',
    op: 'vms_list',
    rows: 'vms',
    columns: [
      ['VMID', (v) => v.vmid],
      ['NAME', (v) => v.name],
      ['STATE', (v) => v.state],
      ['CPU', (v) => v.cpu_cores],
      ['MEMORY MB', (v) => v.memory_mb],
      ['DISK GB', (v) => v.disk_size_gb],
      ['IMAGE', (v) => v.image_id],
    ],
  },
  create: { kind: 'create', op: 'vms_create', resource: 'vm', idKey: 'vmid' },
  delete: { kind: 'action', ops: ['vms_delete'], id: 'id', done: 'deleted' },
  start: { kind: 'action', ops: ['vms_start'], id: 'id', done: 'started' },
  stop: { kind: 'action', ops: ['vms_stop'], id: 'id', done: 'stopped' },
  restart: { kind: 'action', ops: ['vms_stop', 'vms_start'], id: 'id', done: 'restarted' },
  suspend: { kind: 'action', ops: ['vms_suspend'], id: 'id', done: 'suspended' },
  resume: { kind: 'action', ops: ['vms_resume'], id: 'id', done: 'resumed' },
  exec: { kind: 'exec', op: 'vms_exec', id: 'id' },
};

commandGroups.set('vm', withVerbs('vm', VM_VERBS, vmCommand, USAGE));
