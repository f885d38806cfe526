/**
 * Runs host programs: argument arrays (never a shell string built from
 * input), a timeout, an abort signal, stderr in the error message, and secrets
 * only through stdin or files (never on the command line). A program that is
 * not installed is 503 naming it and what to install, never a 404.
 */
import { execa } from 'execa';
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

export async function run(program: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  const okCodes = opts.okCodes ?? [0];
  let r;
  try {
    r = await execa(program, [...args], {
      reject: false,
      timeout: opts.timeoutMs ?? 60_000,
      cancelSignal: opts.signal,
      input: opts.input,
      env: opts.env,
      extendEnv: !opts.cleanEnv,
      cwd: opts.cwd,
      encoding: opts.binary ? 'buffer' : 'utf8',
      maxBuffer: opts.maxBuffer ?? 64 * 1024 * 1024,
      stripFinalNewline: false,
      forceKillAfterDelay: 2000,
    });
  } catch (err) {
    throw internal(`cannot run ${program}: ${(err as Error).message}`);
  }
  const stderr = typeof r.stderr === 'string' ? r.stderr : Buffer.from(r.stderr as Uint8Array).toString('utf8');
  if ((r as { code?: string }).code === 'ENOENT' && r.exitCode === undefined) {
    throw unavailable(`${program} is not installed${opts.install ? ` (install ${opts.install})` : ''}`);
  }
  if (r.isCanceled) throw new ProgramError(`${program} was cancelled`, program, null, stderr, 409);
  if (r.timedOut)
    throw new ProgramError(
      `${program} did not finish within ${opts.timeoutMs ?? 60_000} ms${stderr.trim() ? `: ${stderrTail(stderr)}` : ''}`,
      program,
      null,
      stderr,
    );
  const code = r.exitCode ?? -1;
  if (r.signal && r.exitCode === undefined)
    throw new ProgramError(`${program} was killed by ${r.signal}${stderr.trim() ? `: ${stderrTail(stderr)}` : ''}`, program, null, stderr);
  const stdoutBytes = opts.binary ? Buffer.from(r.stdout as unknown as Uint8Array) : undefined;
  const stdout = opts.binary ? '' : (r.stdout as string);
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
  let r;
  try {
    const sub = execa(program, [...args], {
      reject: false,
      buffer: false,
      encoding: 'buffer',
      timeout: opts.timeoutMs ?? 60_000,
      cancelSignal: opts.signal,
      ...(opts.input !== undefined ? { input: opts.input } : { stdin: 'ignore' as const }),
      env: opts.env,
      extendEnv: !opts.cleanEnv,
      cwd: opts.cwd,
      forceKillAfterDelay: 2000,
    });
    sub.stdout?.on('data', (c: Buffer) => stdout.push(c));
    sub.stderr?.on('data', (c: Buffer) => stderr.push(c));
    r = await sub;
  } catch (err) {
    throw internal(`cannot run ${program}: ${(err as Error).message}`);
  }
  if ((r as { code?: string }).code === 'ENOENT' && r.exitCode === undefined) {
    throw unavailable(`${program} is not installed${opts.install ? ` (install ${opts.install})` : ''}`);
  }
  return { code: r.exitCode ?? null, signal: r.signal ?? null, timedOut: Boolean(r.timedOut), canceled: Boolean(r.isCanceled), stdout, stderr };
}

/** Whether `program` can be found on the PATH (or at its absolute path). */
export async function which(program: string): Promise<string | null> {
  const r = await execa('sh', ['-c', 'command -v "$1"', 'sh', program], { reject: false });
  return r.exitCode === 0 ? String(r.stdout).trim() || null : null;
}
