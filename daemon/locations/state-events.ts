/**
 * The `locations.state` events: a location's status as a client sees it
 * (`mounted`, `unavailable`, `disconnected`, then `deleted`), reported once
 * per change of what its stored record says. Every path that stores a
 * change ends here: a user's call, the monitor noticing a share that went
 * stale or came back, and the start (what changed while the daemon was down).
 *
 * The state last reported is stored per location (`locations_state_events`)
 * in the event's own batch (`writeWithState`): a crash after a record
 * changed and before its event leaves the old mark, so the next start
 * reports the change once (`reportAll`); a crash never leaves an event
 * without its mark, so nothing is reported twice.
 */
import { writeWithState } from '../events/state.js';
import { OPERATOR } from '../lib/operator.js';
import type { LocationsContext } from './context.js';
import type { LocationRecord, ReportedMark } from './records.js';

/** The key that says the marks exist (written once, at the first start that keeps them). */
const MARKS_SINCE = '#since';

export type LocationState = 'mounted' | 'unavailable' | 'disconnected';

export const stateOf = (r: LocationRecord): LocationState => (r.mounted ? 'mounted' : r.wanted ? 'unavailable' : 'disconnected');

/**
 * Publishes the location's state when it differs from the last one
 * reported. Called under the location's lock after the record is stored, so
 * what is published is what the store says; the comparison and the mark are
 * made before the first await, so two reports never publish the same change.
 */
export async function reportState(c: LocationsContext, id: string, actor: string = OPERATOR): Promise<void> {
  const rec = c.cache.get(id);
  const before = c.published.get(id);
  if (!rec) {
    if (before === undefined) return;
    c.published.delete(id);
    await publish(c, id, 'deleted', { name: c.names.get(id) ?? null }, actor);
    c.names.delete(id);
    return;
  }
  const state = stateOf(rec);
  c.names.set(id, rec.name);
  if (before === state) return;
  c.published.set(id, state);
  const data: Record<string, unknown> = { name: rec.name };
  if (state === 'mounted') data.mount_route = rec.mount_route;
  if (state === 'unavailable') data.last_error = rec.last_error;
  await publish(c, id, state, data, actor);
}

/** Every location whose state differs from the one last reported (the start: records as loaded against the runtime). */
export async function reportAll(c: LocationsContext): Promise<void> {
  const ids = new Set([...c.published.keys(), ...c.cache.keys()]);
  for (const id of ids) await reportState(c, id);
}

/**
 * Loads the marks of what was last reported: the baseline a start compares
 * with. A store from before the marks were kept takes what its records say
 * as reported (written once, with `MARKS_SINCE`): nothing is reported for it.
 */
export async function baseline(c: LocationsContext): Promise<void> {
  const sub = c.records.reported;
  if ((await sub.get(MARKS_SINCE)) === undefined) {
    const ops = [...c.cache.values()].map((r) => c.records.markOp(r.location_id, { state: stateOf(r), name: r.name }));
    await c.records.store.batch([...ops, { type: 'put', sub, key: MARKS_SINCE, value: true }]);
  }
  for (const [id, m] of await sub.iterator().all()) {
    if (id === MARKS_SINCE || m === true) continue;
    c.published.set(id, m.state);
    c.names.set(id, m.name);
  }
}

async function publish(c: LocationsContext, id: string, state: string, data: Record<string, unknown>, actor: string): Promise<void> {
  const mark: ReportedMark | null = state === 'deleted' ? null : { state, name: String(data.name) };
  // The change itself is stored; a failed event write is logged, never turned into a failed call.
  await writeWithState(c.events, c.records.store, [c.records.markOp(id, mark)], {
    domain: 'locations',
    resource: `locations/${id}`,
    state,
    data,
    actor,
    summary: `location ${String(data.name ?? id)} is ${state}`,
  }).catch((err) => c.log.warn({ err, location_id: id, state }, 'locations: state event not written'));
}
