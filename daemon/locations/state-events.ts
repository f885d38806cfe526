/**
 * The `locations.state` events: a location's status as a client sees it
 * (`mounted`, `unavailable`, `disconnected`, then `deleted`), reported once
 * per change of what its stored record says. Every record write goes
 * through `storeChange`: the record (with whatever else its batch holds, an
 * intent's drop), and when the status changes its event and the mark of the
 * state last reported (`locations_state_events`), in one synced batch
 * (`writeWithState`). A crash leaves all of them or none: a change is never
 * stored without its event, nor reported twice.
 *
 * At start, `reportAll` compares the records with the marks once more: a
 * data dir written by a version that stored records before their events
 * may still owe one (reported then, as `admin`).
 */
import { writeWithState } from '../events/state.js';
import { internal } from '../lib/errors.js';
import type { JournalDb, JournalOp } from '../lib/journal.js';
import { SYNC } from '../store/store.js';
import { OPERATOR } from '../lib/operator.js';
import type { LocationsContext } from './context.js';
import type { LocationRecord, ReportedMark } from './records.js';

/** The key that says the marks exist (written once, at the first start that keeps them). */
const MARKS_SINCE = '#since';

export type LocationState = 'mounted' | 'unavailable' | 'disconnected';

export const stateOf = (r: LocationRecord): LocationState => (r.mounted ? 'mounted' : r.wanted ? 'unavailable' : 'disconnected');

/** What an event says of location `id` left as `rec` (undefined: gone); null when the last report says the same. */
function owed(c: LocationsContext, id: string, rec: LocationRecord | undefined): { state: string; data: Record<string, unknown> } | null {
  const before = c.published.get(id);
  if (!rec) return before === undefined ? null : { state: 'deleted', data: { name: c.names.get(id) ?? null } };
  const state = stateOf(rec);
  if (before === state) return null;
  const data: Record<string, unknown> = { name: rec.name };
  if (state === 'mounted') data.mount_route = rec.mount_route;
  if (state === 'unavailable') data.last_error = rec.last_error;
  return { state, data };
}

/**
 * Writes `ops` (the writes of one location's record, and what else its batch
 * holds) with the event of the state they leave it in, when that differs
 * from the last one reported, in one synced batch; then mirrors the record
 * in memory. Called under the location's lock (or by recovery before any
 * call is served): the comparison and the mark are made before the first
 * await, so two writes never report the same change.
 */
export async function storeChange(c: LocationsContext, ops: JournalOp[], actor: string = OPERATOR): Promise<void> {
  const mine = ops.filter((o) => o.sub === c.records.records);
  const ids = new Set(mine.map((o) => o.key));
  if (ids.size > 1) throw internal(`locations: one batch changed ${ids.size} location records`);
  const [id] = ids;
  const rec = mine.length ? (mine.at(-1)!.type === 'put' ? (mine.at(-1) as { value: LocationRecord }).value : undefined) : undefined;
  const ev = id === undefined ? null : owed(c, id, rec);
  if (id === undefined || !ev) {
    await c.records.store.batch(ops, SYNC);
    if (id !== undefined) mirror(c, id, rec);
    return;
  }
  const before = c.published.get(id);
  if (rec) c.published.set(id, ev.state);
  else c.published.delete(id);
  try {
    await writeWithState(c.events, c.records.store, [...ops, c.records.markOp(id, rec ? { state: ev.state, name: rec.name } : null)], {
      domain: 'locations',
      resource: `locations/${id}`,
      state: ev.state,
      data: ev.data,
      actor,
      summary: `location ${String(ev.data.name ?? id)} is ${ev.state}`,
    });
  } catch (err) {
    // Neither the record nor its event is stored: the mark in memory goes back to what the store says.
    if (before === undefined) c.published.delete(id);
    else c.published.set(id, before);
    throw err;
  }
  mirror(c, id, rec);
}

/** Stores the record, with its state event when its status changes (one batch), named by `actor`. */
export async function save(c: LocationsContext, rec: LocationRecord, actor: string = OPERATOR): Promise<LocationRecord> {
  await storeChange(c, [c.records.put(rec)], actor);
  return rec;
}

/** Where a journal commits a location's change: with its event (`storeChange`), named by `actor`. */
export function committing(c: LocationsContext, actor: string): JournalDb {
  return { batch: (ops) => storeChange(c, ops, actor) };
}

function mirror(c: LocationsContext, id: string, rec: LocationRecord | undefined): void {
  if (rec) {
    c.cache.set(id, rec);
    c.names.set(id, rec.name);
    return;
  }
  c.cache.delete(id);
  c.lastCheck.delete(id);
  if (!c.published.has(id)) c.names.delete(id);
}

/**
 * Reports the location's state when it differs from the last one reported
 * (what the start owes for a record a crash left without its event).
 */
async function reportState(c: LocationsContext, id: string): Promise<void> {
  const rec = c.cache.get(id);
  const ev = owed(c, id, rec);
  if (!ev) return;
  if (rec) {
    c.published.set(id, ev.state);
    c.names.set(id, rec.name);
  } else c.published.delete(id);
  const mark: ReportedMark | null = rec ? { state: ev.state, name: rec.name } : null;
  // The record is stored already; a failed event write is logged (the next start compares again).
  await writeWithState(c.events, c.records.store, [c.records.markOp(id, mark)], {
    domain: 'locations',
    resource: `locations/${id}`,
    state: ev.state,
    data: ev.data,
    actor: OPERATOR,
    summary: `location ${String(ev.data.name ?? id)} is ${ev.state}`,
  }).catch((err) => c.log.warn({ err, location_id: id, state: ev.state }, 'locations: state event not written'));
  if (!rec) c.names.delete(id);
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
