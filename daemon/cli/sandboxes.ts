/**
 * `hostctl sandbox ...`: operator commands of the sandboxes domain, through
 * the admin socket.
 *
 *   sandbox list [--all] [--json]      every token's sandboxes (--all: tombstones too)
 *   sandbox exec ID [--timeout S] [--env K=V]... [--cwd DIR] [--user U] [--stdin] -- COMMAND...
 *                                      runs COMMAND with /bin/sh -c in a running sandbox (sandboxes_exec)
 *   sandbox fork ID [--count N] [--label K=V]... [--key KEY] [--json]
 *                                      copies of a running sandbox (sandboxes_fork)
 *   sandbox files get|put|ls|rm ID PATH ...
 *                                      guest files (sandboxes_files_*), moved in pieces of 512 KiB
 *   sandbox warm IMAGE_ID [--cpu N] [--memory MB] [--disk GB] [--no-wait]
 *                                      saves a warm state of the image for sandboxes (a task with a progress bar)
 *   sandbox destroy ID                 destroys any token's sandbox (a revoked token's, say)
 *   sandbox warm-states [--json]       the warm states sandboxes start from
 *   sandbox warm-delete WARM_STATE_ID
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { FILE_PIECE_MAX_BYTES } from '../../api/registry/sandboxes.js';
import { callOperation } from './call.js';
import { commandGroups, groupUsage, type Command } from './groups.js';
import { watchTask } from './watch.js';
import { errorOut, table } from './output.js';

const USAGE = `usage: hostctl sandbox <command>

  list [--all] [--json]       sandboxes of every token (--all: with tombstones)
  exec ID [--timeout S] [--env K=V]... [--cwd DIR] [--user U] [--stdin] -- COMMAND...
                              run a shell command in a running sandbox (--stdin: hostctl's input is its input)
  fork ID [--count N] [--label K=V]... [--key KEY] [--json]
                              copy a running sandbox; the copies boot in the background
  files get ID PATH [--out FILE]
                              a guest file to stdout (or FILE)
  files put ID PATH (--from FILE | --content TEXT) [--mode MODE]
                              write a guest file (parents made when missing)
  files ls ID PATH [--json]   a guest directory's entries
  files rm ID PATH [--recursive]
                              delete a guest file or directory
  destroy ID                  destroy any token's sandbox
  warm IMAGE_ID [--cpu N] [--memory MB] [--disk GB] [--no-wait]
                              save a warm state of an image: sandboxes of that shape resume it
  warm-states [--json]        warm states sandboxes start from
  warm-delete WARM_STATE_ID   delete one
`;

const int = (v: string | undefined, name: string): number | undefined => {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new Error(`--${name} must be a whole number`);
  return Number(v);
};

type Client = Parameters<Command>[1];

async function readStdin(): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of process.stdin) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

/** `hostctl sandbox files get|put|ls|rm ID PATH ...`: pieces of at most FILE_PIECE_MAX_BYTES per call. */
async function filesCommand(argv: string[], client: Client): Promise<number> {
  const [verb, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    options: {
      out: { type: 'string' },
      from: { type: 'string' },
      content: { type: 'string' },
      mode: { type: 'string' },
      json: { type: 'boolean' },
      recursive: { type: 'boolean' },
    },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 2) {
    process.stderr.write(`hostctl: sandbox files ${verb ?? ''} needs ID and PATH\n`);
    return 2;
  }
  const [id, file] = positionals;
  switch (verb) {
    case 'get': {
      const fd = values.out ? fs.openSync(values.out, 'w') : 1;
      try {
        for (let offset = 0; ; ) {
          const r = await callOperation(client, 'sandboxes_files_get', { id, path: file, offset });
          if (r.status !== 200) return errorOut(r);
          if (r.body.type === 'directory') {
            process.stderr.write(`hostctl: '${file}' is a directory (hostctl sandbox files ls)\n`);
            return 1;
          }
          const b = Buffer.from(r.body.content, 'base64');
          fs.writeSync(fd, b);
          offset += b.length;
          if (r.body.eof || b.length === 0) return 0;
        }
      } finally {
        if (fd !== 1) fs.closeSync(fd);
      }
    }
    case 'put': {
      if ((values.from === undefined) === (values.content === undefined)) {
        process.stderr.write('hostctl: sandbox files put needs one of --from FILE or --content TEXT\n');
        return 2;
      }
      const data = values.from !== undefined ? fs.readFileSync(values.from) : Buffer.from(values.content!, 'utf8');
      let last: any;
      for (let off = 0; off === 0 || off < data.length; off += FILE_PIECE_MAX_BYTES) {
        const piece = data.subarray(off, off + FILE_PIECE_MAX_BYTES);
        const r = await callOperation(client, 'sandboxes_files_put', {
          id,
          path: file,
          content: piece.toString('base64'),
          append: off > 0,
          mode: off === 0 ? values.mode : undefined,
        });
        if (r.status !== 200) return errorOut(r);
        last = r.body;
        if (data.length === 0) break;
      }
      process.stdout.write(`${file}: ${last.size} bytes, mode ${last.mode}\n`);
      return 0;
    }
    case 'ls': {
      const r = await callOperation(client, 'sandboxes_files_get', { id, path: file, length: 1 });
      if (r.status !== 200) return errorOut(r);
      const entries = r.body.type === 'directory' ? (r.body.entries as any[]) : [{ ...r.body, name: file }];
      if (values.json) {
        process.stdout.write(JSON.stringify({ entries, truncated: r.body.truncated }, null, 2) + '\n');
        return 0;
      }
      process.stdout.write(
        table(
          ['NAME', 'TYPE', 'SIZE', 'MODE', 'MODIFIED'],
          entries.map((x) => [x.name, x.type, String(x.size), x.mode, x.mtime]),
        ),
      );
      if (r.body.truncated) process.stderr.write('hostctl: the listing was cut at 1 MiB of entries\n');
      return 0;
    }
    case 'rm': {
      const r = await callOperation(client, 'sandboxes_files_delete', { id, path: file, recursive: values.recursive === true ? true : undefined });
      if (r.status !== 200) return errorOut(r);
      process.stdout.write(`deleted ${r.body.type} ${file}\n`);
      return 0;
    }
    default:
      process.stderr.write(USAGE);
      return 2;
  }
}

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
        const { values, positionals } = parseArgs({
          args: rest,
          options: {
            timeout: { type: 'string' },
            env: { type: 'string', multiple: true },
            cwd: { type: 'string' },
            user: { type: 'string' },
            stdin: { type: 'boolean' },
          },
          allowPositionals: true,
          strict: true,
        });
        if (positionals.length < 2) {
          process.stderr.write('hostctl: sandbox exec needs ID and a COMMAND (hostctl sandbox exec ID -- COMMAND...)\n');
          return 2;
        }
        const [id, ...cmd] = positionals;
        const env: Record<string, string> = {};
        for (const kv of values.env ?? []) {
          const eq = kv.indexOf('=');
          if (eq <= 0) throw new Error(`--env takes NAME=VALUE, got '${kv}'`);
          env[kv.slice(0, eq)] = kv.slice(eq + 1);
        }
        const stdin = values.stdin ? (await readStdin()).toString('base64') : undefined;
        // base64 both ways: the command's bytes reach this terminal or pipe unchanged.
        const r = await callOperation(client, 'sandboxes_exec', {
          id,
          command: cmd.join(' '),
          timeout_seconds: int(values.timeout, 'timeout'),
          env: values.env ? env : undefined,
          cwd: values.cwd,
          user: values.user,
          stdin,
          encoding: 'base64',
        });
        if (r.status !== 200) return errorOut(r);
        process.stdout.write(Buffer.from(r.body.stdout, 'base64'));
        process.stderr.write(Buffer.from(r.body.stderr, 'base64'));
        if (r.body.timed_out) process.stderr.write('hostctl: the command timed out\n');
        return r.body.exit_code ?? 124;
      }
      case 'files':
        return await filesCommand(rest, client);
      case 'fork': {
        const { values, positionals } = parseArgs({
          args: rest,
          options: { count: { type: 'string' }, label: { type: 'string', multiple: true }, key: { type: 'string' }, json: { type: 'boolean' } },
          allowPositionals: true,
          strict: true,
        });
        if (positionals.length !== 1) {
          process.stderr.write('hostctl: sandbox fork needs exactly one ID\n');
          return 2;
        }
        const labels: Record<string, string> = {};
        for (const kv of values.label ?? []) {
          const eq = kv.indexOf('=');
          if (eq <= 0) throw new Error(`--label takes KEY=VALUE, got '${kv}'`);
          labels[kv.slice(0, eq)] = kv.slice(eq + 1);
        }
        const r = await callOperation(client, 'sandboxes_fork', {
          id: positionals[0],
          count: int(values.count, 'count'),
          labels: values.label ? labels : undefined,
          idempotency_key: values.key,
        });
        if (r.status !== 200 && r.status !== 201) return errorOut(r);
        if (values.json) {
          process.stdout.write(JSON.stringify(r.body, null, 2) + '\n');
          return 0;
        }
        process.stdout.write(
          table(
            ['ID', 'NAME', 'STATE'],
            (r.body.sandboxes as any[]).map((x) => [x.id, x.name, x.state]),
          ),
        );
        return 0;
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
          image_id: positionals[0],
          cpu_cores: int(values.cpu, 'cpu'),
          memory_mb: int(values.memory, 'memory'),
          disk_gb: int(values.disk, 'disk'),
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
        const rows = (r.body.warm_states as any[]).map((w) => [
          w.id,
          w.image_id,
          String(w.cpu_cores),
          String(w.memory_mb),
          String(w.disk_size_gb),
          String(w.dependents.length),
          w.created_at,
        ]);
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
groupUsage.set('sandbox', USAGE);
