/**
 * A fake LXC driver for the service's rules that need no lxc-* program (what
 * is refused before the runtime is touched, what the service asks of it). It
 * keeps containers' states in a map and records every call that would change
 * the host; a method the fake does not model throws, so a test that reaches
 * one says so. It never replaces the runtime tests (test/runtime/lxc/).
 */
import { availableAs, missing, type Availability } from '../../daemon/lib/availability.js';
import type {
  CgroupFigures,
  ContainerTools,
  HostFacts,
  ImageFiles,
  ImageRef,
  LxcDriver,
  LxcState,
  MountStaging,
  RootfsStorage,
  StateSignal,
  StateWatch,
  ZfsOps,
} from '../../daemon/lxc/driver.js';
import { CGROUPS, IDMAP } from '../../daemon/lxc/driver.js';
import type { ContainerRecord } from '../../daemon/lxc/model.js';
import type { LxcDeps } from '../../daemon/lxc/context.js';
import { parseSettings } from '../../daemon/lxc/settings.js';
import { pino } from 'pino';
import { PROGRAMS } from '../../daemon/lxc/lxc-tools/host.js';

/** An object whose every method throws naming itself: the parts of the driver a test does not model. */
function notModelled<T extends object>(part: string, impl: Partial<T> = {}): T {
  return new Proxy(impl as T, {
    get(target, prop) {
      if (prop in target) return (target as Record<string | symbol, unknown>)[prop];
      if (prop === 'then') return undefined;
      return () => {
        throw new Error(`the fake LXC driver does not model ${part}.${String(prop)}`);
      };
    },
  });
}

export class FakeLxcDriver implements LxcDriver {
  /** Programs reported missing (by availability name), with why. */
  missing = new Map<string, string>();
  /** lxc-* state by LXC name; absent is STOPPED. */
  states = new Map<string, LxcState>();
  /** Images `images.find` knows. */
  imageRefs: ImageRef[] = [];
  /** Calls that would change the host, in order (`start svc-lxc-7`, `unfreeze svc-lxc-7`, ...). */
  calls: string[] = [];

  private readonly facts = (): HostFacts => ({
    programs: this.programs(),
    lxcVersion: '5.0.2',
    cgroups: { version: 'hybrid', controllers: ['cpu', 'memory', 'pids', 'freezer'] },
    cgroupMissing: [],
    apparmor: false,
    selinux: null,
    idmap: { ready: true, uid_range: { start: 100000, count: 65536 }, gid_range: { start: 100000, count: 65536 }, reason: null },
    idrange: { uid: 100000, gid: 100000, count: 65536 },
  });

  private programs(): Availability[] {
    return [...PROGRAMS.map((p) => p.name), CGROUPS, IDMAP].map((n) => (this.missing.has(n) ? missing(n, this.missing.get(n)!) : availableAs(n, 'fake')));
  }

  async availability(): Promise<Availability[]> {
    return this.programs();
  }
  async host(): Promise<HostFacts> {
    return this.facts();
  }
  async bridgeExists(): Promise<boolean> {
    return true;
  }

  private readonly state = (name: string): LxcState => this.states.get(name) ?? 'STOPPED';
  /** How many times the runtime was asked a container's exact state (lxc-info on a real host). */
  stateAsked = 0;

  readonly tools: ContainerTools = notModelled<ContainerTools>('tools', {
    lxcPath: '/fake/lxc',
    confDir: (name: string) => `/fake/lxc/${name}`,
    state: async (name: string) => {
      this.stateAsked++;
      return this.state(name);
    },
    info: async (name: string) => {
      this.stateAsked++;
      return { state: this.state(name), pid: null, ips: [] };
    },
    start: async (name: string) => {
      this.calls.push(`start ${name}`);
      this.states.set(name, 'RUNNING');
    },
    stop: async (name: string) => {
      this.calls.push(`stop ${name}`);
      this.states.set(name, 'STOPPED');
    },
    freeze: async (name: string) => {
      this.calls.push(`freeze ${name}`);
      this.states.set(name, 'FROZEN');
    },
    unfreeze: async (name: string) => {
      this.calls.push(`unfreeze ${name}`);
      this.states.set(name, 'RUNNING');
    },
    writeConfig: async (rec) => {
      this.calls.push(`writeConfig svc-lxc-${rec.lxcid}`);
      return true;
    },
  });

