/**
 * The locations domain: SMB shares connected and mounted under the data dir,
 * with their passwords in the secret store. It provides the `connections`
 * port, through which the folders domain reaches a mounted share.
 *
 * The mount route is chosen at start: the kernel's CIFS client where the
 * kernel has it, otherwise smbnetfs (FUSE). `locations.mount_route` in the
 * config file (`auto`, `cifs`, `fuse`) overrides the choice.
 */
import { opsOf } from '../../api/registry/index.js';
import { defineDomain } from '../domain.js';
import { Periodic } from '../lib/periodic.js';
import type { Availability } from '../lib/availability.js';
import { KernelCifsDriver } from './cifs/kernel.js';
import { NetworkDiscovery } from './discovery/index.js';
import type { MountDriver, MountRoute } from './driver.js';
import { SmbnetfsDriver } from './fuse/smbnetfs.js';
import { locationHandlers } from './handlers.js';
import { LocationRecords } from './records.js';
import { LocationsService, type HostStatus, type LocationsSettings } from './service.js';
import { Smbclient } from './smb/client.js';

/** Validates the `locations:` section of the config file. */
export function parseSettings(raw: unknown): LocationsSettings {
  const s = (raw ?? {}) as Record<string, unknown>;
  if (typeof s !== 'object' || Array.isArray(s)) throw new Error('locations: must be a mapping');
  const known = ['mount_route', 'check_interval_seconds', 'check_timeout_seconds', 'discovery_timeout_ms'];
  for (const k of Object.keys(s)) if (!known.includes(k)) throw new Error(`locations.${k}: unknown setting (known: ${known.join(', ')})`);
  const route = s.mount_route ?? 'auto';
  if (route !== 'auto' && route !== 'cifs' && route !== 'fuse') throw new Error(`locations.mount_route must be auto, cifs or fuse`);
  const num = (k: string, def: number, min: number, max: number): number => {
    const v = s[k] ?? def;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) throw new Error(`locations.${k} must be a number from ${min} to ${max}`);
    return v;
  };
  return {
    mountRoute: route,
    checkIntervalMs: num('check_interval_seconds', 30, 1, 86400) * 1000,
    checkTimeoutMs: num('check_timeout_seconds', 8, 1, 120) * 1000,
    discoveryTimeoutMs: num('discovery_timeout_ms', 3000, 200, 30000),
  };
}

/** Picks the route by what the host has (or what the config asks for). */
export async function chooseRoute(pref: LocationsSettings['mountRoute'], cifs: MountDriver, fuse: MountDriver): Promise<{ driver: MountDriver | null; status: Omit<HostStatus, 'runtimes'>; runtimes: Availability[] }> {
  const ca = await cifs.availability();
  const fa = await fuse.availability();
  const ok = (l: Availability[]) => l.every((a) => a.available);
  const why = (l: Availability[]) => l.filter((a) => !a.available).map((a) => `${a.name}: ${a.reason}`).join('; ');
  const runtimes = [...ca, ...fa];
  const pick = (d: MountDriver | null, route: MountRoute | null, reason: string) => ({ driver: d, status: { mount_route: route, route_reason: reason }, runtimes });
  if (pref === 'cifs') return ok(ca) ? pick(cifs, 'cifs', 'the kernel CIFS client (set by locations.mount_route)') : pick(null, null, `locations.mount_route is cifs, but ${why(ca)}`);
  if (pref === 'fuse') return ok(fa) ? pick(fuse, 'fuse', 'smbnetfs over FUSE (set by locations.mount_route)') : pick(null, null, `locations.mount_route is fuse, but ${why(fa)}`);
  if (ok(ca)) return pick(cifs, 'cifs', 'the kernel CIFS client: the kernel has cifs');
  if (ok(fa)) return pick(fuse, 'fuse', `smbnetfs over FUSE, because the kernel CIFS route is unavailable (${why(ca)})`);
  return pick(null, null, `neither route works: kernel CIFS (${why(ca)}; install cifs-utils on a kernel with cifs), FUSE (${why(fa)})`);
}

export const locationsDomain = defineDomain({
  name: 'locations',
  ops: opsOf('locations'),
  async open(deps) {
    const settings = parseSettings(deps.settings);
    const probe = new Smbclient();
    const cifs = new KernelCifsDriver();
    const fuse = new SmbnetfsDriver();
    const chosen = await chooseRoute(settings.mountRoute, cifs, fuse);
    // The route stays what start chose; the programs are asked again at most every 10 s
    // (three `--version` runs per GET /locations would cost more than the listing).
    let cached: { at: number; value: Promise<HostStatus> } | null = null;
    const hostStatus = (): Promise<HostStatus> => {
      if (!cached || Date.now() - cached.at > 10_000) {
        const value = (async () => ({ ...chosen.status, runtimes: [...(await cifs.availability()), ...(await fuse.availability()), await probe.availability()] }))();
        cached = { at: Date.now(), value };
        value.catch(() => (cached = null));
      }
      return cached.value;
    };
    deps.log.info({ mount_route: chosen.status.mount_route, reason: chosen.status.route_reason }, 'locations: mount route');
    const svc = new LocationsService({
      records: new LocationRecords(deps.store),
      secrets: deps.secrets,
      log: deps.log,
      dataDir: deps.config.dataDir,
      settings,
      driver: chosen.driver,
      hostStatus,
      probe,
      discovery: new NetworkDiscovery(),
      env: deps.env,
    });
    await svc.init();
    const monitor = new Periodic(() => svc.monitor(), (err) => deps.log.warn({ err }, 'locations: monitor failed'));
    // Mounts come back in the background: a share that is slow to answer must not hold up the start.
    void svc.restoreMounts().finally(() => monitor.start(settings.checkIntervalMs));
    return {
      handlers: locationHandlers(svc),
      info: async () => ({ name: 'locations', built: true, runtimes: (await hostStatus()).runtimes }),
      close: async () => {
        monitor.stop();
        svc.close();
      },
      provides: { connections: { mountDir: (id) => svc.mountDir(id) } },
      admin: {
        'GET /admin/locations/host-status': async () => [200, await svc.hostStatus()],
      },
    };
  },
});
