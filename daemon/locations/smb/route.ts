/**
 * The two ways to mount a share, and which one new mounts take: the kernel's
 * CIFS client where the kernel has it, otherwise smbnetfs over FUSE, unless
 * the config (`locations.mount_route`) pins one. Chosen from the programs'
 * availability, so a route that becomes usable (a package installed) is
 * taken without a restart.
 */
import { availableAs, missing, type Availability } from '../../lib/availability.js';
import { MOUNT_ROUTE, type MaybeCredentials, type MountRoute, type Remote } from '../driver.js';

/** One route: the kernel client (cifs.ts) or smbnetfs (smbnetfs.ts). */
export interface RouteDriver {
  readonly route: MountRoute;
  /** The programs (and kernel support) this route needs, as they are now. */
  availability(): Promise<Availability[]>;
  /** Mounts `remote` on the empty directory `dir`; `work` is a private 0700 directory for the helper's files. */
  mount(remote: Remote, creds: MaybeCredentials, dir: string, work: string): Promise<void>;
  /** The share's root directory inside a mount on `dir`. */
  shareRoot(dir: string, remote: Remote): string;
}

export type RoutePreference = 'auto' | MountRoute;

export interface RouteChoice {
  route: MountRoute | null;
  reason: string;
}

/** The route new mounts take, from each route's availability (or what the config asks for). */
export function chooseRoute(pref: RoutePreference, cifs: Availability[], fuse: Availability[]): RouteChoice {
  const ok = (l: Availability[]) => l.every((a) => a.available);
  const why = (l: Availability[]) =>
    l
      .filter((a) => !a.available)
      .map((a) => `${a.name}: ${a.reason}`)
      .join('; ');
  if (pref === 'cifs')
    return ok(cifs)
      ? { route: 'cifs', reason: 'the kernel CIFS client (set by locations.mount_route)' }
      : { route: null, reason: `locations.mount_route is cifs, but ${why(cifs)}` };
  if (pref === 'fuse')
    return ok(fuse)
      ? { route: 'fuse', reason: 'smbnetfs over FUSE (set by locations.mount_route)' }
      : { route: null, reason: `locations.mount_route is fuse, but ${why(fuse)}` };
  if (ok(cifs)) return { route: 'cifs', reason: 'the kernel CIFS client: the kernel has cifs' };
  if (ok(fuse)) return { route: 'fuse', reason: `smbnetfs over FUSE, because the kernel CIFS route is unavailable (${why(cifs)})` };
  return { route: null, reason: `neither route works: kernel CIFS (${why(cifs)}; install cifs-utils on a kernel with cifs), FUSE (${why(fuse)})` };
}

/** The MOUNT_ROUTE availability entry of a choice: available with the route as its version, or missing with why. */
export function routeEntry(choice: RouteChoice): Availability {
  return choice.route ? availableAs(MOUNT_ROUTE, choice.route) : missing(MOUNT_ROUTE, choice.reason);
}
