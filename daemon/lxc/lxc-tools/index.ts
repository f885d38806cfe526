/**
 * The LXC driver on the real programs (lxc-tools: the folder drives the lxc-*
 * programs, hence its name): the lxc-* tools (tools.ts, config.ts), cgroup
 * files (cgroups.ts), mount points pinned by descriptor (mounts.ts), rootfs
 * storage with tar, e2fsprogs and loop mounts (storage.ts), image files and
 * the image server (images.ts, simplestreams.ts), ZFS (zfs.ts), and what the
 * host has (host.ts), probed into one short cache.
 */
import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { PoolConfig } from '../../config.js';
import { ProbeCache } from '../../lib/availability.js';
import { which } from '../../lib/run.js';
import type { HostFacts, LxcDriver } from '../driver.js';
import { LXC_NAME_PREFIX } from '../naming.js';
import type { LxcSettings } from '../settings.js';
import { CgroupReader, readCgroupLayout } from './cgroups.js';
import { availabilityOf, bridgeExists, probeHost } from './host.js';
import { ImageStore } from './images.js';
import { LxcMonitor } from './monitor.js';
import { MountPins } from './mounts.js';
import { Storage } from './storage.js';
import { LxcTools } from './tools.js';
import { Zfs } from './zfs.js';

/** The cgroup group of one lxcpath: containers of two hostd instances never share a cgroup. */
export function cgroupGroup(lxcPath: string): string {
  return `hostd-${crypto.createHash('sha256').update(lxcPath).digest('hex').slice(0, 10)}`;
}

/** How old the host facts may grow before a call starts a probe in the background. */
export const HOST_FACTS_REFRESH_MS = 60_000;

/**
 * The host facts for calls: once probed, every call gets the facts at hand
 * at once, and one older than HOST_FACTS_REFRESH_MS starts a probe in the
 * background for the calls after it. A call never waits for a probe (which
 * looks up every program and runs two of them: tens of milliseconds, and
 * every start, stop and exec asks for the facts), except the first one, and
 * one that asks `fresh` (host-status, and `ensureAvailable` before it
 * answers 503 for a program the facts say is missing).
 */
export function hostFacts(probe: ProbeCache<HostFacts>, now: () => number = Date.now): (opts?: { fresh?: boolean }) => Promise<HostFacts> {
  let kept: { at: number; value: HostFacts } | null = null;
  let refreshing = false;
  const fresh = async () => {
    const at = now();
    const value = await probe.get({ fresh: true });
    if (!kept || kept.at <= at) kept = { at, value };
    return value;
  };
  return async (opts) => {
    if (opts?.fresh || !kept) return fresh();
    if (now() - kept.at >= HOST_FACTS_REFRESH_MS && !refreshing) {
      refreshing = true;
      // A failed probe keeps the facts there were; the next call tries again.
      void fresh()
        .catch(() => undefined)
        .finally(() => {
          refreshing = false;
        });
    }
    return kept.value;
  };
}

export function createLxcDriver(settings: LxcSettings, pools: PoolConfig[], log: Logger): LxcDriver {
  const group = cgroupGroup(settings.lxcPath);
  const cgroups = new CgroupReader(readCgroupLayout(), (name) => `${group}/ct-${name.replace(/^svc-lxc-/, '')}`, group);
  const host = hostFacts(new ProbeCache(() => probeHost(settings.idmap)));
  const storage = new Storage(log);
  const remove = (p: string) => storage.remove(p);
  const tools = new LxcTools(settings.lxcPath, {
    cgroups,
    host,
    remove,
    cgroupDirs: (lxcid) => ({ container: `${group}/ct-${lxcid}`, monitor: `${group}/mon-${lxcid}` }),
  });
  return {
    availability: async (opts) => availabilityOf(await host(opts)),
    host,
    bridgeExists,
    tools,
    cgroups,
    mounts: new MountPins((name) => tools.confDir(name), settings.lxcPath),
    storage,
    images: new ImageStore(pools, remove),
    zfs: new Zfs(),
    watchStates: async (onSignal, onResync) => {
      const m = new LxcMonitor(settings.lxcPath, `${LXC_NAME_PREFIX}[0-9]+`, onSignal, onResync, log, await which('setpriv'));
      m.start();
      return m;
    },
  };
}
