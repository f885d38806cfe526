/**
 * The setup the console's suites against real LXC share: a daemon with the
 * busybox test image (lxc-env.ts) and a Chromium, both made before the
 * suite's tests and removed after, also when one failed. Skips with the
 * reason when Chromium or LXC is missing (a failure in CI).
 */
import { cleanupLxc, lxcEnv, requireLxc, type LxcEnv } from './lxc-env.js';
import { ConsolePages, browserMissing, launchBrowser } from './browser.js';
import { requireOrSkip } from './runtime-gate.js';

export interface LxcConsole {
  env: LxcEnv;
  pages: ConsolePages;
}

/** Registers the suite's before and after hooks (call it in a describe) and returns what they made, filled in by `before`. */
export function lxcConsole(): LxcConsole {
  const made = {} as LxcConsole;
  before(async function () {
    requireOrSkip(this, 'console', browserMissing() ?? null);
    await requireLxc(this);
    made.env = await lxcEnv();
    made.pages = new ConsolePages(await launchBrowser());
  });
  after(async () => {
    await made.pages?.close();
    await cleanupLxc();
  });
  return made;
}
