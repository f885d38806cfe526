/**
 * A command in a guest through qemu-guest-agent (`guest-exec` with
 * `capture-output`), with its output bounded before it leaves the guest.
 *
 * qemu-ga collects a command's whole output in the guest (up to 16 MiB per
 * stream) and hands it over base64 in one reply once the command ended. So
 * that neither the guest agent nor hostd holds more than the cap, a small
 * POSIX shell wrapper runs the command with each stream piped through
 * `head -c <cap + 1>` followed by `cat >/dev/null`: the first cap + 1 bytes
 * pass (one more than is kept, so that a cut shows), the rest is read and
 * dropped in the guest, and the command never sees a broken pipe, so its exit
 * status is its own. The wrapper runs in a new session (setsid) so that a
 * timeout kills the command's whole process group, not just the shell.
 *
 * The same path serves sandboxes (they are VMs of the VM service).
 */
import { BoundedOutput, EXEC_STREAM_CAP_BYTES, type ExecResult } from '../../lib/exec-output.js';
import type { ExecStatus } from './agent.js';
import type { GuestExecOptions } from '../driver.js';

export type { GuestExecOptions };

/** One guest agent command (the driver's queue and connection). */
export type AgentCall = <T = unknown>(command: string, args?: Record<string, unknown>, timeoutMs?: number) => Promise<T>;

/**
 * Runs in the new session: $1 the number of bytes to pass per stream, $2 the
 * command. fd 3 and 4 are the agent's stdout and stderr; the command's exit
 * status comes back on fd 5 (the command substitution) so that the pipes
 * cannot change it. The command holds none of 3, 4, 5: a daemon it starts
 * does not keep the substitution open.
 */
export const EXEC_WRAPPER = [
  'pass() { head -c "$1"; cat >/dev/null; }',
  'exec 3>&1 4>&2',
  'rc=$( { { { /bin/sh -c "$2" 3>&- 4>&- 5>&-; echo $? >&5; } | pass "$1" >&3; } 2>&1 | pass "$1" >&4; } 5>&1 )',
  'exit "${rc:-125}"',
].join('\n');

/** Starts the wrapper in its own session where the guest has setsid (util-linux, busybox). */
export const EXEC_LAUNCHER = [
  'if command -v setsid >/dev/null 2>&1; then exec setsid /bin/sh -c "$1" hostd-exec "$2" "$3"; fi',
  'exec /bin/sh -c "$1" hostd-exec "$2" "$3"',
].join('\n');

/** `guest-exec` arguments for `command` with each stream cut at `cap` + 1 bytes in the guest. */
export function boundedExecArgs(command: string, cap = EXEC_STREAM_CAP_BYTES): { path: string; arg: string[] } {
  return { path: '/bin/sh', arg: ['-c', EXEC_LAUNCHER, 'hostd-launch', EXEC_WRAPPER, String(cap + 1), command] };
}

/** Kills the wrapper's process group (its session), then the process itself where setsid was missing. */
export function killArgs(pid: number): { path: string; arg: string[] } {
  // No `--`: dash's kill takes it for a pid. A signal first, then a negative pid, is a group in every shell.
  return { path: '/bin/sh', arg: ['-c', 'kill -KILL "-$1" 2>/dev/null; kill -KILL "$1" 2>/dev/null; true', 'hostd-kill', String(pid)] };
}

/** PATH of a command run with `env` (qemu-ga's `env` replaces the whole environment). */
export const GUEST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * Runs the caller's command with its user, directory and environment, like
 * `docker exec -u -w -e`. Everything comes in the environment (HOSTD_EXEC_*),
 * never spliced into this text. An unknown user or a directory that cannot be
 * entered ends with 126 and a line on stderr, as docker exec does. The
 * caller's PATH (HOSTD_EXEC_PATH) applies only to the command: the wrapper
 * around it needs the guest's own tools. HOME, USER and LOGNAME are the
 * user's unless the caller gave them.
 */
export const EXEC_PRELUDE = [
  'u=$HOSTD_EXEC_USER d=$HOSTD_EXEC_CWD c=$HOSTD_EXEC_COMMAND',
  'unset HOSTD_EXEC_USER HOSTD_EXEC_CWD HOSTD_EXEC_COMMAND',
  't=${u:-root}',
  'ent=$(getent passwd "$t" 2>/dev/null || grep "^$t:" /etc/passwd 2>/dev/null) || { echo "hostd: no user \'$t\' in the guest" >&2; exit 126; }',
  // The home is the sixth field: cut out in the shell (every process costs under TCG).
  'h=${ent#*:*:*:*:*:}; h=${h%%:*}',
  'export HOME="${HOME-$h}" USER="${USER-$t}" LOGNAME="${LOGNAME-$t}"',
  'if [ -n "$d" ]; then cd "$d" 2>/dev/null || { echo "hostd: cannot change to directory \'$d\'" >&2; exit 126; }',
  'else cd "$HOME" 2>/dev/null || cd /; fi',
  'if [ -n "$u" ]; then r=$(command -v runuser 2>/dev/null); s=$(command -v su 2>/dev/null); fi',
  'if [ -n "${HOSTD_EXEC_PATH+x}" ]; then PATH=$HOSTD_EXEC_PATH; unset HOSTD_EXEC_PATH; fi',
  'export PATH',
  'if [ -n "$u" ]; then',
  '  if [ -n "$r" ]; then exec "$r" -p -u "$u" -- /bin/sh -c "$c"; fi',
  '  exec "$s" -p -s /bin/sh "$u" -c "$c"',
  'fi',
  'exec /bin/sh -c "$c"',
].join('\n');

