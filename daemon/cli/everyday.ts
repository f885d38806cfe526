/**
 * The commands an operator types every day (`hostctl vm list`, `hostctl lxc
 * stop 200`, `hostctl vm exec 101 -- uname -a`), the verbs Proxmox's `qm`/`pct`
 * and Incus users expect. Each verb is one registry operation: the request is
 * built from the registry (call.ts), so a verb can never drift from the API.
 * Every verb takes `--json` (the answer as the API gives it instead of a
 * table or a line), and, as every command, `--peer NODE` (hostctl.ts).
 */
import { parseArgs } from 'node:util';
import { callOperation, parseKeyValues } from './call.js';
import { getOperation } from '../../api/registry/index.js';
import { watchTask } from './watch.js';
import { errorOut, table } from './output.js';
import { groupUsage, type Command } from './groups.js';

type Row = Record<string, unknown>;

export interface ListVerb {
  kind: 'list';
  op: string;
  /** The key of the answer holding the rows. */
  rows: string;
  columns: ReadonlyArray<readonly [string, (r: Row) => unknown]>;
}

export interface ActionVerb {
  kind: 'action';
  /** One operation, or several run in order (restart where the API has no restart: stop, then start). */
  ops: readonly string[];
  /** The id argument's name in the path (`id`, `app_id`). */
  id: string;
  /** What the line says when it worked: `started 101`. */
  done: string;
  /** Extra arguments every call of this verb sends (an app action's `action`). */
  fixed?: Row;
}

export interface ExecVerb {
  kind: 'exec';
  op: string;
  id: string;
}

/**
 * A create: `key=value` words checked against the operation's request schema
 * (as `hostctl call`), the new resource's id alone on stdout (so that a script
 * can take it: `CT=$(hostctl lxc create name=web template=busybox)`), and the
 * create's task followed to its end on stderr unless `--no-wait`.
 */
export interface CreateVerb {
  kind: 'create';
  op: string;
  /** The key of the answer holding the new resource, and its id's key in it. */
  resource: string;
  idKey: string;
}

export type Verb = ListVerb | ActionVerb | ExecVerb | CreateVerb;

/** The usage text of a group's everyday verbs. */
export function verbsUsage(group: string, verbs: Readonly<Record<string, Verb>>): string {
  const lines = Object.entries(verbs).map(([name, v]) => {
    const what =
      v.kind === 'list'
        ? `${name} [--json]`
        : v.kind === 'exec'
          ? `${name} ID [--timeout S] [--json] -- COMMAND...`
          : v.kind === 'create'
            ? `${name} KEY=VALUE... [--no-wait] [--json]`
            : `${name} ID [--json]`;
    const op = v.kind === 'action' ? v.ops.join(' then ') : v.op;
    return `  ${`${group} ${what}`.padEnd(58)}${op}`;
  });
  return `${lines.join('\n')}\n  (every command takes --peer NODE: run it on that member of the cluster)\n`;
}

const str = (v: unknown): string => (v === null || v === undefined || v === '' ? '-' : typeof v === 'object' ? JSON.stringify(v) : String(v));

/**
 * Runs `verb` with `argv` (what follows the verb's name). Returns the exit
 * code: 0, 1 when the daemon refused (its message on stderr), 2 for a usage
 * error, or the command's own exit code for exec.
 */
