/**
 * `hostctl sandbox ...`: operator commands of the sandboxes domain, through
 * the admin socket.
 *
 *   sandbox list [--all] [--json]      every token's sandboxes (--all: tombstones too)
 *   sandbox exec ID [--timeout S] -- COMMAND...
 *                                      runs COMMAND with /bin/sh -c in a running sandbox (its guest agent)
 *   sandbox warm IMAGE_ID [--cpu N] [--memory MB] [--disk GB] [--no-wait]
 *                                      saves a warm state of the image for sandboxes (a task with a progress bar)
 *   sandbox destroy ID                 destroys any token's sandbox (a revoked token's, say)
 *   sandbox warm-states [--json]       the warm states sandboxes start from
 *   sandbox warm-delete WARM_STATE_ID
 */
import { parseArgs } from 'node:util';
import { commandGroups, type Command } from './groups.js';
import { watchTask } from './watch.js';

const USAGE = `usage: hostctl sandbox <command>

  list [--all] [--json]       sandboxes of every token (--all: with tombstones)
  exec ID [--timeout S] -- COMMAND...
                              run a shell command in a running sandbox
  destroy ID                  destroy any token's sandbox
  warm IMAGE_ID [--cpu N] [--memory MB] [--disk GB] [--no-wait]
                              save a warm state of an image: sandboxes of that shape resume it
  warm-states [--json]        warm states sandboxes start from
  warm-delete WARM_STATE_ID   delete one
`;

function errorOut(r: { status: number; body: any }): number {
  process.stderr.write(`hostctl: ${r.body?.error ?? `status ${r.status}`}\n`);
  return 1;
}

function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((x) => x[i].length)));
  const line = (x: string[]) => x.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd();
  return [line(head), ...rows.map(line)].join('\n') + '\n';
}

const int = (v: string | undefined, name: string): number | undefined => {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new Error(`--${name} must be a whole number`);
  return Number(v);
};

export const sandboxCommand: Command = async (argv, client) => {
  const [sub, ...rest] = argv;
  try {
    switch (sub) {
      case 'list': {
        const { values } = parseArgs({ args: rest, options: { all: { type: 'boolean' }, json: { type: 'boolean' } }, strict: true });
        const r = await client.request('GET', '/admin/sandboxes', { include_destroyed: Boolean(values.all) });
        if (r.status !== 200) return errorOut(r);
        if (values.json) {
          process.stdout.write(JSON.stringify(r.body, null, 2) + '\n');
          return 0;
        }
        const rows = (r.body.sandboxes as any[]).map((s) => [s.id, s.name, s.state, s.owner, s.image_id, s.start.method ?? '-', String(s.vmid ?? '-')]);
        process.stdout.write(table(['ID', 'NAME', 'STATE', 'OWNER', 'IMAGE', 'START', 'VMID'], rows));
        return 0;
      }
      case 'exec': {
        const { values, positionals } = parseArgs({ args: rest, options: { timeout: { type: 'string' } }, allowPositionals: true, strict: true });
        if (positionals.length < 2) {
          process.stderr.write('hostctl: sandbox exec needs ID and a COMMAND (hostctl sandbox exec ID -- COMMAND...)\n');
          return 2;
        }
        const [id, ...cmd] = positionals;
        const r = await client.request('POST', '/admin/sandboxes/exec', { id, command: cmd.join(' '), timeout_seconds: int(values.timeout, 'timeout') });
        if (r.status !== 200) return errorOut(r);
        process.stdout.write(r.body.stdout);
        process.stderr.write(r.body.stderr);
        if (r.body.timed_out) process.stderr.write('hostctl: the command timed out\n');
        return r.body.exit_code ?? 124;
      }
      case 'destroy': {
        if (rest.length !== 1) {
          process.stderr.write('hostctl: sandbox destroy needs exactly one ID\n');
          return 2;
        }
        const r = await client.request('POST', '/admin/sandboxes/destroy', { id: rest[0] });
        if (r.status !== 200) return errorOut(r);
        process.stdout.write(`${rest[0]} ${r.body.already_destroyed ? 'was destroyed already' : 'destroyed'}\n`);
        return 0;
      }
      case 'warm': {
        const { values, positionals } = parseArgs({
          args: rest,
          options: { cpu: { type: 'string' }, memory: { type: 'string' }, disk: { type: 'string' }, 'no-wait': { type: 'boolean' } },
          allowPositionals: true,
          strict: true,
        });
        if (positionals.length !== 1) {
          process.stderr.write('hostctl: sandbox warm needs exactly one IMAGE_ID\n');
          return 2;
        }
        const r = await client.request('POST', '/admin/sandboxes/warm', {
          image_id: positionals[0], cpu_cores: int(values.cpu, 'cpu'), memory_mb: int(values.memory, 'memory'), disk_gb: int(values.disk, 'disk'),
        });
        if (r.status !== 201) return errorOut(r);
        const task = r.body.task;
        if (values['no-wait']) {
          process.stdout.write(`${task.task_id}\n`);
          return 0;
        }
        process.stdout.write(`task ${task.task_id}: ${task.title}\n`);
        return watchTask(client, task.task_id);
      }
      case 'warm-states': {
        const { values } = parseArgs({ args: rest, options: { json: { type: 'boolean' } }, strict: true });
        const r = await client.request('GET', '/admin/sandboxes/warm-states');
        if (r.status !== 200) return errorOut(r);
        if (values.json) {
          process.stdout.write(JSON.stringify(r.body, null, 2) + '\n');
          return 0;
        }
        const rows = (r.body.warm_states as any[]).map((w) => [w.id, w.image_id, String(w.cpu_cores), String(w.memory_mb), String(w.disk_size_gb), String(w.dependents.length), w.created_at]);
        process.stdout.write(table(['WARM_STATE', 'IMAGE', 'CPU', 'MEMORY_MB', 'DISK_GB', 'IN_USE', 'CREATED'], rows));
        return 0;
      }
      case 'warm-delete': {
        if (rest.length !== 1) {
          process.stderr.write('hostctl: sandbox warm-delete needs exactly one WARM_STATE_ID\n');
          return 2;
        }
        const r = await client.request('DELETE', '/admin/sandboxes/warm-states', { warm_state_id: rest[0] });
        if (r.status !== 200) return errorOut(r);
        process.stdout.write(`deleted ${rest[0]}\n`);
        return 0;
      }
      default:
        process.stderr.write(USAGE);
        return 2;
    }
  } catch (err) {
    process.stderr.write(`hostctl: ${(err as Error).message}\n`);
    return 2;
  }
};

commandGroups.set('sandbox', sandboxCommand);
