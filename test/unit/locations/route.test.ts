/**
 * The mount route as the locations driver reports it (smb/route.ts behind
 * SmbDriver): chosen from each route's availability, or pinned by
 * `locations.mount_route`; one availability entry, `mount route`, carries
 * the choice (its version is the route), so that `ensureAvailable` refuses a
 * host without one like a missing program; and the choice follows the host
 * when the programs are asked again (a package installed since the start).
 * No program runs: the two routes and smbclient are stand-ins.
 */
import { expect } from 'chai';
import { ensureAvailable, availableAs, missing, type Availability } from '../../../daemon/lib/availability.js';
import { MOUNT_ROUTE, SMB_CLIENT, routeOf, type MountRoute } from '../../../daemon/locations/driver.js';
import type { Smbclient } from '../../../daemon/locations/smb/client.js';
import { SmbDriver } from '../../../daemon/locations/smb/index.js';
import type { RouteDriver } from '../../../daemon/locations/smb/route.js';
import { rejectsApi } from '../../helpers/expect.js';

class StandInRoute implements RouteDriver {
  constructor(
    readonly route: MountRoute,
    public programs: Availability[],
  ) {}
  async availability(): Promise<Availability[]> {
    return this.programs;
  }
  async mount(): Promise<void> {}
  shareRoot(dir: string): string {
    return dir;
  }
}

describe('locations: the mount route (driver)', () => {
  const noKernel = missing('kernel cifs', 'no cifs in /proc/filesystems');
  const client = { availability: async () => availableAs('smbclient', '4.17') } as unknown as Smbclient;
  let cifs: StandInRoute;
  let fuse: StandInRoute;
  const driver = (pref: 'auto' | MountRoute) => new SmbDriver(pref, { cifs, fuse, client });

  beforeEach(() => {
    cifs = new StandInRoute('cifs', [noKernel, availableAs('mount.cifs', '7.0')]);
    fuse = new StandInRoute('fuse', [availableAs('smbnetfs', '0.6.3'), availableAs('/dev/fuse', null)]);
  });

  it('takes the kernel client where the kernel has it, smbnetfs otherwise, and says why', async () => {
    const d = driver('auto');
    const s = await d.status();
    expect(s).to.include({
      mount_route: 'fuse',
      route_reason: 'smbnetfs over FUSE, because the kernel CIFS route is unavailable (kernel cifs: no cifs in /proc/filesystems)',
    });
    expect(s.runtimes.map((a) => a.name)).to.deep.equal(['kernel cifs', 'mount.cifs', 'smbnetfs', '/dev/fuse', 'smbclient', 'mount route']);
    expect(routeOf(await ensureAvailable(d, [MOUNT_ROUTE, SMB_CLIENT]))).to.equal('fuse');

    // The kernel gains cifs: the next fresh probe takes the kernel route, without a restart.
    cifs.programs = [availableAs('kernel cifs', '6.1'), availableAs('mount.cifs', '7.0')];
    expect(await d.status()).to.include({ mount_route: 'fuse' }); // still the cached probe
    expect(await d.status({ fresh: true })).to.include({ mount_route: 'cifs', route_reason: 'the kernel CIFS client: the kernel has cifs' });
  });

  it('without a route, the mount route entry is missing with why, and ensureAvailable refuses with 503', async () => {
    fuse.programs = [missing('smbnetfs', 'smbnetfs is not installed (install the smbnetfs and fuse3 packages)'), availableAs('/dev/fuse', null)];
    const d = driver('auto');
    const why =
      'neither route works: kernel CIFS (kernel cifs: no cifs in /proc/filesystems; install cifs-utils on a kernel with cifs), FUSE (smbnetfs: smbnetfs is not installed (install the smbnetfs and fuse3 packages))';
    expect((await d.availability()).find((a) => a.name === MOUNT_ROUTE)).to.deep.equal({ name: MOUNT_ROUTE, version: null, available: false, reason: why });
    await rejectsApi(ensureAvailable(d, [MOUNT_ROUTE, SMB_CLIENT]), 503, `mount route is not available: ${why}`);
    // A share listing needs smbclient alone.
    await ensureAvailable(d, [SMB_CLIENT]);
  });

  it('a route pinned by locations.mount_route is taken only when it works', async () => {
    expect(await driver('fuse').status()).to.include({ mount_route: 'fuse', route_reason: 'smbnetfs over FUSE (set by locations.mount_route)' });
    expect(await driver('cifs').status()).to.include({
      mount_route: null,
      route_reason: 'locations.mount_route is cifs, but kernel cifs: no cifs in /proc/filesystems',
    });
  });
});
