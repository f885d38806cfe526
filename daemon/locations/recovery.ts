/**
 * A start of the locations domain, around the shared recovery
 * (daemon/lib/recovery.ts, run by index.ts): the records are loaded first,
 * then each change a crash interrupted is finished or undone (`settle`),
 * then what no intent covers is put right (`tidyAfterRestart`).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { JournalOp } from '../lib/journal.js';
import { now, type LocationsContext } from './context.js';
import { removeAll, unmount } from './mounting.js';
import type { Intent, LocationRecord } from './records.js';
import { save } from './state-events.js';

/** Makes the domain's directories and loads every record. */
export async function loadRecords(c: LocationsContext): Promise<void> {
  await fs.mkdir(path.join(c.root, 'mnt'), { recursive: true, mode: 0o700 });
  await fs.mkdir(path.join(c.root, 'work'), { recursive: true, mode: 0o700 });
  await fs.chmod(c.root, 0o700);
  for (const r of await c.records.all()) c.cache.set(r.location_id, r);
}

/**
 * Finishes or undoes a change a crash interrupted (records.ts says which)
 * and returns the store writes of the outcome (committed with the
 * location's state event: index.ts gives recovery a journal that does).
 */
export async function settle(c: LocationsContext, key: string, intent: Intent): Promise<JournalOp[]> {
  switch (intent.op) {
    case 'create':
      // The caller never got an answer: no location exists.
      await removeAll(c, intent.rec);
      return [];
    case 'delete':
      await removeAll(c, intent.rec);
      return [c.records.del(intent.rec.location_id)];
    case 'sync': {
      const rec = c.cache.get(intent.id);
      if (!rec) return [];
      if (!intent.wanted) await unmount(c, rec);
      const present = await c.driver.mounted(rec.mount_dir);
      const next: LocationRecord = { ...rec, wanted: intent.wanted, mounted: present, mounted_at: present ? (rec.mounted_at ?? now()) : null };
      return [c.records.put(next)];
    }
    default:
      c.log.warn({ key }, 'locations: unknown intent dropped');
      return [];
  }
}

/** What a log line may say about an intent (a record's user and domain are not secret, but the line needs none of it). */
export function describeIntent(intent: Intent): Record<string, unknown> {
  return { op: intent.op, location_id: intent.op === 'sync' ? intent.id : intent.rec.location_id };
}

/**
 * After recovery: the helpers' leftover credential files and config
 * channels go, a work directory without a record (a create that never
 * finished) goes with its empty mount point, and after a host restart the
 * records say what is true until the restore has mounted them again.
 */
export async function tidyAfterRestart(c: LocationsContext): Promise<void> {
  const work = path.join(c.root, 'work');
  for (const id of await fs.readdir(work).catch(() => [] as string[])) {
    const dir = path.join(work, id);
    await c.driver.wipeTransient(dir);
    if (!c.cache.has(id)) {
      const mnt = path.join(c.root, 'mnt', id);
      if (!(await c.driver.mounted(mnt))) {
        await fs.rm(dir, { recursive: true, force: true });
        await fs.rmdir(mnt).catch(() => undefined);
      }
    }
  }
  for (const r of [...c.cache.values()]) {
    if (r.mounted && !(await c.driver.mounted(r.mount_dir))) {
      await save(c, { ...r, mounted: false, mounted_at: null, last_error: 'not mounted after a restart; hostd is mounting it again', last_error_at: now() });
    }
  }
}
