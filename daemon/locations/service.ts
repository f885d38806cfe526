/**
 * Locations, the resource: list, get, create (connect and mount a share),
 * delete (unmount, forget the password, remove the record), and the
 * connections port through which the folders domain reaches a mounted
 * share. Decisions the spec leaves open are in docs/locations.md.
 */
import crypto from 'node:crypto';
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { Caller, NoteSink } from '../lib/caller.js';
import { badRequest, conflict, notFound } from '../lib/errors.js';
import { actorOf } from '../lib/operator.js';
import { parseCredentials, parseRemote, remoteText } from './addresses.js';
import { now, SECRET_NS, type LocationsContext } from './context.js';
import type { LocationRecord } from './records.js';
import { makeDirs, mountRoute, removeAll, unmount, verifyMount } from './mounting.js';
import { refresh } from './monitor.js';
import { committing } from './state-events.js';
import { allByName, hostStatus, view } from './view.js';

type CallSink = NoteSink & { caller?: Caller };

const noop: CallSink = { note() {} };

export async function list(c: LocationsContext): Promise<ResultOf<'locations_list'>> {
  await Promise.all([...c.cache.keys()].map((id) => refresh(c, id)));
  return { locations: allByName(c), host: await hostStatus(c) };
}

export async function get(c: LocationsContext, id: string): Promise<ResultOf<'locations_get'>> {
  c.find(id);
  await refresh(c, id);
  return { location: view(c, c.find(id)) };
}

export async function create(c: LocationsContext, args: ArgsOf<'locations_create'>, ctx: CallSink = noop): Promise<ResultOf<'locations_create'>> {
  const name = args.name;
  const remote = parseRemote(args.remote);
  if (args.type !== undefined && args.type !== 'smb')
    throw badRequest(`argument 'type' must be 'smb' (the only type mounted), not '${String(args.type).slice(0, 40)}'`);
  const creds = parseCredentials(args.username, args.password);
  const route = await mountRoute(c);
  await c.lock.run(['names'], async () => {
    if (c.creating.has(name) || [...c.cache.values()].some((r) => r.name === name)) throw conflict(`a location named '${name}' already exists`);
    c.creating.add(name);
  });
  try {
    // The probe touches nothing: a share that cannot be used fails here with its reason.
    await c.driver.check(remote, creds);
    const id = newId(c);
    const rec: LocationRecord = {
      location_id: id,
      name,
      type: 'smb',
      host: remote.host,
      share: remote.share,
      user: creds?.user ?? null,
      domain: creds?.domain ?? null,
      wanted: true,
      mounted: true,
      mount_route: route,
      ...c.dirsOf(id),
      last_error: null,
      last_error_at: null,
      mounted_at: now(),
      created_at: now(),
    };
    // The record's commit carries its `mounted` event (one batch).
    const done = await c.lock.exclusive([c.key(id)], 'create', () =>
      c.records.journalVia(committing(c, actorOf(ctx))).run(
        id,
        { op: 'create', rec },
        async () => {
          if (creds) await c.secrets.put(SECRET_NS, id, creds.password);
          await makeDirs(rec);
          await c.driver.mount(route, remote, creds, rec.mount_dir, rec.work_dir);
          await c.pause('create.mounted');
          await verifyMount(c, rec, creds);
          return rec;
        },
        {
          commit: (r) => [c.records.put(r)],
          rollback: () => removeAll(c, rec),
        },
      ),
    );
    c.lastCheck.set(id, Date.now());
    await c.pause('create.committed');
    ctx.note({
      summary: `Connected location ${name} (${remoteText(remote)}) through ${route}`,
      target: name,
      metadata: { location_id: id, remote: remoteText(remote), mount_route: route },
    });
    return { location: view(c, done) };
  } finally {
    c.creating.delete(name);
  }
}

export async function remove(c: LocationsContext, id: string, ctx: CallSink = noop): Promise<ResultOf<'locations_delete'>> {
  const rec = await c.change(id, 'delete', async (r) => {
    await c.records.journalVia(committing(c, actorOf(ctx))).run(
      id,
      { op: 'delete', rec: r },
      async () => {
        await unmount(c, r);
        await c.pause('delete.unmounted');
        await removeAll(c, r);
      },
      { commit: () => [c.records.del(id)] },
    );
    await c.pause('delete.committed');
    return r;
  });
  ctx.note({ summary: `Removed location ${rec.name} and its stored credentials`, target: rec.name, metadata: { location_id: id } });
  return { location: { ...view(c, rec), mounted: false, status: 'disconnected', mount_path: null }, deleted: true };
}

/** The connections port: the share's directory, 404 unknown, 409 not mounted. */
export async function mountDir(c: LocationsContext, id: string): Promise<string> {
  const rec = typeof id === 'string' ? c.cache.get(id) : undefined;
  if (!rec) throw notFound(`location '${id}' not found`);
  if (!rec.mounted) {
    if (!rec.wanted) throw conflict(`location '${rec.name}' is not mounted: it is disconnected (reconnect it first)`);
    throw conflict(`location '${rec.name}' is not mounted${rec.last_error ? `: ${rec.last_error}` : ''}`);
  }
  // The record can lag behind the mount table (an unmount by hand, a helper killed): never hand out a bare directory.
  if (!(await c.driver.mounted(rec.mount_dir)))
    throw conflict(`location '${rec.name}' is not mounted: its mount is gone (hostd will check it and mount it again)`);
  return c.shareRoot(rec);
}

function newId(c: LocationsContext): string {
  for (;;) {
    const id = 'l_' + crypto.randomBytes(8).toString('base64url').replace(/[-_]/g, '').slice(0, 10);
    if (id.length === 12 && !c.cache.has(id)) return id;
  }
}
