/**
 * A location and the host status as the API answers them (their schemas are
 * the registry's: api/registry/locations.ts).
 */
import type { ResultOf } from '../../api/registry/index.js';
import { refusal, remoteText, userText } from './addresses.js';
import type { LocationsContext } from './context.js';
import type { LocationRecord } from './records.js';

export type LocationView = ResultOf<'locations_get'>['location'];
export type HostStatus = ResultOf<'locations_list'>['host'];

export function view(c: LocationsContext, r: LocationRecord): LocationView {
  return {
    location_id: r.location_id,
    name: r.name,
    type: r.type,
    remote: remoteText(r),
    host: r.host,
    share: r.share,
    username: userText(r.user === null ? null : { user: r.user, domain: r.domain }),
    guest: r.user === null,
    status: r.mounted ? 'mounted' : r.wanted ? 'unavailable' : 'disconnected',
    mounted: r.mounted,
    mount_route: r.mount_route,
    mount_path: r.mounted ? c.shareRoot(r) : null,
    last_error: r.last_error,
    last_error_at: r.last_error_at,
    mounted_at: r.mounted_at,
    created_at: r.created_at,
  };
}

/** The route new mounts take, the programs behind it, and the locations refused since an upgrade. */
export async function hostStatus(c: LocationsContext): Promise<HostStatus> {
  const { mount_route, route_reason, runtimes } = await c.driver.status();
  return { mount_route, route_reason, runtimes, refused: refusedList(c) };
}

const byName = <T extends { name: string }>(a: T, b: T) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** Locations whose stored address breaks a rule added since they were created (they stay, unmounted). */
function refusedList(c: LocationsContext): HostStatus['refused'] {
  const out: HostStatus['refused'] = [];
  for (const r of c.cache.values()) {
    const reason = refusal(r);
    if (reason) out.push({ location_id: r.location_id, name: r.name, reason });
  }
  return out.sort(byName);
}

/** Every location, by name. */
export function allByName(c: LocationsContext): LocationView[] {
  return [...c.cache.values()].sort(byName).map((r) => view(c, r));
}

/** The mountStates port (metrics): each location's status, nothing else of it. */
export function statuses(c: LocationsContext): string[] {
  return [...c.cache.values()].map((r) => view(c, r).status);
}
