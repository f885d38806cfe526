/**
 * Runs host programs: argument arrays (never a shell string built from
 * input), a timeout, an abort signal, stderr in the error message, and secrets
 * only through stdin or files (never on the command line). A program that is
 * not installed is 503 naming it and what to install, never a 404.
 *
 * Built on node:child_process rather than execa: execa's option, stream and
 * promise machinery cost more than twice the daemon CPU of the spawn itself
 * for every program run (docs/performance.md, LXC start).
 * The behaviour is the one run.ts had on execa: stdin is a pipe (ended after
 * `input`), both streams are read until they close (a program that leaves a
 * child holding them is waited for), a timeout or cancellation sends SIGTERM
 * and SIGKILL 2 s later, and programs still running when the daemon exits get
 * SIGTERM.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import { ApiError, internal, unavailable } from './errors.js';
import { BoundedOutput } from './exec-output.js';

export interface RunOptions {
  /** Milliseconds before the program is killed (default 60 s; 0 for none). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Bytes or text written to stdin (the way to pass a secret). */
  input?: string | Buffer;
  env?: Record<string, string | undefined>;
  /** Replace the environment instead of extending it. */
  cleanEnv?: boolean;
  cwd?: string;
  /** Exit codes that are results, not failures (default only 0). */
  okCodes?: number[];
  /** What to install when the program is missing, e.g. `the qemu-utils package`. */
  install?: string;
  /** Raw stdout bytes instead of text. */
  binary?: boolean;
  /** Largest output kept, in bytes (default 64 MiB). */
  maxBuffer?: number;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
  stdoutBytes?: Buffer;
}

/** The program's failure: status 500 unless the caller maps it; `stderr` and `stdout` for parsers. */
export class ProgramError extends ApiError {
  constructor(
    message: string,
    readonly program: string,
    readonly code: number | null,
    readonly stderr: string,
    status = 500,
    readonly stdout = '',
  ) {
    super(status, message);
    this.name = 'ProgramError';
  }
}

const STDERR_IN_MESSAGE = 600;

/** The last lines of stderr, short enough for a message. */
export function stderrTail(s: string, max = STDERR_IN_MESSAGE): string {
  const t = s.trim();
  return t.length <= max ? t : '…' + t.slice(t.length - max);
}

const FORCE_KILL_AFTER_MS = 2000;

/** Programs running now: sent SIGTERM when the daemon exits, so that none outlives it unasked. */
const live = new Set<ChildProcess>();
let exitHooked = false;

interface LaunchOptions {
  timeoutMs: number;
  signal?: AbortSignal;
  input?: string | Buffer;
  env?: Record<string, string | undefined>;
  cleanEnv?: boolean;
  cwd?: string;
  /** stdin is /dev/null rather than a pipe left open when there is no input. */
  ignoreStdin?: boolean;
}

interface Outcome {
  /** Set when the program could not be started (ENOENT, EACCES, ...): it never ran. */
  spawnError?: NodeJS.ErrnoException;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Why the daemon stopped it, the first reason only. */
  stopped?: 'timeout' | 'cancel';
}

type Sink = (chunk: Buffer, stream: Readable) => void;

/**
 * Starts the program and settles once it has exited and both output streams
 * have closed. Throws only for arguments no program can be given.
 */