  readonly cgroups: CgroupFigures = notModelled<CgroupFigures>('cgroups', {
    fastState: (name: string) => {
      const s = this.state(name);
      return s === 'RUNNING' || s === 'FROZEN' ? s : null;
    },
    pruneGroup: () => [],
  });

  readonly mounts: MountStaging = notModelled<MountStaging>('mounts', {
    pin: async (_name, mounts) => ({
      pins: mounts.map((m) => ({ mount: m, real: m.host_path, problem: null })),
      stage: async () => {},
      release: async () => {},
    }),
    clearStale: async () => {},
  });

  readonly storage: RootfsStorage = notModelled<RootfsStorage>('storage', {
    containerPaths: (poolPath: string, lxcid: number) => ({
      dir: `${poolPath}/.hostd-lxc/containers/${lxcid}`,
      rootfs: `${poolPath}/.hostd-lxc/containers/${lxcid}/rootfs`,
      img: `${poolPath}/.hostd-lxc/containers/${lxcid}/disk.img`,
    }),
    ensureTraversable: async () => {},
  });

  readonly images: ImageFiles = notModelled<ImageFiles>('images', {
    find: async (id: string, storageId?: string | null) =>
      this.imageRefs.find((r) => r.meta.image_id === id && (!storageId || r.storage_id === storageId)) ?? null,
    list: async () => this.imageRefs,
  });

  readonly zfs: ZfsOps = notModelled<ZfsOps>('zfs');

  /** The watch's callbacks while one runs (a test sends signals through them). */
  watch: { onSignal: (s: StateSignal) => void; onResync: () => void } | null = null;

  async watchStates(onSignal: (s: StateSignal) => void, onResync: () => void): Promise<StateWatch> {
    this.watch = { onSignal, onResync };
    return { stop: async () => void (this.watch = null) };
  }
}

/** A stored container record for service tests: unprivileged, rootfs a directory in pool `p`, no network, stopped. */
export function containerRecord(lxcid: number, over: Partial<ContainerRecord> = {}): ContainerRecord {
  return {
    lxcid,
    name: `ct-${lxcid}`,
    template: 'bb',
    template_storage_id: 'p',
    storage_id: 'p',
    rootfs_kind: 'dir',
    cpu_cores: 1,
    memory_mb: 64,
    disk_size_bytes: 0,
    privileged: false,
    idmap: { uid: 100000, gid: 100000, count: 65536 },
    nesting: false,
    environment: {},
    network: { type: 'none', bridge: null, ip_address: null, gateway: null, dns_servers: [], hwaddr: '00:16:3e:00:00:01' },
    autostart: false,
    mount_points: [],
    linked_clone: false,
    rootfs_sync_pending: false,
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
    ...over,
  };
}

/** The LXC domain's dependencies for a service test: `driver` (a fake), one pool `p` at `<dir>/pool`, no folders, a silent log. */
export function fakeLxcDeps(o: Pick<LxcDeps, 'records' | 'driver' | 'tasks' | 'events'> & { dir: string }): LxcDeps {
  const pools = [{ id: 'p', path: `${o.dir}/pool` }];
  return {
    records: o.records,
    driver: o.driver,
    settings: parseSettings(undefined, { dataDir: o.dir, pools }),
    pools,
    tasks: o.tasks,
    log: pino({ level: 'silent' }),
    folders: () => [],
    dataDir: o.dir,
    env: {},
    events: o.events,
  };
}
