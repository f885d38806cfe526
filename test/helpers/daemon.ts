/**
 * Starts real hostd processes for integration tests: own data dir, loopback
 * port chosen by the OS, admin socket for tokens. Every daemon started here is
 * stopped by `stopAll()` (mocha root hook) even when a test fails.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { AdminClient } from '../../daemon/cli/client.js';
import { socketPath } from '../../daemon/config.js';

/** The repository root (tests run from dist/test/...). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const MAIN = path.join(ROOT, 'dist/daemon/main.js');
export const HOSTCTL = path.join(ROOT, 'daemon/cli/pkg/hostctl.js');

export interface StartOptions {
  dataDir?: string;
  env?: Record<string, string>;
  /** YAML text written to a config file passed as HOSTD_CONFIG. */
  configYaml?: string;
  /** Run the daemon through this command prefix, e.g. ['ip', 'netns', 'exec', 'ns1']. */
  wrap?: string[];
  httpAddr?: string;
  /**
   * Send the daemon's stdout to <dataDir>/hostd.log instead of a pipe parsed by
   * this process (benchmarks: parsing every request line here would steal CPU
   * from the load generator). `logs` then stays empty.
   */
  logToFile?: boolean;
  /**
   * Run the daemon inside this network namespace (made by the test): it is
   * started through `ip netns exec <ns>`, and `request()` runs curl inside the
   * same namespace, so no client traffic leaves it.
   */
  netns?: string;
}

export interface Reply {
  status: number;
  headers: Record<string, string>;
  body: any;
  text: string;
}

export class TestDaemon {
  readonly logs: any[] = [];
  exited: Promise<number | null>;
  /** Network namespace the daemon runs in (requests then go through curl inside it). */
  netns?: string;

  constructor(
    readonly proc: ChildProcess,
    readonly dataDir: string,
    public url: string,
    public listening: any,
  ) {
    this.exited = new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
  }

  get socket(): string {
    return socketPath(this.dataDir);
  }

  get admin(): AdminClient {
    return new AdminClient(this.socket);
  }

  get nodeId(): string {
    return this.listening.node_id;
  }

  /** host:port the cluster listener is bound to (the real port when configured with port 0). */
  get clusterListen(): string {
    return this.listening.cluster;
  }

  /** The address other members use to reach this node. */
  get clusterAddr(): string {
    return this.listening.cluster_advertise ?? this.listening.cluster;
  }

  async token(name: string, scopes: string[]): Promise<string> {
    const r = await this.admin.request('POST', '/admin/tokens', { name, scopes });
    if (r.status !== 201) throw new Error(`token create failed: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.secret;
  }

  async request(
    method: string,
    p: string,
    opts: { token?: string; body?: unknown; rawBody?: string | Buffer; headers?: Record<string, string> } = {},
  ): Promise<Reply> {
    if (this.netns) return this.requestInNetns(method, p, opts);
    const { headers, body } = requestParts(opts);
    const res = await fetch(this.url + p, { method, headers, body: body as BodyInit | undefined });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: Object.fromEntries(res.headers.entries()), body: parsed, text };
  }

  /** The same request, made by curl inside the daemon's network namespace. */
  private requestInNetns(
    method: string,
    p: string,
    opts: { token?: string; body?: unknown; rawBody?: string | Buffer; headers?: Record<string, string> },
  ): Promise<Reply> {
    const args = ['netns', 'exec', this.netns!, 'curl', '-sS', '--max-time', '60', '-X', method, '-o', '-', '-w', '\n%{http_code}'];
    const { headers, body } = requestParts(opts);
    for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}: ${v}`);
    if (body !== undefined) args.push('--data-binary', '@-');
    args.push(this.url + p);
    return new Promise((resolve, reject) => {
      const c = spawn('ip', args, { stdio: ['pipe', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      c.stdout!.on('data', (d) => (out += d.toString()));
      c.stderr!.on('data', (d) => (err += d.toString()));
      c.once('error', reject);
      c.once('exit', (code) => {
        const i = out.lastIndexOf('\n');
        const status = Number(out.slice(i + 1));
        if (code !== 0 || !status) {
          reject(new Error(`curl in ${this.netns} failed (${code}): ${err.trim()}`));
          return;
        }
        const text = out.slice(0, i);
        let parsed: unknown;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          parsed = undefined;
        }
        resolve({ status, headers: {}, body: parsed, text });
      });
      // curl may exit before reading its input (connection refused): that is its answer, not an error here.
      c.stdin!.on('error', () => undefined);
      c.stdin!.end(body ?? '');
    });
  }

  /** SIGTERM and wait. */
  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 10_000);
    await this.exited;
    clearTimeout(t);
  }