function launch(program: string, args: readonly string[], o: LaunchOptions, onStdout: Sink, onStderr: Sink): Promise<Outcome> {
  const nul = args.find((a) => a.includes('\0'));
  if (nul !== undefined) throw new TypeError(`Arguments cannot contain null bytes ("\\0"): ${nul}`);
  if (o.signal?.aborted) return Promise.resolve({ code: null, signal: null, stopped: 'cancel' });
  const child = spawn(program, args, {
    stdio: [o.input === undefined && o.ignoreStdin ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    env: o.cleanEnv ? o.env : o.env ? { ...process.env, ...o.env } : undefined,
    cwd: o.cwd,
  });
  return new Promise((resolve) => {
    let stopped: Outcome['stopped'];
    let spawnError: NodeJS.ErrnoException | undefined;
    let timer: NodeJS.Timeout | undefined;
    let forceTimer: NodeJS.Timeout | undefined;
    const stop = (why: 'timeout' | 'cancel') => {
      stopped ??= why;
      // kill() is a no-op once the program has exited (its pid may be reused).
      if (child.kill('SIGTERM') && !forceTimer) forceTimer = setTimeout(() => child.kill('SIGKILL'), FORCE_KILL_AFTER_MS);
    };
    const onAbort = () => stop('cancel');
    const done = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      clearTimeout(forceTimer);
      o.signal?.removeEventListener('abort', onAbort);
      live.delete(child);
      resolve(spawnError ? { spawnError, code: null, signal: null } : { code, signal, stopped });
    };
    child.on('error', (err: NodeJS.ErrnoException) => {
      if (child.pid === undefined) spawnError = err;
    });
    child.on('close', done);
    const stdout = child.stdout!;
    const stderr = child.stderr!;
    stdout.on('data', (c: Buffer) => onStdout(c, stdout));
    stderr.on('data', (c: Buffer) => onStderr(c, stderr));
    if (child.stdin) {
      // A program that exits without reading its input closes the pipe: EPIPE is not a failure.
      child.stdin.on('error', () => {});
      if (o.input !== undefined) child.stdin.end(o.input);
    }
    if (child.pid === undefined) return;
    live.add(child);
    if (!exitHooked) {
      exitHooked = true;
      process.on('exit', () => {
        for (const c of live) c.kill('SIGTERM');
      });
    }
    if (o.timeoutMs > 0) timer = setTimeout(() => stop('timeout'), o.timeoutMs);
    o.signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function notInstalled(program: string, install: string | undefined): ApiError {
  return unavailable(`${program} is not installed${install ? ` (install ${install})` : ''}`);
}

/** Keeps a stream's bytes up to `max`; past it, stops reading (the program sees a closed pipe), as execa's maxBuffer did. */
class Collected {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly max: number) {}
  push(c: Buffer, stream: Readable): void {
    if (this.size >= this.max) return;
    if (this.size + c.length > this.max) {
      this.chunks.push(c.subarray(0, this.max - this.size));
      this.size = this.max;
      stream.destroy();
      return;
    }
    this.chunks.push(c);
    this.size += c.length;
  }
  bytes(): Buffer {
    return this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.size);
  }
}

export async function run(program: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  const okCodes = opts.okCodes ?? [0];
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const max = opts.maxBuffer ?? 64 * 1024 * 1024;
  const out = new Collected(max);
  const err = new Collected(max);
  let r: Outcome;
  try {
    r = await launch(
      program,
      args,
      { ...opts, timeoutMs },
      (c, s) => out.push(c, s),
      (c, s) => err.push(c, s),
    );
  } catch (e) {
    throw internal(`cannot run ${program}: ${(e as Error).message}`);
  }
  const stderr = err.bytes().toString('utf8');
  if (r.spawnError?.code === 'ENOENT') throw notInstalled(program, opts.install);
  if (r.stopped === 'cancel') throw new ProgramError(`${program} was cancelled`, program, null, stderr, 409);
  if (r.stopped === 'timeout')
    throw new ProgramError(`${program} did not finish within ${timeoutMs} ms${stderr.trim() ? `: ${stderrTail(stderr)}` : ''}`, program, null, stderr);
  // A program that could not be started (EACCES, ...) reads as exit -1, as it did on execa.
  const code = r.code ?? -1;
  if (r.signal) throw new ProgramError(`${program} was killed by ${r.signal}${stderr.trim() ? `: ${stderrTail(stderr)}` : ''}`, program, null, stderr);
  const stdoutBytes = opts.binary ? out.bytes() : undefined;
  const stdout = opts.binary ? '' : out.bytes().toString('utf8');
  if (!okCodes.includes(code)) {
    const detail = stderrTail(stderr) || stderrTail(stdout);
    throw new ProgramError(
      `${program} ${args[0] ?? ''} failed (exit ${code})${detail ? `: ${detail}` : ''}`.replace(/ {2,}/g, ' '),
      program,
      code,
      stderr,
      500,
      stdout,
    );
  }
  return { code, stdout, stderr, stdoutBytes };
}

export interface BoundedRunOptions {
  /** Milliseconds before the program is killed (default 60 s; 0 for none). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Bytes or text written to stdin; without it stdin is /dev/null (a command that reads it sees the end at once). */
  input?: string | Buffer;
  env?: Record<string, string | undefined>;
  cleanEnv?: boolean;
  cwd?: string;
  install?: string;
  /** Bytes kept per stream (default EXEC_STREAM_CAP_BYTES). */
  cap?: number;
}

export interface BoundedRunResult {
  /** Exit code; null when the program was killed by a signal. */
  code: number | null;
  signal: string | null;
  timedOut: boolean;
  canceled: boolean;
  stdout: BoundedOutput;
  stderr: BoundedOutput;
}

/**
 * Runs a program whose output has no known bound (a command in a guest):
 * both streams are read as they come and go through a BoundedOutput each,
 * which keeps the first `cap` bytes and counts the rest, so the daemon's
 * memory stays bounded however much the program prints, and the program is
 * never blocked on a full pipe. Every exit, a timeout and a cancellation
 * are results (with what was printed until then); only a program that
 * cannot be run throws (503 when it is not installed).
 */
export async function runBounded(program: string, args: readonly string[], opts: BoundedRunOptions = {}): Promise<BoundedRunResult> {
  const stdout = new BoundedOutput(opts.cap);
  const stderr = new BoundedOutput(opts.cap);
  let r: Outcome;
  try {
    r = await launch(
      program,
      args,
      { ...opts, timeoutMs: opts.timeoutMs ?? 60_000, ignoreStdin: true },
      (c) => stdout.push(c),
      (c) => stderr.push(c),
    );
  } catch (err) {
    throw internal(`cannot run ${program}: ${(err as Error).message}`);
  }
  if (r.spawnError?.code === 'ENOENT') throw notInstalled(program, opts.install);
  return { code: r.code, signal: r.signal, timedOut: r.stopped === 'timeout', canceled: r.stopped === 'cancel', stdout, stderr };
}

/** Whether `program` can be found on the PATH (or at its absolute path). */
export async function which(program: string): Promise<string | null> {
  let out = '';
  const r = await launch(
    'sh',
    ['-c', 'command -v "$1"', 'sh', program],
    { timeoutMs: 0 },
    (c) => (out += c.toString('utf8')),
    () => {},
  );
  return r.code === 0 ? out.trim() || null : null;
}
