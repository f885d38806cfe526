/**
 * The `locations.state` events: a location's status as a client sees it
 * (`mounted`, `unavailable`, `disconnected`, then `deleted`), reported once
 * per change of what its stored record says. Every path that stores a
 * change ends here: a user's call, the monitor noticing a share that went
 * stale or came back, and the start (what changed while the daemon was down).
 */
import { OPERATOR } from '../lib/operator.js';
import type { LocationsContext } from './context.js';
import type { LocationRecord } from './records.js';

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

/** Marks what the stored records say as reported: the baseline a start compares with. */
export function baseline(c: LocationsContext): void {
  for (const r of c.cache.values()) {
    c.published.set(r.location_id, stateOf(r));
    c.names.set(r.location_id, r.name);
  }
}

async function publish(c: LocationsContext, id: string, state: string, data: Record<string, unknown>, actor: string): Promise<void> {
  // The change itself is stored; a failed event write is logged, never turned into a failed call.
  await c.events
    .publishState('locations', `locations/${id}`, state, data, { actor, summary: `location ${String(data.name ?? id)} is ${state}` })
    .catch((err) => c.log.warn({ err, location_id: id, state }, 'locations: state event not written'));
}
