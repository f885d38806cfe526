/**
 * hostctl: the operator's command line. It talks to the local daemon over the
 * admin socket, so it needs no token.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { AdminClient, type Remote } from './client.js';
import { commandGroups, groupUsage, type Command } from './groups.js';
import './commands.js';
import { watchTask } from './watch.js';
import { buildRequest, callOperation, parseKeyValues } from './call.js';
import { operations, getOperation, ALL_SCOPES } from '../../api/registry/index.js';
import { API_PREFIX } from '../../api/catalog.js';
import { SYSTEM_CONFIG, loadConfig, socketPath } from '../config.js';

const USAGE_TEXT = `usage: hostctl [--config FILE | --data-dir DIR | --socket PATH | --url URL --token TOKEN] <command>

  token create --name NAME --scopes a,b,c|all
                                            create a token; prints the secret once
  token list [--json]                       names, scopes, created, last used
  token revoke NAME                         revoke a token
  task watch TASK_ID                        follow a background task to its end
  events [--follow] [--types T,..] [--resource R] [--cursor C] [--json]
                                            print events (hostctl events --help)
  cluster init | join-token | join ADDRESS TOKEN | remove PEER_ID | leave | status
                                            pair hosts (hostctl cluster --help)
  ops                                       every operation: method, path, scopes
  call OPERATION [key=value ...] [--json '{...}']
                                            run any operation (hostctl call OPERATION --help)
  completion bash                           a bash completion script (source it)
  GROUP ...                                 a domain's operator commands (hostctl GROUP --help):
                                            GROUPS

hostctl reaches the daemon through <data dir>/hostd.sock. The data dir is the one
the daemon uses: data_dir in its config file (--config, HOSTD_CONFIG, else
${SYSTEM_CONFIG} when it exists), HOSTD_DATA_DIR, else ./data, else the data/
of this hostd checkout (where \`npm start\` keeps it).

Every command takes --peer NODE: each API call it makes runs on that member of
the cluster (the call carries peer_id; this member forwards it).

With --url and --token (or HOSTD_URL and HOSTD_TOKEN) hostctl is a client of any
member's API instead, as that token: it reaches what the token's scopes allow
(token commands and the admin socket's own commands need the local socket).
`;
/** The usage text, with the command groups this build registered. */
const usage = (): string => USAGE_TEXT.replace('GROUPS', [...commandGroups.keys()].sort().join(', '));

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
    const given = (values.scopes ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    // `all`: every scope this build knows, spelled out (a token never holds a wildcard).
    const scopes = given.length === 1 && given[0] === 'all' ? [...ALL_SCOPES].sort() : given;
    const r = await callOperation(client, 'tokens_create', { name: values.name, scopes });
    if (r.status !== 201) return reply(r);
    // The secret alone, on its own line: scripts capture stdout.
    process.stdout.write(`${r.body.secret}\n`);
    return 0;
  }
  if (sub === 'list') {
    const { values } = parseArgs({ args: rest, options: { json: { type: 'boolean' } }, strict: true });
    const r = await callOperation(client, 'tokens_list', {});
    if (r.status !== 200) return reply(r);
    if (values.json) {
      process.stdout.write(JSON.stringify(r.body, null, 2) + '\n');
      return 0;
    }
    const rows = (r.body.tokens as Array<{ name: string; scopes: string[]; created_at: string; last_used_at: string | null }>).map((t) => [
      t.name,
      t.scopes.join(',') || '-',
      t.created_at,
      t.last_used_at ?? 'never',
    ]);
    printTable(['NAME', 'SCOPES', 'CREATED', 'LAST USED'], rows);
    return 0;
  }
  if (sub === 'revoke') {
    if (rest.length !== 1) fail('token revoke needs exactly one NAME');
    const r = await callOperation(client, 'tokens_revoke', { name: rest[0] });
    if (r.status !== 200) return reply(r);
    process.stdout.write(`revoked ${r.body.revoked.name}\n`);
    return 0;
  }
  fail(`unknown token command '${sub ?? ''}'\n${usage()}`);
};

const task: Command = async (argv, client) => {
  const [sub, ...rest] = argv;
  if (sub !== 'watch') fail(`unknown task command '${sub ?? ''}'`);
  // --peer is every command's (runHostctl): the client then watches that member's task.
  const { positionals } = parseArgs({ args: rest, options: {}, allowPositionals: true });
  if (positionals.length !== 1) fail('task watch needs exactly one TASK_ID');
  return watchTask(client, positionals[0]);
};