  /** SIGKILL: a crash at an arbitrary moment. */
  async kill(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGKILL');
    await this.exited;
  }
}

type RequestOptions = { token?: string; body?: unknown; rawBody?: string | Buffer; headers?: Record<string, string> };

/** Headers and body of a test request: bearer token, JSON body or raw bytes. */
function requestParts(opts: RequestOptions): { headers: Record<string, string>; body: string | Buffer | undefined } {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | Buffer | undefined;
  if (opts.rawBody !== undefined) body = opts.rawBody;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  return { headers, body };
}

const running = new Set<TestDaemon>();
const tempDirs = new Set<string>();
/** The test file each running daemon belongs to (see claimDaemons). */
const owners = new Map<TestDaemon, string>();

/**
 * Gives every running daemon that has no test file yet to `file`: the file of
 * a test that just ended (hooks.ts). A daemon started in a file's `before`
 * is claimed when that file's first test ends.
 */
export function claimDaemons(file: string): void {
  for (const d of running) if (!owners.has(d)) owners.set(d, file);
}

/** The owner of a daemon several test files share: no file's end stops it, the end of the run does. */
const SHARED = '(shared by the run)';

/** Keeps `d` running across test files (a fixture several files reuse); stopAll() still stops it. */
export function shareDaemon(d: TestDaemon): void {
  owners.set(d, SHARED);
}

/**
 * Stops the daemons of test file `file` (hooks.ts, when the next file's
 * tests begin): a daemon a file did not stop would otherwise idle, with its
 * memory and its timers, until the end of the whole suite.
 */
export async function stopDaemonsOf(file: string): Promise<void> {
  await Promise.all([...running].filter((d) => owners.get(d) === file).map((d) => d.stop()));
}

export function tempDir(prefix = 'hostd-test-'): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.add(d);
  return d;
}

/** How long a daemon may take to say it listens before the start counts as failed. */
const START_BOUND_MS = 120_000;

export async function startDaemon(opts: StartOptions = {}): Promise<TestDaemon> {
  const dataDir = opts.dataDir ?? tempDir();
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    HOSTD_DATA_DIR: dataDir,
    HOSTD_HTTP_ADDR: opts.httpAddr ?? '127.0.0.1:0',
    HOSTD_CLUSTER_ADDR: '127.0.0.1:0',
    HOSTD_LOG_LEVEL: 'info',
    // No config file unless the test gives one: a host's /etc/hostd/config.yaml must not leak in.
    HOSTD_CONFIG: '',
    ...(opts.env ?? {}),
  };
  if (opts.configYaml !== undefined) {
    const cfg = path.join(dataDir, 'config.yaml');
    fs.mkdirSync(dataDir, { recursive: true });
    fs.writeFileSync(cfg, opts.configYaml);
    env.HOSTD_CONFIG = cfg;
  }
  const argv = [...(opts.wrap ?? (opts.netns ? ['ip', 'netns', 'exec', opts.netns] : [])), process.execPath, MAIN];
  if (opts.logToFile) return startLoggingToFile(argv, env, dataDir);
  const proc = spawn(argv[0], argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: any[] = [];
  let stderr = '';
  proc.stderr!.on('data', (c) => (stderr += c.toString()));
  const rl = readline.createInterface({ input: proc.stdout! });
  const listening = await new Promise<any>((resolve, reject) => {
    // A bound, not a measure: a start costs a second or two of CPU, and a machine running
    // other suites beside this one was seen stretching that past 30 s.
    const timer = setTimeout(() => {
      // A daemon that never said it listens is nobody's to stop later: kill it now, or it outlives the run.
      proc.kill('SIGKILL');
      reject(new Error(`hostd did not start within ${START_BOUND_MS / 1000} s; stderr: ${stderr}`));
    }, START_BOUND_MS);
    rl.on('line', (line) => {
      let rec: any;
      try {
        rec = JSON.parse(line);
      } catch {
        return;
      }
      logs.push(rec);
      if (rec.msg === 'hostd listening') {
        clearTimeout(timer);
        resolve(rec);
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`hostd exited with ${code} before listening; stderr: ${stderr}`));
    });
  });
  const d = new TestDaemon(proc, dataDir, listening.http, listening);
  d.netns = opts.netns;
  d.logs.push(...logs);
  rl.on('line', (line) => {
    try {
      d.logs.push(JSON.parse(line));
    } catch {
      /* not a log line */
    }
  });
  track(d);
  return d;
}

