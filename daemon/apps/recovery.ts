/**
 * How each interrupted change of an app is settled at start (IntentRecovery,
 * run by open() before any call), so that records, compose projects and data
 * agree. Returns the store writes of the outcome; recovery commits them with
 * the intent's drop in one batch. A settle that cannot run yet (the engine or
 * compose is missing) leaves the intent pending: calls that touch the app
 * answer 503 until a retry settles it.
 */
import fs from 'node:fs/promises';
import { ensureAvailable } from '../lib/availability.js';
import type { JournalOp } from '../lib/journal.js';
import { runAction } from './actions.js';
import type { AppsContext } from './context.js';
import { apply, removeEverything } from './definition.js';
import { COMPOSE, ENGINE } from './driver.js';
import type { AppIntent } from './records.js';

export async function settleIntent(c: AppsContext, i: AppIntent): Promise<JournalOp[]> {
  const R = c.records;
  switch (i.op) {
    case 'install':
      // Rolled back: the install's task died with the daemon.
      await ensureAvailable(c.driver, [ENGINE]);
      await removeEverything(c, i.record);
      return R.forget(i.app_id);
    case 'delete':
      await ensureAvailable(c.driver, [ENGINE]);
      await removeEverything(c, i.record);
      return R.forget(i.app_id);
    case 'action':
      await ensureAvailable(c.driver, [ENGINE, COMPOSE]);
      await runAction(c, i.action, i.after);
      return [R.putRecord(i.after)];
    case 'update':
      await ensureAvailable(c.driver, [ENGINE, COMPOSE]);
      try {
        await apply(c, i.after);
        return [R.putRecord(i.after.record), R.putContent(i.app_id, i.after.content)];
      } catch (err) {
        c.log.warn({ err, app_id: i.app_id }, 'apps: the interrupted update does not apply; putting the previous definition back');
        await apply(c, i.before).catch((e) => c.log.error({ err: e, app_id: i.app_id }, 'apps: the previous definition does not apply either'));
        return [R.putRecord(i.before.record), R.putContent(i.app_id, i.before.content)];
      }
    case 'move': {
      await ensureAvailable(c.driver, [ENGINE, COMPOSE]);
      const content = await R.contentOf(i.app_id);
      if (i.phase === 'copy') {
        await fs.rm(i.staging, { recursive: true, force: true });
        await fs.rm(i.after.data_dir, { recursive: true, force: true });
        const back = { ...i.before, task_id: null };
        await apply(c, { record: back, content });
        return [R.putRecord(back)];
      }
      await apply(c, { record: i.after, content }).catch((e) =>
        c.log.error({ err: e, app_id: i.app_id }, 'apps: the moved app does not start; start it again'),
      );
      await fs.rm(i.before.data_dir, { recursive: true, force: true });
      return [R.putRecord({ ...i.after, task_id: null })];
    }
  }
}

/** What a log line may say about an intent: never the intent itself (it holds the compose content). */
export function describeIntent(i: AppIntent): Record<string, unknown> {
  return { op: i.op, app_id: i.app_id };
}