export async function runVerb(group: string, name: string, verb: Verb, argv: string[], client: Parameters<Command>[1]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { json: { type: 'boolean' }, timeout: { type: 'string' }, 'no-wait': { type: 'boolean' } },
    allowPositionals: true,
    strict: true,
  });
  const call = (op: string, args: Row) => callOperation(client, op, args);
  const usage = (msg: string): number => {
    process.stderr.write(`hostctl: ${group} ${name} ${msg}\n`);
    return 2;
  };
  if (verb.kind === 'list') {
    if (positionals.length) return usage('takes no arguments');
    const r = await call(verb.op, {});
    if (r.status >= 400) return errorOut(r);
    if (values.json) {
      process.stdout.write(JSON.stringify(r.body, null, 2) + '\n');
      return 0;
    }
    const rows = (r.body[verb.rows] as Row[]).map((row) => verb.columns.map(([, get]) => str(get(row))));
    process.stdout.write(
      table(
        verb.columns.map(([h]) => h),
        rows,
      ),
    );
    return 0;
  }
  if (verb.kind !== 'create' && values['no-wait']) return usage('takes no --no-wait');
  if (verb.kind === 'create') return create(verb, positionals, Boolean(values.json), Boolean(values['no-wait']), client, usage);
  const [id, ...rest] = positionals;
  if (!id) return usage('needs an ID');
  const idArg = /^\d+$/.test(id) && verb.id === 'id' ? Number(id) : id;
  if (verb.kind === 'exec') {
    if (!rest.length) return usage('needs a command after the ID (hostctl ... exec ID -- COMMAND...)');
    const timeout = values.timeout === undefined ? {} : /^\d+$/.test(values.timeout) ? { timeout_seconds: Number(values.timeout) } : undefined;
    if (!timeout) return usage('--timeout takes whole seconds');
    const r = await call(verb.op, { [verb.id]: idArg, command: rest.join(' '), ...timeout });
    if (r.status >= 400) return errorOut(r);
    if (values.json) {
      process.stdout.write(JSON.stringify(r.body, null, 2) + '\n');
      return 0;
    }
    process.stdout.write(r.body.stdout ?? '');
    process.stderr.write(r.body.stderr ?? '');
    if (r.body.truncated) process.stderr.write('hostctl: the output was cut at the exec output cap\n');
    if (r.body.timed_out) process.stderr.write('hostctl: the command timed out and was killed\n');
    return typeof r.body.exit_code === 'number' ? r.body.exit_code : 1;
  }
  if (rest.length) return usage('takes one ID');
  let last: { status: number; body: any } | undefined;
  for (const op of verb.ops) {
    last = await call(op, { [verb.id]: idArg, ...(verb.fixed ?? {}) });
    if (last.status >= 400) return errorOut(last);
  }
  if (values.json) process.stdout.write(JSON.stringify(last!.body, null, 2) + '\n');
  else process.stdout.write(`${verb.done} ${id}${last!.body?.task_id ? ` (task ${last!.body.task_id})` : ''}\n`);
  return 0;
}

async function create(
  verb: CreateVerb,
  words: string[],
  json: boolean,
  noWait: boolean,
  client: Parameters<Command>[1],
  usage: (msg: string) => number,
): Promise<number> {
  const op = getOperation(verb.op)!;
  let args: Row;
  try {
    args = parseKeyValues(op, words);
  } catch (err) {
    return usage((err as Error).message);
  }
  const r = await callOperation(client, verb.op, args);
  if (r.status >= 400) return errorOut(r);
  const id = r.body?.[verb.resource]?.[verb.idKey];
  const taskId: string | undefined = r.body?.task?.task_id;
  // The task's lines go to stderr: stdout carries only the id (or the answer with --json).
  const code = taskId && !noWait ? await watchTask(client, taskId, { out: process.stderr }) : 0;
  process.stdout.write(json ? JSON.stringify(r.body, null, 2) + '\n' : `${str(id)}\n`);
  return code;
}

/**
 * A group's command with its everyday verbs in front: a verb runs through
 * `runVerb`, anything else goes to the group's own command. The group's
 * usage (its own text and the verbs') is registered for `hostctl GROUP --help`.
 */
export function withVerbs(group: string, verbs: Readonly<Record<string, Verb>>, inner: Command, innerUsage: string): Command {
  groupUsage.set(group, `${innerUsage.trimEnd()}\n\neveryday commands (one API operation each):\n${verbsUsage(group, verbs)}`);
  return async (argv, client) => {
    const [name, ...rest] = argv;
    const verb = name === undefined ? undefined : verbs[name];
    if (!verb) return inner(argv, client);
    try {
      return await runVerb(group, name!, verb, rest, client);
    } catch (err) {
      // parseArgs' unknown options and the like: a usage error, not the daemon's.
      process.stderr.write(`hostctl: ${(err as Error).message}\n`);
      return 2;
    }
  };
}