function track(d: TestDaemon): void {
  running.add(d);
  void d.exited.then(() => {
    running.delete(d);
    owners.delete(d);
  });
}

async function startLoggingToFile(argv: string[], env: Record<string, string>, dataDir: string): Promise<TestDaemon> {
  fs.mkdirSync(dataDir, { recursive: true });
  const logPath = path.join(dataDir, 'hostd.log');
  const fd = fs.openSync(logPath, 'a');
  const proc = spawn(argv[0], argv.slice(1), { env, stdio: ['ignore', fd, 'pipe'] });
  fs.closeSync(fd);
  let stderr = '';
  proc.stderr!.on('data', (c) => (stderr += c.toString()));
  let exited = false;
  proc.once('exit', () => (exited = true));
  const listening = await eventually(
    () => {
      if (exited) throw new Error(`hostd exited before listening; stderr: ${stderr}`);
      const text = fs.existsSync(logPath) ? fs.readFileSync(logPath, 'utf8') : '';
      for (const line of text.split('\n')) {
        if (!line.includes('hostd listening')) continue;
        try {
          return JSON.parse(line);
        } catch {
          /* partial line */
        }
      }
      return undefined;
    },
    START_BOUND_MS,
    'hostd to listen',
  ).catch((err) => {
    // Never listened: kill it now, or it outlives the run.
    proc.kill('SIGKILL');
    throw err;
  });
  const d = new TestDaemon(proc, dataDir, listening.http, listening);
  track(d);
  return d;
}

export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((d) => d.stop()));
  for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
  tempDirs.clear();
}

/** Waits until `check` returns a truthy value, polling; fails after `ms`. */
export async function eventually<T>(check: () => Promise<T | undefined | false> | T | undefined | false, ms = 10_000, what = 'condition'): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v as T;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface CommandResult {
  /** Exit status; 1 for a command ended by a signal or the time limit. */
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command from the repository root to its end (killed after `timeoutMs`); a non-zero exit is a result, not an error. */
export function runCommand(
  file: string,
  args: string[],
  opts: { env?: Record<string, string>; timeoutMs?: number; cwd?: string } = {},
): Promise<CommandResult> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { cwd: opts.cwd ?? ROOT, env: { ...process.env, ...(opts.env ?? {}) }, timeout: opts.timeoutMs ?? 60_000, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

/** `hostctl --data-dir <dataDir> ...args`, as an operator runs it. */
export function hostctl(dataDir: string, args: string[], env: Record<string, string> = {}): Promise<CommandResult> {
  return runCommand(process.execPath, [HOSTCTL, '--data-dir', dataDir, ...args], { env });
}

/**
 * Runs `start` with `count` loopback ports that were free a moment ago, and
 * again with other ones (up to `tries` times) when something took one of them
 * in between, which `start` reports as an error saying EADDRINUSE or "the
 * address is in use". For tests that must name the ports they listen on;
 * the others listen on port 0.
 */
export async function onFreePorts<T>(count: number, start: (ports: number[]) => Promise<T>, tries = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const ports: number[] = [];
    while (ports.length < count) {
      const p = await freePort();
      if (!ports.includes(p)) ports.push(p);
    }
    try {
      return await start(ports);
    } catch (err) {
      if (attempt >= tries || !/EADDRINUSE|address is in use/.test((err as Error)?.message ?? '')) throw err;
    }
  }
}

/** A loopback port that was free a moment ago (see onFreePorts). */
export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}