/** qemu-ga's `env` for a command with user, directory and environment: a fixed PATH, the caller's variables, the prelude's inputs. */
export function preludeEnv(command: string, opts: Pick<GuestExecOptions, 'env' | 'cwd' | 'user'>): string[] {
  const out = [`PATH=${GUEST_PATH}`];
  for (const [k, v] of Object.entries(opts.env ?? {})) out.push(k === 'PATH' ? `HOSTD_EXEC_PATH=${v}` : `${k}=${v}`);
  out.push(`HOSTD_EXEC_USER=${opts.user ?? ''}`, `HOSTD_EXEC_CWD=${opts.cwd ?? ''}`, `HOSTD_EXEC_COMMAND=${command}`);
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `/bin/sh -c command` in the guest; at `timeoutMs` the command's process
 * group is killed and what it printed until then is returned with
 * `timed_out: true` and `exit_code: null`.
 */
export async function guestExec(call: AgentCall, command: string, timeoutMs: number, opts: GuestExecOptions = {}): Promise<ExecResult> {
  const cap = opts.cap ?? EXEC_STREAM_CAP_BYTES;
  const t0 = Date.now();
  const prelude = opts.env !== undefined || opts.cwd !== undefined || opts.user !== undefined;
  const args: Record<string, unknown> = {
    ...(opts.cut === false
      ? { path: '/bin/sh', arg: ['-c', command, 'hostd-exec', ...(opts.args ?? [])] }
      : boundedExecArgs(prelude ? EXEC_PRELUDE : command, cap)),
    'capture-output': true,
  };
  if (prelude) args.env = preludeEnv(command, opts);
  if (opts.input !== undefined) args['input-data'] = (typeof opts.input === 'string' ? Buffer.from(opts.input) : opts.input).toString('base64');
  const encoding = opts.encoding ?? 'utf8';
  const { pid } = await call<{ pid: number }>('guest-exec', args);
  const end = t0 + timeoutMs;
  const maxWait = opts.pollMs ?? 200;
  let wait = Math.min(5, maxWait);
  let timedOut = false;
  let killedAt = 0;
  for (;;) {
    const s = await call<ExecStatus>('guest-exec-status', { pid });
    if (s.exited) return result(s, cap, timedOut, Date.now() - t0, encoding);
    if (!timedOut && Date.now() >= end) {
      timedOut = true;
      killedAt = Date.now();
      await call('guest-exec', killArgs(pid)).catch(() => undefined);
      wait = 5;
    }
    // The kill lands at once; a command stuck in the kernel gets a bounded wait, then no output.
    if (timedOut && Date.now() - killedAt > 10_000) {
      return { exit_code: null, stdout: '', stderr: '', truncated: false, timed_out: true, duration_ms: Date.now() - t0 };
    }
    await sleep(timedOut ? wait : Math.min(wait, Math.max(1, end - Date.now())));
    wait = Math.min(wait * 2, maxWait);
  }
}

/** The agent's answer as the shared ExecResult: each stream through one BoundedOutput. */
export function result(s: ExecStatus, cap: number, timedOut: boolean, durationMs: number, encoding: 'utf8' | 'base64' = 'utf8'): ExecResult {
  const out = new BoundedOutput(cap);
  const err = new BoundedOutput(cap);
  out.push(Buffer.from(s['out-data'] ?? '', 'base64'));
  err.push(Buffer.from(s['err-data'] ?? '', 'base64'));
  return {
    exit_code: timedOut ? null : (s.exitcode ?? (s.signal !== undefined ? 128 + s.signal : null)),
    stdout: encoding === 'base64' ? out.bytes().toString('base64') : out.text(),
    stderr: encoding === 'base64' ? err.bytes().toString('base64') : err.text(),
    // qemu-ga's own flags: a guest whose wrapper could not cut (no head) still says so.
    truncated: out.truncated || err.truncated || Boolean(s['out-truncated'] || s['err-truncated']),
    timed_out: timedOut,
    duration_ms: durationMs,
  };
}
