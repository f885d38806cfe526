/**
 * The commands an operator types every day (`hostctl vm list`, `hostctl lxc
 * stop 200`, `hostctl vm exec 101 -- uname -a`), the verbs Proxmox's `qm`/`pct`
 * and Incus users expect. Each verb is one registry operation: the request is
 * built from the registry (call.ts), so a verb can never drift from the API.
 * Every verb takes `--json` (the answer as the API gives it instead of a
 * table or a line), and, as every command, `--peer NODE` (hostctl.ts).
 */
import { parseArgs } from 'node:util';
import { callOperation } from './call.js';
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

export type Verb = ListVerb | ActionVerb | ExecVerb;

/** The usage text of a group's everyday verbs. */
export function verbsUsage(group: string, verbs: Readonly<Record<string, Verb>>): string {
  const lines = Object.entries(verbs).map(([name, v]) => {
    const what = v.kind === 'list' ? `${name} [--json]` : v.kind === 'exec' ? `${name} ID [--timeout S] [--json] -- COMMAND...` : `${name} ID [--json]`;
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
    options: { json: { type: 'boolean' }, timeout: { type: 'string' } },
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
