/**
 * What the locations service needs from the host, in the domain's own types;
 * `smb/` implements it. Three concerns:
 * - mounts: one of two routes, chosen by what the host has: the kernel's
 *   CIFS client (`mount -t cifs`, cifs-utils) where the kernel has it, else
 *   smbnetfs, a FUSE SMB client;
 * - the SMB client (smbclient): the probe before a mount, a host's shares;
 * - discovery of SMB hosts on the local network.
 *
 * Availability is one list: every program above, plus the entry named
 * `MOUNT_ROUTE`, available when a route works, whose version is that route.
 * The service asks `ensureAvailable(driver, [MOUNT_ROUTE, SMB_CLIENT])`
 * before it mounts, so that no route is a 503 saying why, like a missing
 * program.
 */
import type { Availability, RuntimeDriver } from '../lib/availability.js';

export type MountRoute = 'cifs' | 'fuse';

/** The availability entry of the route new mounts take (its version is the route). */
export const MOUNT_ROUTE = 'mount route';
/** The availability entry of the SMB client. */
export const SMB_CLIENT = 'smbclient';

/** The route of an availability list that `ensureAvailable` accepted for MOUNT_ROUTE. */
export function routeOf(list: readonly Availability[]): MountRoute | null {
  const entry = list.find((a) => a.name === MOUNT_ROUTE);
  return entry?.available && (entry.version === 'cifs' || entry.version === 'fuse') ? entry.version : null;
}

/** A share's address. */
export interface Remote {
  host: string;
  share: string;
}

export interface Credentials {
  /** The user name without its domain. */
  user: string;
  /** Workgroup or domain (`DOMAIN\user`, `DOMAIN/user` or `user@DOMAIN` given), or null. */
  domain: string | null;
  password: string;
}

/** Guest access is `null` credentials. */
export type MaybeCredentials = Credentials | null;

/** The route new mounts take on this host, or null with why none works. */
export interface RouteStatus {
  mount_route: MountRoute | null;
  /** Why that route (or why none). */
  route_reason: string;
  /** Every program the driver uses, and MOUNT_ROUTE. */
  runtimes: Availability[];
}

export interface ShareEntry {
  name: string;
  type: 'disk' | 'printer' | 'ipc' | 'other';
  comment: string;
}

export type DiscoveryMethod = 'netbios' | 'mdns' | 'wsd';

export interface DiscoveredHost {
  /** Its NetBIOS server name, else its mDNS instance or host name, else null. */
  name: string | null;
  addresses: string[];
  workgroup: string | null;
  /** Whether it said it is a file server (NetBIOS <20> name, mDNS _smb._tcp, or a WS-Discovery device). */
  file_server: boolean;
  via: DiscoveryMethod[];
}

export interface DiscoveryResult {
  hosts: DiscoveredHost[];
  /** What each method did, e.g. `sent on eth0 (192.168.1.255)`, or why it could not run. */
  methods: Record<DiscoveryMethod, string>;
}

export interface ProbeOptions {
  /** The host's address, when its name does not resolve. */
  ip?: string;
  signal?: AbortSignal;
}

export interface LocationsDriver extends RuntimeDriver {
  // ----- route ------------------------------------------------------------

  /** The route new mounts take and why, with the availability list it was chosen from. */
  status(opts?: { fresh?: boolean }): Promise<RouteStatus>;

  // ----- mounts -----------------------------------------------------------
  // `dir` is a location's mount directory: empty, 0700, in the data dir.

  /**
   * Mounts `remote` on `dir` through `route`. `work` is a private 0700
   * directory the route may use for its helper's files; credentials never
   * stay on disk after the call.
   */
  mount(route: MountRoute, remote: Remote, creds: MaybeCredentials, dir: string, work: string): Promise<void>;
  /** The share's root directory inside a mount of `route` on `dir`. */
  shareRoot(route: MountRoute, dir: string, remote: Remote): string;
  /** Whether anything is mounted on `dir` now. */
  mounted(dir: string): Promise<boolean>;
  /**
   * Null when the mount on `dir` works: it is in the mount table, its helper
   * (FUSE) is alive, and the share's root can be read within `timeoutMs`.
   * Otherwise what is wrong, in words.
   */
  health(route: MountRoute | null, dir: string, remote: Remote, timeoutMs: number): Promise<string | null>;
  /** Unmounts whatever serves `dir` (either route) and ends its helper; nothing mounted is fine. */
  release(dir: string): Promise<void>;
  /** Removes the credential files and config channels a crash may have left in a work directory. */
  wipeTransient(work: string): Promise<void>;

  // ----- SMB client -------------------------------------------------------

  /** Logs in and connects to the share; throws the error that says what failed (400, 404, 502). */
  check(remote: Remote, creds: MaybeCredentials, opts?: ProbeOptions): Promise<void>;
  /** The shares of one host (disk shares first, then the rest, by name). */
  shares(host: string, creds: MaybeCredentials, opts?: ProbeOptions): Promise<ShareEntry[]>;

  // ----- discovery --------------------------------------------------------

  /** SMB hosts that answer on the local network within `timeoutMs`. */
  discover(timeoutMs: number): Promise<DiscoveryResult>;
}
