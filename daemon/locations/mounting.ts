/**
 * A location's mount: choosing the route, mounting and checking it,
 * unmounting, and writing each change of an existing location's mount
 * through the intent journal. Used by the user's calls (connection.ts,
 * service.ts), the monitor and recovery.
 */
import fs from 'node:fs/promises';
import { ensureAvailable } from '../lib/availability.js';
import { ApiError, conflict, errnoCode } from '../lib/errors.js';
import { OPERATOR } from '../lib/operator.js';
import { refusal, scrub } from './addresses.js';
import { now, SECRET_NS, type LocationsContext } from './context.js';
import { MOUNT_ROUTE, routeOf, SMB_CLIENT, type Credentials, type MaybeCredentials, type MountRoute, type Remote } from './driver.js';
import type { LocationRecord } from './records.js';
import { committing } from './state-events.js';

export const remoteOf = (rec: LocationRecord): Remote => ({ host: rec.host, share: rec.share });

/** The route a new mount takes; 503 naming what is missing when none works or smbclient is missing. */
export async function mountRoute(c: LocationsContext): Promise<MountRoute> {
  const route = routeOf(await ensureAvailable(c.driver, [MOUNT_ROUTE, SMB_CLIENT]));
  // ensureAvailable accepted the MOUNT_ROUTE entry, so it names a route.
  return route!;
}

/** The stored credentials of a location (null: guest); 409 when its secret is missing. */
export async function credentials(c: LocationsContext, rec: LocationRecord): Promise<MaybeCredentials> {
  if (rec.user === null) return null;
  const password = await c.secrets.get(SECRET_NS, rec.location_id);
  if (password === null) throw conflict(`location '${rec.name}' has no stored password (its secret is missing); remove and add it again`);
  const creds: Credentials = { user: rec.user, domain: rec.domain, password };
  return creds;
}

export async function makeDirs(rec: LocationRecord): Promise<void> {
  await fs.mkdir(rec.mount_dir, { recursive: true, mode: 0o700 });
  await fs.mkdir(rec.work_dir, { recursive: true, mode: 0o700 });
}

/**
 * Unmounts whatever serves the location's mount directory: a mount made by
 * the other route (an older start, another config) goes too.
 */
export function unmount(c: LocationsContext, rec: LocationRecord): Promise<void> {
  return c.driver.release(rec.mount_dir);
}

/** Mount, secret, directories: all gone. */
export async function removeAll(c: LocationsContext, rec: LocationRecord): Promise<void> {
  await unmount(c, rec);
  if (await c.driver.mounted(rec.mount_dir)) throw conflict(`location '${rec.name}' is still mounted at ${rec.mount_dir}`);
  await c.secrets.delete(SECRET_NS, rec.location_id);
  await fs.rm(rec.work_dir, { recursive: true, force: true });
  // rmdir, not rm -r: an empty mount point only; never recurse into what could be a share.
  await fs.rmdir(rec.mount_dir).catch((err) => {
    if (errnoCode(err) !== 'ENOENT') throw err;
  });
}

/** null when the location's mount works; else what is wrong. */
export function health(c: LocationsContext, rec: LocationRecord): Promise<string | null> {
  return c.driver.health(rec.mount_route, rec.mount_dir, remoteOf(rec), c.settings.checkTimeoutMs);
}

/** After a mount: the share must answer through it, else 502 with the reason (the caller undoes the mount). */
export async function verifyMount(c: LocationsContext, rec: LocationRecord, creds: MaybeCredentials): Promise<void> {
  const err = await health(c, rec);
  if (err) throw new ApiError(502, `//${rec.host}/${rec.share} was mounted but cannot be read through the mount: ${scrub(err, creds?.password)}`);
}

/**
 * A change of an existing location's mount through the journal: the
 * intent says whether the user wants it connected, `work` does it and
 * returns the new record, committed with its state event (named by
 * `actor`) in one batch.
 */
export async function sync(
  c: LocationsContext,
  rec: LocationRecord,
  wanted: boolean,
  actor: string,
  work: () => Promise<LocationRecord>,
): Promise<LocationRecord> {
  const out = await c.records.journalVia(committing(c, actor)).run(rec.location_id, { op: 'sync', id: rec.location_id, wanted }, work, {
    commit: (r) => [c.records.put(r)],
  });
  c.lastCheck.set(out.location_id, Date.now());
  return out;
}

/**
 * Unmounts what is left, then mounts again through `route`. On failure the
 * record says unmounted with the error, and `rethrow` gives the caller the
 * error too. `actor` names the change in its event.
 */
export async function mountAgain(c: LocationsContext, rec: LocationRecord, route: MountRoute, rethrow: boolean, actor: string): Promise<LocationRecord> {
  const refused = refusal(rec);
  if (refused) throw conflict(refused);
  let failure: ApiError | null = null;
  const out = await sync(c, rec, true, actor, async () => {
    await unmount(c, rec);
    const creds = await credentials(c, rec);
    const remote = remoteOf(rec);
    try {
      await c.driver.check(remote, creds);
      await makeDirs(rec);
      await c.driver.mount(route, remote, creds, rec.mount_dir, rec.work_dir);
      const next = { ...rec, wanted: true, mount_route: route };
      await verifyMount(c, next, creds);
      return { ...next, mounted: true, last_error: null, last_error_at: null, mounted_at: now() };
    } catch (err) {
      await unmount(c, rec).catch(() => undefined);
      failure = err instanceof ApiError ? err : new ApiError(500, `mount failed: ${scrub((err as Error).message, creds?.password)}`);
      return { ...rec, wanted: true, mounted: false, last_error: failure.message, last_error_at: now(), mounted_at: null };
    }
  });
  if (failure && rethrow) throw failure;
  return out;
}

/** A mount that stopped working is unmounted and reported with its reason (as the operator: nobody asked). */
export async function lose(c: LocationsContext, rec: LocationRecord, problem: string): Promise<void> {
  let reason = problem;
  // Ask the server directly for a precise reason (host down, password changed, share removed).
  try {
    await c.driver.check(remoteOf(rec), await credentials(c, rec));
  } catch (err) {
    if (err instanceof ApiError) reason = `${err.message} (${problem})`;
  }
  c.log.warn({ location_id: rec.location_id, reason }, 'locations: lost a mount');
  await sync(c, rec, rec.wanted, OPERATOR, async () => {
    await unmount(c, rec);
    return { ...rec, mounted: false, last_error: reason, last_error_at: now(), mounted_at: null };
  });
}
