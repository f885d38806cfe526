/**
 * The crash tests' pause: with `HOSTD_TEST_PAUSE_AT=<domain>.<step>` in the
 * daemon's environment, the change that reaches that step of that domain
 * logs one line (`msg: 'test pause'`, with `domain`, `step` and `at`) and
 * stops there for good, so that the test can kill hostd at exactly that point
 * and check what the next start recovers. One variable for every domain; the
 * domain is the registry's name for it (`vms`, `lxc`, `apps`, ...), the step
 * is the domain's own (`create:recorded`, `move.copied`).
 *
 * Read from the environment the daemon was given (DomainDeps.env), never from
 * process.env, so a test daemon's setting is its own. Unset (always, outside
 * the crash tests) the hook is a resolved promise and costs nothing.
 */

export const TEST_PAUSE_ENV = 'HOSTD_TEST_PAUSE_AT';
/** The `msg` of the line a paused change logs. */
export const TEST_PAUSE_MSG = 'test pause';

/** Awaited at each named step of a crash-safe change. */
export type PauseHook = (step: string) => Promise<void>;

interface WarnLog {
  warn(obj: Record<string, unknown>, msg: string): void;
}

const noPause: PauseHook = () => Promise.resolve();

/** `<domain>.<step>` split at the first dot; null when the value does not name a domain. */
export function pausePoint(value: string | undefined): { domain: string; step: string } | null {
  if (!value) return null;
  const i = value.indexOf('.');
  if (i <= 0 || i === value.length - 1) return null;
  return { domain: value.slice(0, i), step: value.slice(i + 1) };
}

/**
 * The pause hook of one domain. Logs once, at creation, when the variable
 * names this domain (a daemon that would stop somewhere says so at start).
 */
export function testPause(env: Readonly<Record<string, string | undefined>>, domain: string, log: WarnLog): PauseHook {
  const value = env[TEST_PAUSE_ENV];
  if (!value) return noPause;
  const point = pausePoint(value);
  if (!point) {
    log.warn({ [TEST_PAUSE_ENV]: value }, `${TEST_PAUSE_ENV} must be <domain>.<step>; no pause is armed`);
    return noPause;
  }
  if (point.domain !== domain) return noPause;
  log.warn({ domain, step: point.step, at: value }, 'test pause armed: a change reaching this step stops for good');
  return (step) => {
    if (step !== point.step) return Promise.resolve();
    log.warn({ domain, step, at: value }, TEST_PAUSE_MSG);
    return new Promise<never>(() => undefined);
  };
}

/** Whether a parsed log line is the pause at `at` (`<domain>.<step>`): what a crash test waits for. */
export function isPauseLine(line: { msg?: unknown; at?: unknown }, at: string): boolean {
  return line.msg === TEST_PAUSE_MSG && line.at === at;
}
