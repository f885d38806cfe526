/**
 * A location's connection: disconnect (unmount, and stay unmounted) and
 * reconnect (mount again, and be kept mounted). Both are idempotent: a
 * disconnected location and a working mount answer 200 unchanged.
 */
import type { ResultOf } from '../../api/registry/index.js';
import type { NoteSink } from '../lib/caller.js';
import { conflict } from '../lib/errors.js';
import { refusal } from './addresses.js';
import { now, type LocationsContext } from './context.js';
import { health, mountAgain, mountRoute, sync, unmount } from './mounting.js';
import { view } from './view.js';

const noop: NoteSink = { note() {} };

export async function disconnect(c: LocationsContext, id: string, ctx: NoteSink = noop): Promise<ResultOf<'locations_disconnect'>> {
  const out = await c.change(id, 'disconnect', async (rec) => {
    if (!rec.wanted && !rec.mounted && !(await c.driver.mounted(rec.mount_dir))) return rec; // already disconnected
    return sync(c, rec, false, async () => {
      await unmount(c, rec);
      await c.pause('disconnect.unmounted');
      return { ...rec, wanted: false, mounted: false, last_error: null, last_error_at: null, mounted_at: null };
    });
  });
  ctx.note({ summary: `Disconnected location ${out.name}`, target: out.name, metadata: { location_id: id } });
  return { location: view(c, out) };
}

export async function reconnect(c: LocationsContext, id: string, ctx: NoteSink = noop): Promise<ResultOf<'locations_reconnect'>> {
  c.find(id);
  const route = await mountRoute(c);
  const out = await c.change(id, 'reconnect', async (rec) => {
    const refused = refusal(rec);
    if (refused) {
      if (rec.last_error !== refused) await c.save({ ...rec, last_error: refused, last_error_at: now() });
      throw conflict(refused);
    }
    // Idempotent: a mount that works is left as it is.
    if (rec.mounted && (await health(c, rec)) === null) {
      if (!rec.wanted) return c.save({ ...rec, wanted: true });
      return rec;
    }
    return mountAgain(c, rec, route, true);
  });
  ctx.note({ summary: `Reconnected location ${out.name}`, target: out.name, metadata: { location_id: id, mount_route: out.mount_route } });
  return { location: view(c, out) };
}
