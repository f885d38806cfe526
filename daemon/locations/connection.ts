/**
 * A location's connection: disconnect (unmount, and stay unmounted) and
 * reconnect (mount again, and be kept mounted). Both are idempotent: a
 * disconnected location and a working mount answer 200 unchanged.
 */
import type { ResultOf } from '../../api/registry/index.js';
import type { Caller, NoteSink } from '../lib/caller.js';
import { conflict } from '../lib/errors.js';
import { actorOf } from '../lib/operator.js';
import { refusal } from './addresses.js';
import { now, type LocationsContext } from './context.js';
import { health, mountAgain, mountRoute, sync, unmount } from './mounting.js';
import { save } from './state-events.js';
import { view } from './view.js';

type CallSink = NoteSink & { caller?: Caller };

const noop: CallSink = { note() {} };

export async function disconnect(c: LocationsContext, id: string, ctx: CallSink = noop): Promise<ResultOf<'locations_disconnect'>> {
  const out = await c.change(id, 'disconnect', async (rec) => {
    if (!rec.wanted && !rec.mounted && !(await c.driver.mounted(rec.mount_dir))) return rec; // already disconnected
    const out = await sync(c, rec, false, actorOf(ctx), async () => {
      await unmount(c, rec);
      await c.pause('disconnect.unmounted');
      return { ...rec, wanted: false, mounted: false, last_error: null, last_error_at: null, mounted_at: null };
    });
    await c.pause('disconnect.committed');
    return out;
  });
  ctx.note({ summary: `Disconnected location ${out.name}`, target: out.name, metadata: { location_id: id } });
  return { location: view(c, out) };
}

export async function reconnect(c: LocationsContext, id: string, ctx: CallSink = noop): Promise<ResultOf<'locations_reconnect'>> {
  c.find(id);
  const route = await mountRoute(c);
  const out = await c.change(id, 'reconnect', async (rec) => {
    const refused = refusal(rec);
    if (refused) {
      if (rec.last_error !== refused) await save(c, { ...rec, last_error: refused, last_error_at: now() }, actorOf(ctx));
      throw conflict(refused);
    }
    // Idempotent: a mount that works is left as it is.
    if (rec.mounted && (await health(c, rec)) === null) {
      if (!rec.wanted) return save(c, { ...rec, wanted: true }, actorOf(ctx));
      return rec;
    }
    // A mount that fails is stored as `unavailable` (with its event) before the error goes to the caller.
    return mountAgain(c, rec, route, true, actorOf(ctx));
  });
  ctx.note({ summary: `Reconnected location ${out.name}`, target: out.name, metadata: { location_id: id, mount_route: out.mount_route } });
  return { location: view(c, out) };
}
