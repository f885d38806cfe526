/**
 * hostctl: the operator's command line. It talks to the local daemon over the
 * admin socket, so it needs no token.
 */
import { parseArgs } from 'node:util';
import { AdminClient } from './client.js';
import { watchTask } from './watch.js';
import { buildRequest, parseKeyValues } from './call.js';
import { operations, getOperation } from '../../api/registry/index.js';
import { API_PREFIX } from '../../api/catalog.js';
import { loadConfig, socketPath } from '../config.js';

export type Command = (argv: string[], client: AdminClient) => Promise<number>;

const USAGE = `usage: hostctl [--data-dir DIR | --socket PATH] <command>

  token create --name NAME --scopes a,b,c   create a token; prints the secret once
  token list                                names, scopes, created, last used
  token revoke NAME                         revoke a token
  task watch TASK_ID [--peer PEER_ID]       follow a background task to its end
  cluster init | join-token | join ADDRESS TOKEN | remove PEER_ID | leave | status
                                            pair hosts (hostctl cluster --help)
  ops                                       list every operation
  call OPERATION [key=value ...] [--json '{...}']
                                            run any operation as the local admin
`;

/** Extra command groups (e.g. `cluster`) register here. */
export const commandGroups = new Map<string, Command>();

function fail(msg: string): never {
  process.stderr.write(`hostctl: ${msg}\n`);
  process.exit(2);
}

async function reply(r: { status: number; body: any }): Promise<number> {
  if (r.status >= 400) {
    process.stderr.write(`hostctl: ${r.body?.error ?? `status ${r.status}`}\n`);
    return 1;
  }
  return 0;
}

const token: Command = async (argv, client) => {
  const [sub, ...rest] = argv;
  if (sub === 'create') {
    const { values } = parseArgs({ args: rest, options: { name: { type: 'string' }, scopes: { type: 'string', default: '' } }, strict: true });
    if (!values.name) fail('token create needs --name');
    const scopes = (values.scopes ?? '').split(',').map((s) => s.trim()).filter(Boolean);
    const r = await client.request('POST', '/admin/tokens', { name: values.name, scopes });
    if (r.status !== 201) return reply(r);
    // The secret alone, on its own line: scripts capture stdout.
    process.stdout.write(`${r.body.secret}\n`);
    return 0;
  }
  if (sub === 'list') {
    const r = await client.request('GET', '/admin/tokens');
    if (r.status !== 200) return reply(r);
    const rows = (r.body.tokens as Array<{ name: string; scopes: string[]; created_at: string; last_used_at: string | null }>).map((t) => [
      t.name, t.scopes.join(',') || '-', t.created_at, t.last_used_at ?? 'never',
    ]);
    printTable(['NAME', 'SCOPES', 'CREATED', 'LAST USED'], rows);
    return 0;
  }
  if (sub === 'revoke') {
    if (rest.length !== 1) fail('token revoke needs exactly one NAME');
    const r = await client.request('DELETE', `/admin/tokens/${encodeURIComponent(rest[0])}`);
    if (r.status !== 200) return reply(r);
    process.stdout.write(`revoked ${r.body.revoked.name}\n`);
    return 0;
  }
  fail(`unknown token command '${sub ?? ''}'\n${USAGE}`);
};

const task: Command = async (argv, client) => {
  const [sub, ...rest] = argv;
  if (sub !== 'watch') fail(`unknown task command '${sub ?? ''}'`);
  const { values, positionals } = parseArgs({ args: rest, options: { peer: { type: 'string' } }, allowPositionals: true });
  if (positionals.length !== 1) fail('task watch needs exactly one TASK_ID');
  return watchTask(client, positionals[0], { peerId: values.peer });
};

const ops: Command = async () => {
  printTable(['OPERATION', 'METHOD', 'PATH', 'SCOPES'], operations.map((o) => [o.name, o.method, API_PREFIX + o.path, o.scopes.join(' + ') || '(any token)']));
  return 0;
};

const call: Command = async (argv, client) => {
  const { values, positionals } = parseArgs({ args: argv, options: { json: { type: 'string' } }, allowPositionals: true });
  const [name, ...kv] = positionals;
  const op = name ? getOperation(name) : undefined;
  if (!op) fail(`unknown operation '${name ?? ''}'; see 'hostctl ops'`);
  let args: Record<string, unknown> = {};
  if (values.json) {
    try {
      args = JSON.parse(values.json);
    } catch {
      fail('--json must be a JSON object');
    }
  }
  Object.assign(args, parseKeyValues(op, kv));
  const req = buildRequest(op, args);
  const r = await client.request(req.method, req.path, req.body);
  if (r.status >= 400) return reply(r);
  process.stdout.write(JSON.stringify(r.body, null, 2) + '\n');
  return 0;
};

function printTable(head: string[], rows: string[][]): void {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd();
  process.stdout.write([line(head), ...rows.map(line)].join('\n') + '\n');
}

export async function runHostctl(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { 'data-dir': { type: 'string' }, socket: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    allowPositionals: true,
    strict: false,
  });
  const [cmd] = positionals;
  if (values.help || !cmd) {
    process.stdout.write(USAGE);
    return cmd ? 0 : 2;
  }
  let socket = typeof values.socket === 'string' ? values.socket : undefined;
  if (!socket) {
    const env = { ...process.env };
    if (typeof values['data-dir'] === 'string') env.HOSTD_DATA_DIR = values['data-dir'];
    socket = socketPath(loadConfig(env).dataDir);
  }
  const client = new AdminClient(socket);
  // Everything after the command word, minus the global options parsed above.
  const idx = argv.indexOf(cmd);
  const tail = argv.slice(idx + 1);
  const table: Record<string, Command> = { token, task, ops, call };
  const handler = table[cmd] ?? commandGroups.get(cmd);
  if (!handler) fail(`unknown command '${cmd}'\n${USAGE}`);
  try {
    return await handler(tail, client);
  } catch (err) {
    process.stderr.write(`hostctl: ${(err as Error).message}\n`);
    return 1;
  }
}