const ops: Command = async () => {
  // Every operation of the registry is served by every build (daemon/domains.ts fails to compile otherwise).
  printTable(
    ['OPERATION', 'METHOD', 'PATH', 'SCOPES'],
    operations.map((o) => [o.name, o.method, API_PREFIX + o.path, o.scopes.join(' + ') || '(any token)']),
  );
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

/** `hostctl call OPERATION --help`: the operation as the registry defines it. */
function operationHelp(name: string | undefined): number {
  const op = name ? getOperation(name) : undefined;
  if (!op) fail(`unknown operation '${name ?? ''}'; see 'hostctl ops'`);
  const props = (op.schema.properties ?? {}) as Record<string, { description?: string; type?: unknown; 'x-expect'?: string }>;
  const required = new Set([...(op.required ?? []), ...((op.schema.required as string[] | undefined) ?? [])]);
  const lines = [
    `usage: hostctl call ${op.name} [key=value ...] [--json '{...}']`,
    '',
    `  ${op.summary}`,
    `  ${op.method} ${API_PREFIX}${op.path}   scopes: ${op.scopes.join(' + ') || '(any token)'}`,
    '',
    'arguments:',
    ...Object.entries(props).map(([k, s]) => {
      const type = Array.isArray(s.type) ? s.type.join('|') : String(s.type ?? 'value');
      const what = s.description ?? s['x-expect'] ?? '';
      return `  ${`${k}${required.has(k) ? '*' : ''} (${type})`.padEnd(34)}${what}`;
    }),
    '',
    '* required. Objects and arrays go as JSON text (key=\'{"a":1}\') or in --json.',
  ];
  process.stdout.write(lines.join('\n') + '\n');
  return 0;
}

/** `hostctl completion bash`: commands, groups, verbs and operation names. */
function completion(shell: string | undefined): number {
  if (shell !== 'bash') fail("completion takes 'bash'");
  const words = ['token', 'task', 'ops', 'call', 'completion', ...commandGroups.keys()].sort().join(' ');
  const opsList = operations.map((o) => o.name).join(' ');
  process.stdout.write(`# bash completion for hostctl: source <(hostctl completion bash)
_hostctl() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]}
  if [ "$COMP_CWORD" -eq 1 ]; then COMPREPLY=($(compgen -W "${words}" -- "$cur")); return; fi
  case "\${COMP_WORDS[1]}" in
    call) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "${opsList}" -- "$cur")) ;;
    vm) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "list start stop restart suspend resume exec image" -- "$cur")) ;;
    lxc) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "list start stop restart exec image" -- "$cur")) ;;
    token) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "create list revoke" -- "$cur")) ;;
  esac
}
complete -F _hostctl hostctl
`);
  return 0;
}

function printTable(head: string[], rows: string[][]): void {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  process.stdout.write([line(head), ...rows.map(line)].join('\n') + '\n');
}

/** The checkout (or installed package) this hostctl belongs to. */
const PACKAGE_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

export interface SocketChoice {
  socket: string;
  /** How it was chosen, for messages. */
  how: string;
}

/**
 * The admin socket of the daemon this hostctl should talk to, found the way
 * the daemon finds its data dir (see the usage text).
 */
export function findSocket(
  opts: { socket?: string; dataDir?: string; config?: string; packageRoot?: string },
  env: NodeJS.ProcessEnv = process.env,
  systemConfig = SYSTEM_CONFIG,
): SocketChoice {
  if (opts.socket) return { socket: path.resolve(opts.socket), how: 'given by --socket' };
  if (opts.dataDir) return { socket: socketPath(path.resolve(opts.dataDir)), how: 'the data dir given by --data-dir' };
  const e = { ...env };
  if (opts.config) e.HOSTD_CONFIG = opts.config;
  const cfg = loadConfig(e, systemConfig);
  const source = cfg.sources?.dataDir ?? 'the default';
  if (source !== 'the default') return { socket: socketPath(cfg.dataDir), how: `the data dir from ${source}` };
  const why = cfg.configFile ? `${cfg.configFile} has no data_dir` : `HOSTD_CONFIG is unset and there is no ${systemConfig}`;
  const here = socketPath(path.resolve('data'));
  if (fs.existsSync(here)) return { socket: here, how: `./data, as ${why}` };
  const root = opts.packageRoot ?? PACKAGE_ROOT;
  const checkout = socketPath(path.join(root, 'data'));
  if (fs.existsSync(checkout)) return { socket: checkout, how: `the data dir of the checkout at ${root}, as ${why} and ./data has no socket` };
  return { socket: here, how: `./data, as ${why}; ${path.join(root, 'data')} has no socket either` };
}

export async function runHostctl(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      'data-dir': { type: 'string' },
      socket: { type: 'string' },
      config: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      url: { type: 'string' },
      token: { type: 'string' },
    },
    allowPositionals: true,
    strict: false,
  });
  const [cmd] = positionals;
  if (values.help) {
    // `hostctl GROUP --help` and `hostctl call OP --help` are that group's or operation's help.
    if (cmd === 'call') return operationHelp(positionals[1]);
    const text = cmd ? groupUsage.get(cmd) : undefined;
    if (text) {
      process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
      return 0;
    }
    if (!cmd || !commandGroups.has(cmd)) {
      process.stdout.write(usage());
      return 0;
    }
  }
  if (cmd === 'completion') return completion(positionals[1]);
  if (!cmd) {
    process.stderr.write(usage());
    return 2;
  }
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  let client: AdminClient;
  try {
    const remote = remoteOf(str(values.url) ?? process.env.HOSTD_URL, str(values.token) ?? process.env.HOSTD_TOKEN);
    if (remote) client = new AdminClient('', undefined, remote);
    else {
      const choice = findSocket({ socket: str(values.socket), dataDir: str(values['data-dir']), config: str(values.config) });
      client = new AdminClient(choice.socket, choice.how);
    }
  } catch (err) {
    process.stderr.write(`hostctl: ${(err as Error).message}\n`);
    return 2;
  }
  // Everything after the command word, minus the global options parsed above (a group's own --help stays).
  const idx = argv.indexOf(cmd);
  let tail = [...argv.slice(idx + 1), ...(values.help && !argv.slice(idx + 1).some((a) => a === '--help' || a === '-h') ? ['--help'] : [])];
  // `--peer NODE` works on every command the same way: each API call it makes runs on that member.
  const peer = takePeer(tail);
  if (peer) {
    if ('error' in peer) fail(peer.error);
    tail = peer.rest;
    client = client.onPeer(peer.peerId);
  }
  const table: Record<string, Command> = { token, task, ops, call };
  const handler = table[cmd] ?? commandGroups.get(cmd);
  if (!handler) fail(`unknown command '${cmd}'\n${usage()}`);
  try {
    return await handler(tail, client);
  } catch (err) {
    process.stderr.write(`hostctl: ${(err as Error).message}\n`);
    return 1;
  }
}

