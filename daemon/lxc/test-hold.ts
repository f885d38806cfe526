/**
 * The race tests' hold: where the crash tests' pause (daemon/lib/test-pause.ts)
 * stops a change for good, a hold lets it go on. With
 * `HOSTD_TEST_HOLD_AT=lxc.<step>` in the daemon's environment, a change that
 * reaches that step logs `{msg: 'test hold', domain, step, at}` and waits
 * until the file `HOSTD_TEST_HOLD_RELEASE` names exists; a test changes the
 * host in between (swaps a checked path for a symlink) and sees what the
 * change does with it. Read from the injected environment; unset, the hook is
 * a resolved promise.
 */
import fs from 'node:fs';
import { pausePoint, type PauseHook } from '../lib/test-pause.js';

export const TEST_HOLD_ENV = 'HOSTD_TEST_HOLD_AT';
export const TEST_HOLD_RELEASE_ENV = 'HOSTD_TEST_HOLD_RELEASE';
export const TEST_HOLD_MSG = 'test hold';

interface WarnLog {
  warn(obj: Record<string, unknown>, msg: string): void;
}

const noHold: PauseHook = () => Promise.resolve();

export function testHold(env: Readonly<Record<string, string | undefined>>, domain: string, log: WarnLog): PauseHook {
  const point = pausePoint(env[TEST_HOLD_ENV]);
  const release = env[TEST_HOLD_RELEASE_ENV];
  if (!point || point.domain !== domain || !release) return noHold;
  const at = `${domain}.${point.step}`;
  log.warn({ domain, step: point.step, at, release }, 'test hold armed: a change reaching this step waits for the release file');
  return async (step) => {
    if (step !== point.step) return;
    log.warn({ domain, step, at }, TEST_HOLD_MSG);
    while (!fs.existsSync(release)) await new Promise((r) => setTimeout(r, 20));
  };
}
