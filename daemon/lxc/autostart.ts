/**
 * Containers marked autostart start once per host boot: the boot id of the
 * last pass is stored, so a daemon restart (same boot) starts nothing and
 * never undoes a stop the user asked for. The pass runs in the background
 * after open, as the operator.
 */
import fs from 'node:fs';
import { noNotes } from '../lib/caller.js';
import type { LxcContext } from './context.js';
import type { Lifecycle } from './lifecycle.js';

/** The host's boot id; a test simulates a host reboot by setting HOSTD_TEST_LXC_BOOT_ID. */
export function bootId(env: NodeJS.ProcessEnv): string {
  if (env.HOSTD_TEST_LXC_BOOT_ID) return env.HOSTD_TEST_LXC_BOOT_ID;
  try {
    return fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return 'unknown';
  }
}

/** Starts the autostart containers unless this boot had its pass already; resolves when the pass is done. */
export async function autostart(ctx: LxcContext, lifecycle: Lifecycle, boot: string): Promise<void> {
  const last = await ctx.records.meta.get('boot_id').catch(() => undefined);
  if (last === boot) {
    // Said, so that an operator (and a test) can tell "nothing to start" from "not done yet".
    ctx.log.info({ boot }, AUTOSTART_DONE);
    return;
  }
  let started = 0;
  for (const r of await ctx.records.all()) {
    if (!r.autostart) continue;
    try {
      await lifecycle.start(r.lxcid, noNotes);
      started++;
      ctx.log.info({ lxcid: r.lxcid }, 'lxc: autostarted at boot');
    } catch (err) {
      ctx.log.error({ err, lxcid: r.lxcid }, 'lxc: autostart failed');
    }
  }
  await ctx.records.meta.put('boot_id', boot);
  ctx.log.info({ boot, started }, AUTOSTART_DONE);
}

/** The log line that ends an autostart pass, also one that had nothing to do (this boot had its pass). */
export const AUTOSTART_DONE = 'lxc: autostart pass done';
