/**
 * The locations driver on this host: the two mount routes (cifs.ts,
 * smbnetfs.ts) behind the route choice (route.ts), the mount table and the
 * helpers' processes (mounts.ts), smbclient (client.ts) and host discovery
 * (discovery/).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { errnoCode } from '../../lib/errors.js';
import { ProbeCache, type Availability } from '../../lib/availability.js';
import type { DiscoveryResult, LocationsDriver, MaybeCredentials, MountRoute, ProbeOptions, Remote, RouteStatus, ShareEntry } from '../driver.js';
import { KernelCifsRoute } from './cifs.js';
import { Smbclient } from './client.js';
import { NetworkDiscovery } from './discovery/index.js';
import { alive, findProcesses, mountAt, releaseMount } from './mounts.js';
import { chooseRoute, routeEntry, type RouteDriver, type RoutePreference } from './route.js';
import { SmbnetfsRoute } from './smbnetfs.js';

/**
 * How long a probe of the programs is kept: a `GET /locations` shows them,
 * and three `--version` runs per listing would cost more than the listing.
 */
const PROBE_TTL_MS = 10_000;

export class SmbDriver implements LocationsDriver {
  private readonly routes: Record<MountRoute, RouteDriver>;
  private readonly client: Smbclient;
  private readonly network: NetworkDiscovery;
  private readonly probe = new ProbeCache(() => this.probeHost(), PROBE_TTL_MS);

  constructor(
    private readonly pref: RoutePreference,
    parts: { cifs?: RouteDriver; fuse?: RouteDriver; client?: Smbclient; network?: NetworkDiscovery } = {},
  ) {
    this.routes = { cifs: parts.cifs ?? new KernelCifsRoute(), fuse: parts.fuse ?? new SmbnetfsRoute() };
    this.client = parts.client ?? new Smbclient();
    this.network = parts.network ?? new NetworkDiscovery();
  }

  // ----- availability and route ---------------------------------------------

  async availability(opts?: { fresh?: boolean }): Promise<Availability[]> {
    return (await this.probe.get(opts)).runtimes;
  }

  status(opts?: { fresh?: boolean }): Promise<RouteStatus> {
    return this.probe.get(opts);
  }

  private async probeHost(): Promise<RouteStatus> {
    const [cifs, fuse, client] = await Promise.all([this.routes.cifs.availability(), this.routes.fuse.availability(), this.client.availability()]);
    const choice = chooseRoute(this.pref, cifs, fuse);
    return { mount_route: choice.route, route_reason: choice.reason, runtimes: [...cifs, ...fuse, client, routeEntry(choice)] };
  }

  // ----- mounts -------------------------------------------------------------

  mount(route: MountRoute, remote: Remote, creds: MaybeCredentials, dir: string, work: string): Promise<void> {
    return this.routes[route].mount(remote, creds, dir, work);
  }

  shareRoot(route: MountRoute, dir: string, remote: Remote): string {
    return this.routes[route].shareRoot(dir, remote);
  }

  async mounted(dir: string): Promise<boolean> {
    return (await mountAt(dir)) !== null;
  }

  async health(route: MountRoute | null, dir: string, remote: Remote, timeoutMs: number): Promise<string | null> {
    if (!(await mountAt(dir))) return 'the mount is gone';
    if (route === 'fuse') {
      const pid = (await findProcesses('smbnetfs', dir))[0];
      if (pid === undefined || !(await alive(pid))) return 'the smbnetfs process serving the mount has exited';
    }
    const root = route ? this.shareRoot(route, dir, remote) : dir;
    let timer: NodeJS.Timeout | undefined;
    // A server that went away can leave the read hanging: the check answers at the bound regardless.
    const timeout = new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve(`the share did not answer within ${timeoutMs} ms`), timeoutMs);
    });
    const read = (async () => {
      try {
        const d = await fs.opendir(root);
        await d.read();
        await d.close();
        return null;
      } catch (err) {
        return `the share cannot be read through the mount (${errnoCode(err) ?? (err as Error).message})`;
      }
    })();
    try {
      return await Promise.race([read, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  release(dir: string): Promise<void> {
    return releaseMount(dir);
  }

  async wipeTransient(work: string): Promise<void> {
    // The kernel route's credentials files and smbnetfs's config FIFOs (cifs.ts, smbnetfs.ts).
    for (const f of await fs.readdir(work).catch(() => [] as string[])) {
      if (/^(config|credentials)-/.test(f)) await fs.rm(path.join(work, f), { force: true });
    }
  }

  // ----- SMB client ---------------------------------------------------------

  check(remote: Remote, creds: MaybeCredentials, opts?: ProbeOptions): Promise<void> {
    return this.client.check(remote, creds, opts);
  }

  shares(host: string, creds: MaybeCredentials, opts?: ProbeOptions): Promise<ShareEntry[]> {
    return this.client.shares(host, creds, opts);
  }

  // ----- discovery ----------------------------------------------------------

  discover(timeoutMs: number): Promise<DiscoveryResult> {
    return this.network.hosts(timeoutMs);
  }
}
