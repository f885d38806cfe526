/**
 * A locations driver that mounts nothing: it keeps a set of "mounted"
 * directories and can be told to fail, so that the service's rules
 * (recovery, the 503s, locks) are tested without root or smbd. The runtime
 * tests (test/runtime/locations/) drive the real one.
 */
import { availableAs, missing, type Availability } from '../../daemon/lib/availability.js';
import {
  MOUNT_ROUTE,
  SMB_CLIENT,
  type DiscoveryResult,
  type LocationsDriver,
  type MaybeCredentials,
  type MountRoute,
  type Remote,
  type RouteStatus,
  type ShareEntry,
} from '../../daemon/locations/driver.js';

export class FakeLocationsDriver implements LocationsDriver {
  /** Directories something is mounted on. */
  readonly mounts = new Set<string>();
  /** What the driver was asked to do, in order (`mount <dir>`, `release <dir>`). */
  readonly calls: string[] = [];
  /** The route new mounts take; null: none works. */
  route: MountRoute | null = 'fuse';
  /** Directories whose `release` throws the message given (an unmount that fails: a busy mount). */
  readonly releaseFails = new Map<string, string>();

  async availability(): Promise<Availability[]> {
    return (await this.status()).runtimes;
  }

  async status(): Promise<RouteStatus> {
    const reason = this.route ? `${this.route} (fake)` : 'neither route works (fake)';
    return {
      mount_route: this.route,
      route_reason: reason,
      runtimes: [availableAs(SMB_CLIENT, 'fake'), this.route ? availableAs(MOUNT_ROUTE, this.route) : missing(MOUNT_ROUTE, reason)],
    };
  }

  async mount(_route: MountRoute, _remote: Remote, _creds: MaybeCredentials, dir: string): Promise<void> {
    this.calls.push(`mount ${dir}`);
    this.mounts.add(dir);
  }

  shareRoot(_route: MountRoute, dir: string): string {
    return dir;
  }

  async mounted(dir: string): Promise<boolean> {
    return this.mounts.has(dir);
  }

  async health(_route: MountRoute | null, dir: string): Promise<string | null> {
    return this.mounts.has(dir) ? null : 'the mount is gone';
  }

  async release(dir: string): Promise<void> {
    this.calls.push(`release ${dir}`);
    const fails = this.releaseFails.get(dir);
    if (fails) throw new Error(fails);
    this.mounts.delete(dir);
  }

  async wipeTransient(): Promise<void> {}

  async check(): Promise<void> {}

  async shares(): Promise<ShareEntry[]> {
    return [];
  }

  async discover(): Promise<DiscoveryResult> {
    return { hosts: [], methods: { netbios: 'fake', mdns: 'fake', wsd: 'fake' } };
  }
}