/** `--peer NODE` (or `--peer=NODE`) taken out of a command's words, up to a `--` (what follows it is the guest's command). */
export function takePeer(words: string[]): { peerId: string; rest: string[] } | { error: string } | undefined {
  const end = words.indexOf('--') < 0 ? words.length : words.indexOf('--');
  for (let i = 0; i < end; i++) {
    const w = words[i];
    if (w === '--peer' || w.startsWith('--peer=')) {
      const inline = w.startsWith('--peer=');
      const peerId = inline ? w.slice('--peer='.length) : words[i + 1];
      if (!peerId || (!inline && i + 1 >= end) || peerId.startsWith('-'))
        return { error: '--peer needs a member: --peer NODE (its peer id, as `hostctl cluster status` lists them)' };
      return { peerId, rest: [...words.slice(0, i), ...words.slice(i + (inline ? 1 : 2))] };
    }
  }
  return undefined;
}

/** The member to reach over the network, from --url/--token (or HOSTD_URL/HOSTD_TOKEN); both or neither. */
export function remoteOf(url: string | undefined, token: string | undefined): Remote | undefined {
  if (!url && !token) return undefined;
  if (!url) throw new Error('--token needs --url (or HOSTD_URL): the member to reach');
  if (!token) throw new Error('--url needs --token (or HOSTD_TOKEN): a token of that member');
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new Error(`--url must be an http:// or https:// URL such as http://127.0.0.1:8787`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('--url must be an http:// or https:// URL such as http://127.0.0.1:8787');
  if (u.username || u.password || u.search || u.hash) throw new Error('--url takes no user, password, query or fragment (the token goes in --token)');
  return { url: u, token };
}

/** Whether this module file is the one node was started with. */
export function isEntryPoint(moduleUrl: string): boolean {
  const main = process.argv[1];
  if (!main) return false;
  try {
    return pathToFileURL(fs.realpathSync(main)).href === moduleUrl;
  } catch {
    return false;
  }
}

// `node dist/daemon/cli/hostctl.js ...` works like the hostctl command.
if (isEntryPoint(import.meta.url)) void runHostctl(process.argv.slice(2)).then((code) => process.exit(code));
