/**
 * Keeping mounts true to their records in the background: the restore after
 * a start (adopt a mount that survived, mount again one a host restart
 * took), the periodic pass (check mounted locations, retry lost ones), and
 * the check a GET makes at most once a second per location.
 */
import { ApiError } from '../lib/errors.js';
import { OPERATOR } from '../lib/operator.js';
import { refusal } from './addresses.js';
import { HEALTH, now, type LocationsContext } from './context.js';
import { health, lose, mountAgain, mountRoute, sync, unmount } from './mounting.js';
import { save } from './state-events.js';

/** Brings every wanted location back and unmounts every unwanted one; runs in the background after a start. */
export async function restoreMounts(c: LocationsContext): Promise<void> {
  await Promise.all(
    [...c.cache.values()].map((r) =>
      reconcile(c, r.location_id, true).catch((err) => c.log.warn({ err, location_id: r.location_id }, 'locations: restore failed')),
    ),
  );
}

/** One pass of the monitor: settle what recovery left pending, check mounted ones, retry wanted ones that are not mounted. */
export async function monitorPass(c: LocationsContext): Promise<void> {
  if (c.closed) return;
  await c.recovery.retry();
  await Promise.all(
    [...c.cache.values()].map((r) =>
      reconcile(c, r.location_id, false).catch((err) => c.log.warn({ err, location_id: r.location_id }, 'locations: check failed')),
    ),
  );
}

/** Re-reads the state of a mounted location now and then (GET): a lost share shows as unmounted. */
export async function refresh(c: LocationsContext, id: string): Promise<void> {
  const rec = c.cache.get(id);
  if (!rec || !rec.mounted || c.lock.busy(c.key(id))) return;
  const last = c.lastCheck.get(id) ?? 0;
  if (Date.now() - last < 1000) return;
  await c.lock.run([c.key(id)], () => checkMounted(c, id), HEALTH).catch((err) => c.log.warn({ err, location_id: id }, 'locations: check failed'));
}

async function checkMounted(c: LocationsContext, id: string): Promise<void> {
  const rec = c.cache.get(id);
  if (!rec || !rec.mounted) return;
  c.lastCheck.set(id, Date.now());
  await c.settled(id);
  const problem = await health(c, rec);
  if (problem) await lose(c, rec, problem);
}

/**
 * Makes one location's mount match its record: adopt a working mount,
 * remount a wanted one that is missing or broken, unmount an unwanted one.
 * `atStart` also mounts again wanted locations that failed before.
 */
async function reconcile(c: LocationsContext, id: string, atStart: boolean): Promise<void> {
  const key = c.key(id);
  if (c.lock.busy(key) || c.closed) return;
  await c.lock.run([key], () => reconcileLocked(c, id, atStart), HEALTH);
}

async function reconcileLocked(c: LocationsContext, id: string, atStart: boolean): Promise<void> {
  const rec = c.cache.get(id);
  if (!rec || c.closed) return;
  await c.settled(id);
  const present = await c.driver.mounted(rec.mount_dir);
  if (!rec.wanted) {
    if (present || rec.mounted) {
      await sync(c, rec, false, OPERATOR, async () => {
        await unmount(c, rec);
        return { ...rec, mounted: false };
      });
    }
    return;
  }
  if (rec.mounted || present) {
    const problem = present ? await health(c, rec) : 'the mount is gone (host restarted?)';
    c.lastCheck.set(id, Date.now());
    if (!problem) {
      if (!rec.mounted) await save(c, { ...rec, mounted: true, mounted_at: rec.mounted_at ?? now() });
      return;
    }
    if (!atStart) {
      await lose(c, rec, problem);
      return;
    }
  }
  // Wanted but not mounted (or broken at start): mount it again, unless today's rules refuse its address.
  const refused = refusal(rec);
  if (refused) {
    if (rec.last_error !== refused) {
      c.log.warn({ location_id: id, reason: refused }, 'locations: not mounting a location whose stored address a rule now refuses');
      await save(c, { ...rec, mounted: false, last_error: refused, last_error_at: now() });
    }
    return;
  }
  let route;
  try {
    route = await mountRoute(c);
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 503) throw err;
    await save(c, { ...rec, mounted: false, last_error: err.message, last_error_at: now() });
    return;
  }
  const out = await mountAgain(c, rec, route, false, OPERATOR);
  if (out.mounted) c.log.info({ location_id: id, mount_route: out.mount_route }, 'locations: mounted again');
}
