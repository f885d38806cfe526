/**
 * The LXC domain's rules: records and their states, the spec's arguments and
 * 409s, locks, tasks, crash safety and activity notes. It talks to the runtime
 * only through driver.ts. Shapes and decisions are in docs/lxc.md.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { PoolConfig } from '../config.js';
import type { FolderRef } from '../domain.js';
import type { NoteSink } from '../lib/caller.js';
import { ApiError, badRequest, conflict, errnoCode, notFound, unavailable } from '../lib/errors.js';
import type { JournalOp } from '../lib/journal.js';
import { KeyedLock } from '../lib/lock.js';
import { nextDocs } from '../lib/docs.js';
import { run } from '../lib/run.js';
import type { TaskHandle, TaskRecord, Tasks } from '../lib/tasks.js';
import type { ArgsOf, OperationName } from '../../api/registry/index.js';
import type { Compression, HostProbe, ImageMeta, ImageRef, LxcDriver, LxcState } from './driver.js';
import { ctKey, type ContainerRecord, type Intent, type LxcRecords, type MountPoint, type NetworkSettings } from './records.js';
import type { IdRange, LxcSettings } from './settings.js';
import {
  checkBridge, checkCidr, checkDns, checkEnvironment, checkGateway, checkImageId, checkName, imageIdFromName, randomHwaddr,
} from './validate.js';
import { hostnameOf, renderConfig, CPU_PERIOD_US } from './lxc/config.js';
import { hostsFile, interfacesFile, MANAGED_MARK, networkdFile, resolvConf } from './lxc/guestfiles.js';
import { catalogEntries, fileUrl, productPaths, streamArch, StreamFormatError, type CatalogEntry } from './lxc/simplestreams.js';
import { compressionOf, containerDir, poolRoot, readHead, tmpRoot, ZFS_MAGIC } from './lxc/storage.js';
import { checkNewMounts, mountPolicy, privilegedRefused, violations, type Violation } from './containment.js';

export const LXC_NAME_PREFIX = 'svc-lxc-';
export const lxcNameOf = (lxcid: number): string => `${LXC_NAME_PREFIX}${lxcid}`;
/** Smallest disk limit: ext4's own metadata needs a few MiB, and a rootfs more. */
export const MIN_DISK_BYTES = 32 * 1024 * 1024;
const SEED_PATH = 'etc/svc/seed';
const NO_SERVER = 'no image server is configured (set lxc.image_server to a simplestreams URL)';

export type StateName = 'running' | 'stopped' | 'frozen' | 'starting' | 'stopping' | 'aborting';

export interface ContainerView {
  lxcid: number;
  name: string;
  state: StateName;
  lxc_name: string;
  hostname: string;
  template: string;
  template_storage_id: string;
  storage_id: string;
  rootfs: { kind: string; path: string };
  cpu_cores: number;
  memory_mb: number;
  disk_size_bytes: number;
  privileged: boolean;
  idmap: IdRange | null;
  nesting: boolean;
  environment: Record<string, string>;
  network: { type: string; bridge: string | null; bridge_is_default: boolean; ip_address: string | null; gateway: string | null; dns_servers: string[]; hwaddr: string };
  autostart: boolean;
  mount_points: MountPoint[];
  linked_clone: boolean;
  /** Settings that take effect at the next start (network, name, nesting) are waiting for it. */
  pending_restart: boolean;
  created_at: string;
  updated_at: string;
}

export interface ImageView {
  image_id: string;
  storage_id: string;
  source: string;
  size_bytes: number;
  sha256: string;
  compression: string;
  created_at: string;
  os: string | null;
  release: string | null;
  arch: string | null;
  variant: string | null;
  version: string | null;
  from_lxcid: number | null;
  /** Linked clones that depend on it (it cannot be deleted or moved while they exist). */
  used_by: number[];
}

export interface ServiceDeps {
  records: LxcRecords;
  driver: LxcDriver;
  settings: LxcSettings;
  pools: PoolConfig[];
  tasks: Tasks;
  log: Logger;
  /** Managed folders (for mount point roots); empty when no folders domain runs. */
  folders: () => FolderRef[];
  /** hostd's data dir: never mounted into a container (it holds the store, secrets, certificates). */
  dataDir: string;
  env: NodeJS.ProcessEnv;
}

type Req<N extends OperationName> = ArgsOf<N>;

const stateName = (s: LxcState): StateName => {
  switch (s) {
    case 'RUNNING':
    case 'THAWED':
      return 'running';
    case 'FROZEN':
    case 'FREEZING':
      return 'frozen';
    case 'STARTING':
      return 'starting';
    case 'STOPPING':
      return 'stopping';
    case 'ABORTING':
      return 'aborting';
    default:
      return 'stopped';
  }
};

const now = () => new Date().toISOString();

function rootfsPaths(poolPath: string, lxcid: number) {
  const dir = containerDir(poolPath, lxcid);
  return { dir, rootfs: path.join(dir, 'rootfs'), img: path.join(dir, 'disk.img') };
}

export class LxcService {
  private readonly locks = new KeyedLock();
  /** lxcids reserved by creates and clones in progress. */
  private readonly reserved = new Set<number>();
  /** Image keys read by creates in progress (a delete or move then gets 409). */
  private readonly imageReaders = new Map<string, number>();
  private probeCache: { at: number; value: HostProbe } | null = null;
  private catalogCache: { at: number; server: string; entries: CatalogEntry[] } | null = null;
  private background: Promise<unknown> = Promise.resolve();

  constructor(private readonly d: ServiceDeps) {}

  // ------------------------------------------------------------ host facts

  /**
   * What the host has. Probed at open and by host-status; a call that finds a
   * program missing probes again before refusing (so installing it needs no
   * restart), and nothing on a hot path pays for a probe.
   */
  async probe(fresh = false): Promise<HostProbe> {
    if (!fresh && this.probeCache) return this.probeCache.value;
    const value = await this.d.driver.probe();
    this.probeCache = { at: Date.now(), value };
    return value;
  }

  /** 503 naming the first missing program among `names` (probing again before refusing). */
  private async require(names: string[]): Promise<HostProbe> {
    let p = await this.probe();
    const gone = () => p.programs.find((a) => names.includes(a.name) && !a.available);
    if (gone()) p = await this.probe(true);
    const g = gone();
    if (g) throw unavailable(`${g.name} is not available: ${g.reason}`);
    if (p.cgroupMissing.length && names.includes('lxc-start')) {
      throw unavailable(`the cgroup controllers ${p.cgroupMissing.join(', ')} are not mounted (LXC needs them for limits, freeze and stats)`);
    }
    return p;
  }

  private static readonly LIFECYCLE = ['lxc-start', 'lxc-stop', 'lxc-info', 'lxc-attach', 'lxc-freeze', 'lxc-unfreeze', 'lxc-cgroup'];
  private static readonly BUILD = ['tar', 'bash', 'lxc-usernsexec', 'newuidmap', 'newgidmap', 'setfacl'];
  private static readonly DISK = ['mkfs.ext4', 'e2fsck', 'resize2fs', 'dumpe2fs'];

  private async idrange(privileged: boolean): Promise<IdRange | null> {
    if (privileged) return null;
    const p = await this.probe();
    if (!p.idrange) throw unavailable(`unprivileged containers are not available: ${p.idmap.reason}`);
    return p.idrange;
  }

  async hostStatus() {
    const p = await this.probe(true);
    const lxc = p.programs.find((a) => a.name === 'lxc-start')!;
    const missing: string[] = [];
    for (const a of p.programs) if (!a.available && a.name !== 'zfs' && a.name !== 'zstd') missing.push(`${a.name}: ${a.reason}`);
    for (const c of p.cgroupMissing) missing.push(`cgroup controller ${c} is not mounted`);
    if (!p.idmap.ready) missing.push(`idmap: ${p.idmap.reason}`);
    const bridge = this.d.settings.defaultBridge;
    if (bridge && !(await bridgeExists(bridge))) missing.push(`default bridge ${bridge} does not exist (lxc.default_bridge)`);
    const zfsPools: string[] = [];
    for (const pool of this.d.pools) if ((await this.d.driver.storage.fsType(pool.path)) === ZFS_MAGIC) zfsPools.push(pool.id);
    return {
      name: 'lxc',
      version: lxc.version,
      available: lxc.available,
      reason: lxc.reason,
      ready: missing.length === 0,
      programs: p.programs,
      cgroup: { version: p.cgroups.version, controllers: p.cgroups.controllers, missing: p.cgroupMissing },
      idmap: { ...p.idmap, range: p.idrange },
      apparmor: p.apparmor,
      lsm: lsmStatus(p),
      allow_privileged: this.d.settings.allowPrivileged,
      violations: await this.allViolations(),
      lxc_path: this.d.settings.lxcPath,
      default_bridge: bridge ? { name: bridge, exists: await bridgeExists(bridge) } : null,
      image_server: this.d.settings.imageServer,
      zfs_pools: zfsPools,
      disk_limits: 'ext4 image per container, loop-mounted by LXC (lxc.rootfs.path = loop:...); ZFS refquota on linked clones',
      missing,
    };
  }

  /** Every container that breaks a rule now, with the rules (host-status). */
  private async allViolations(): Promise<Array<{ lxcid: number; name: string } & Violation>> {
    const out: Array<{ lxcid: number; name: string } & Violation> = [];
    for (const rec of await this.d.records.all()) {
      for (const v of await this.violationsOf(rec)) out.push({ lxcid: rec.lxcid, name: rec.name, ...v });
    }
    return out;
  }

  // ------------------------------------------------------------ records and views

  private pool(storageId: string, arg = 'storage_id'): PoolConfig {
    const p = this.d.pools.find((x) => x.id === storageId);
    if (!p) throw notFound(`storage '${storageId}' not found (argument '${arg}')`);
    return p;
  }

  private async record(lxcid: number): Promise<ContainerRecord> {
    const r = await this.d.records.get(lxcid);
    if (!r) throw notFound(`container ${lxcid} not found`);
    return r;
  }

  private paths(rec: ContainerRecord) {
    return rootfsPaths(this.pool(rec.storage_id).path, rec.lxcid);
  }

  private rootfsSpec(rec: ContainerRecord): string {
    const p = this.paths(rec);
    return rec.rootfs_kind === 'loop' ? `loop:${p.img}` : `dir:${p.rootfs}`;
  }

  private effectiveBridge(net: NetworkSettings): string | null {
    return net.type === 'bridged' ? net.bridge ?? this.d.settings.defaultBridge : null;
  }

  /** Fast state for lists: cgroup files, and 'stopped' when they say nothing. */
  private quickState(rec: ContainerRecord): StateName {
    const s = this.d.driver.cgroups.fastState(lxcNameOf(rec.lxcid));
    return s ? stateName(s) : 'stopped';
  }

  /** Exact state: cgroup files, else lxc-info. */
  private async state(rec: ContainerRecord): Promise<StateName> {
    return stateName(await this.d.driver.tools.state(lxcNameOf(rec.lxcid)));
  }

  private view(rec: ContainerRecord, state: StateName): ContainerView {
    const p = this.d.pools.find((x) => x.id === rec.storage_id);
    const paths = p ? rootfsPaths(p.path, rec.lxcid) : null;
    return {
      lxcid: rec.lxcid,
      name: rec.name,
      state,
      lxc_name: lxcNameOf(rec.lxcid),
      hostname: hostnameOf(rec.name, rec.lxcid),
      template: rec.template,
      template_storage_id: rec.template_storage_id,
      storage_id: rec.storage_id,
      rootfs: { kind: rec.rootfs_kind, path: paths ? (rec.rootfs_kind === 'loop' ? paths.img : paths.rootfs) : '' },
      cpu_cores: rec.cpu_cores,
      memory_mb: rec.memory_mb,
      disk_size_bytes: rec.disk_size_bytes,
      privileged: rec.privileged,
      idmap: rec.idmap,
      nesting: rec.nesting,
      environment: { ...rec.environment },
      network: {
        type: rec.network.type,
        bridge: this.effectiveBridge(rec.network),
        bridge_is_default: rec.network.type === 'bridged' && rec.network.bridge === null,
        ip_address: rec.network.ip_address,
        gateway: rec.network.gateway,
        dns_servers: [...rec.network.dns_servers],
        hwaddr: rec.network.hwaddr,
      },
      autostart: rec.autostart,
      mount_points: rec.mount_points.map((m) => ({ ...m })),
      linked_clone: rec.linked_clone,
      pending_restart: rec.rootfs_sync_pending && state !== 'stopped',
      created_at: rec.created_at,
      updated_at: rec.updated_at,
    };
  }

  private async renderAndWrite(rec: ContainerRecord): Promise<void> {
    const probe = await this.probe();
    const text = renderConfig({
      rec,
      lxcName: lxcNameOf(rec.lxcid),
      rootfs: this.rootfsSpec(rec),
      bridge: this.effectiveBridge(rec.network),
      logFile: this.d.driver.tools.logFile(lxcNameOf(rec.lxcid)),
      cgroupDirs: this.d.driver.cgroupDirs(rec.lxcid),
      host: { cgroupKeys: probe.cgroups.version === 'v2' ? 'v2' : 'v1', apparmor: probe.apparmor },
      mountIsDir: (m) => {
        try {
          return fs.statSync(m.host_path).isDirectory();
        } catch {
          return true;
        }
      },
    });
    await this.d.driver.tools.writeConfig(lxcNameOf(rec.lxcid), text);
  }

  async list(): Promise<{ containers: ContainerView[] }> {
    const recs = await this.d.records.all();
    return { containers: recs.map((r) => this.view(r, this.quickState(r))) };
  }

  async get(lxcid: number): Promise<{ container: ContainerView }> {
    const rec = await this.record(lxcid);
    return { container: this.view(rec, await this.state(rec)) };
  }

  /** The guests port: what system allocation and the proxy see. */
  async guests() {
    const recs = await this.d.records.all();
    return recs.map((r) => {
      const state = this.quickState(r);
      const running = state === 'running' || state === 'frozen';
      const addrs = new Set<string>();
      if (running) for (const a of this.d.driver.tools.network(lxcNameOf(r.lxcid))?.addresses ?? []) addrs.add(a);
      if (r.network.ip_address && r.network.type === 'bridged') addrs.add(r.network.ip_address.split('/')[0]);
      return { kind: 'lxc' as const, id: String(r.lxcid), name: r.name, state, running, cpu_cores: r.cpu_cores, memory_mb: r.memory_mb, addresses: [...addrs] };
    });
  }

  // ------------------------------------------------------------ argument rules

  private async ensureNameFree(name: string, except?: number): Promise<void> {
    const lower = name.toLowerCase();
    for (const r of await this.d.records.all()) {
      if (r.lxcid !== except && r.name.toLowerCase() === lower) throw conflict(`a container named '${name}' exists already (lxcid ${r.lxcid})`);
    }
  }

  /**
   * Picks a free lxcid and reserves it (the caller drops the reservation once
   * the record is written or the create failed). Allocations run one at a
   * time and copy the reservations before reading the records: a create that
   * commits (and drops its reservation) during the reads would otherwise be in
   * neither, and its lxcid handed out twice.
   */
  private allocateId(wanted: number | undefined): Promise<number> {
    return this.locks.run(['lxcid-alloc'], async () => {
      // Only allocation adds reservations, so the copy covers every one that can exist until this returns.
      const held = new Set(this.reserved);
      const taken = new Set((await this.d.records.all()).map((r) => r.lxcid));
      const configDirs = new Set(await this.d.driver.tools.listConfigDirs());
      const free = (id: number) => !taken.has(id) && !held.has(id) && !configDirs.has(lxcNameOf(id));
      let id: number | undefined;
      if (wanted !== undefined) {
        if (!free(wanted)) throw conflict(`lxcid ${wanted} is taken`);
        id = wanted;
      } else {
        for (let i = this.d.settings.firstLxcid; i < 1_000_000_000 && id === undefined; i++) if (free(i)) id = i;
        if (id === undefined) throw conflict('no free lxcid left');
      }
      this.reserved.add(id);
      return id;
    });
  }

  /** The host-path policy for mount points as it is now (folders come and go). */
  private mountPolicy() {
    return mountPolicy({ folders: this.d.folders(), mountRoots: this.d.settings.mountRoots, pools: this.d.pools, dataDir: this.d.dataDir, lxcPath: this.d.settings.lxcPath });
  }

  /** The rules the record breaks now (privileged while off, mounts outside the allowed roots). */
  private async violationsOf(rec: ContainerRecord): Promise<Violation[]> {
    if (!rec.privileged && rec.mount_points.length === 0) return [];
    return violations(rec, rec.mount_points.length ? await this.mountPolicy() : null, this.d.settings.allowPrivileged);
  }

  /** 409 naming every rule the container breaks, for a call (`start`, `exec`, ...) that would use it. */
  private async refuseViolations(rec: ContainerRecord, what: string): Promise<void> {
    const v = await this.violationsOf(rec);
    if (v.length) throw conflict(`container ${rec.lxcid} cannot ${what}: ${v.map((x) => x.message).join('; ')}`);
  }

  private async checkNetwork(net: NetworkSettings, args: { typeArg: string }): Promise<void> {
    if (net.type === 'bridged') {
      const br = this.effectiveBridge(net);
      if (!br) throw badRequest(`argument '${args.typeArg}' bridged needs network_bridge (no default bridge is configured: set lxc.default_bridge)`);
      if (!(await bridgeExists(br))) throw badRequest(`argument 'network_bridge': bridge '${br}' does not exist on this host`);
    } else {
      if (net.ip_address) throw badRequest("argument 'ip_address' needs network_type bridged");
    }
    if (net.gateway && net.ip_address) checkGateway(net.gateway, net.ip_address);
  }

  // ------------------------------------------------------------ test hook

  /**
   * Test-only: HOSTD_TEST_LXC_PAUSE_AT=<step> makes the daemon stop at that
   * step of a change (logging it) so a test can kill it there.
   */
  private async pauseAt(step: string): Promise<void> {
    if (this.d.env.HOSTD_TEST_LXC_PAUSE_AT !== step) return;
    this.d.log.warn({ step }, 'lxc test pause');
    await new Promise(() => undefined);
  }

  // ------------------------------------------------------------ guest files

  /** Writes hostname, hosts, network config and DNS into a stopped rootfs. */
  private async writeGuestNetwork(rec: ContainerRecord, root: string): Promise<void> {
    const s = this.d.driver.storage;
    const hn = hostnameOf(rec.name, rec.lxcid);
    await s.writeGuestFile(root, 'etc/hostname', hn + '\n', 0o644, rec.idmap);
    await s.writeGuestFile(root, 'etc/hosts', hostsFile(await s.readGuestFile(root, 'etc/hosts'), hn), 0o644, rec.idmap);
    if (await s.guestHasDir(root, 'etc/network')) await s.writeGuestFile(root, 'etc/network/interfaces', interfacesFile(rec.network), 0o644, rec.idmap);
    const nd = networkdFile(rec.network);
    if (await s.guestHasDir(root, 'etc/systemd/network')) {
      if (nd) await s.writeGuestFile(root, 'etc/systemd/network/eth0.network', nd, 0o644, rec.idmap);
      else await s.removeGuestFileIfManaged(root, 'etc/systemd/network/eth0.network', MANAGED_MARK);
    }
    const rc = resolvConf(rec.network);
    if (rc) await s.writeGuestFile(root, 'etc/resolv.conf', rc, 0o644, rec.idmap);
    else await s.removeGuestFileIfManaged(root, 'etc/resolv.conf', MANAGED_MARK);
  }

  /** Runs `fn` on the rootfs of a stopped container (mounting its disk image when it has one). */
  private async withRootfs<T>(rec: ContainerRecord, readOnly: boolean, fn: (root: string) => Promise<T>): Promise<T> {
    const pool = this.pool(rec.storage_id);
    const p = rootfsPaths(pool.path, rec.lxcid);
    if (rec.rootfs_kind !== 'loop') return fn(p.rootfs);
    const tmp = await this.d.driver.storage.makeTmp(pool.path);
    try {
      return await this.d.driver.storage.withMounted(p.img, tmp, readOnly, fn);
    } finally {
      await this.d.driver.storage.remove(tmp);
    }
  }

  // ------------------------------------------------------------ create

  async create(a: Req<'lxc_create'>, ctx: NoteSink): Promise<{ container: ContainerView }> {
    const probe = await this.require([...LxcService.LIFECYCLE, ...LxcService.BUILD]);
    const name = checkName(a.name, 'name');
    const template = checkImageId(a.template, 'template');
    if (a.template_storage_id) this.pool(a.template_storage_id, 'template_storage_id');
    const image = await this.d.driver.images.find(template, a.template_storage_id);
    if (!image) throw notFound(`image '${template}' not found${a.template_storage_id ? ` on storage '${a.template_storage_id}'` : ''} (see GET /lxc/images)`);
    const pool = this.pool(a.storage_id ?? this.d.settings.defaultStorage);
    const privileged = a.privileged ?? false;
    if (privileged && !this.d.settings.allowPrivileged) throw privilegedRefused(a.nesting ? "argument 'privileged' (with nesting)" : "argument 'privileged'");
    const idmap = privileged ? null : await this.idrange(false);
    const disk = a.disk_size_bytes ? a.disk_size_bytes : image.meta.disk_size_bytes ?? 0;
    if (disk > 0 && disk < MIN_DISK_BYTES) throw badRequest(`argument 'disk_size_bytes' must be 0 or at least ${MIN_DISK_BYTES} (32 MiB)`);
    const linked = a.linked_clone ?? false;
    if (linked) {
      if ((await this.d.driver.storage.fsType(pool.path)) !== ZFS_MAGIC) {
        throw badRequest(`argument 'linked_clone' needs a ZFS pool: storage '${pool.id}' is not on ZFS (a linked clone is a ZFS clone of the image's base dataset)`);
      }
      if (image.storage_id !== pool.id) throw badRequest(`argument 'linked_clone' needs the image on the same ZFS pool: image '${template}' is on storage '${image.storage_id}', the rootfs would be on '${pool.id}'`);
      await this.require(['zfs']);
    } else if (disk > 0) {
      await this.require(LxcService.DISK);
    }
    const net = this.networkFromCreate(a);
    await this.checkNetwork(net, { typeArg: 'network_type' });
    const environment = checkEnvironment(a.environment ?? {});
    const mounts = await checkNewMounts(a.mount_points ?? [], await this.mountPolicy());
    if (a.seed_data !== undefined && Buffer.byteLength(a.seed_data) > 1024 * 1024) throw badRequest("argument 'seed_data' must be at most 1 MiB");

    const imgKey = `img:${image.storage_id}:${template}`;
    const busyImg = this.locks.busy(imgKey);
    if (busyImg) throw conflict(`image '${template}' on storage '${image.storage_id}' is busy: ${busyImg} in progress`);
    return this.locks.exclusive([`name:${name.toLowerCase()}`], 'create', async () => {
      await this.ensureNameFree(name);
      const lxcid = await this.allocateId(a.lxcid);
      this.imageReaders.set(imgKey, (this.imageReaders.get(imgKey) ?? 0) + 1);
      try {
        return await this.locks.exclusive([`ct:${lxcid}`], 'create', async () => {
          const t = now();
          const rec: ContainerRecord = {
            lxcid, name, template, template_storage_id: image.storage_id, storage_id: pool.id,
            rootfs_kind: linked ? 'zfs' : disk > 0 ? 'loop' : 'dir',
            cpu_cores: a.cpu_cores || image.meta.min_cpu_cores || this.d.settings.defaultCpuCores,
            memory_mb: a.memory_mb || image.meta.min_memory_mb || this.d.settings.defaultMemoryMb,
            disk_size_bytes: disk, privileged, idmap, nesting: a.nesting ?? false, environment, network: net,
            autostart: a.autostart ?? false, mount_points: mounts, linked_clone: linked, rootfs_sync_pending: false,
            created_at: t, updated_at: t,
          };
          const p = rootfsPaths(pool.path, lxcid);
          const confDir = this.d.driver.tools.confDir(lxcNameOf(lxcid));
          let zfsDataset: string | undefined;
          if (linked) {
            const ds = await this.d.driver.zfs.datasetOf(pool.path);
            zfsDataset = `${ds}/hostd-lxc/containers/${lxcid}`;
            rec.zfs_dataset = zfsDataset;
          }
          await this.d.records.journal.run(`create:${lxcid}`, { op: 'create', lxcid, dir: p.dir, confDir, zfs_dataset: zfsDataset }, async () => {
            await this.buildRootfs(rec, image, pool, a.seed_data, probe);
            await this.renderAndWrite(rec);
            await this.pauseAt('create.before_commit');
          }, {
            commit: () => [this.d.records.putOp(rec)],
            rollback: async () => this.removeContainerFiles(p.dir, confDir, zfsDataset),
          });
          ctx.note({ summary: `Created container ${lxcid} '${name}' from image '${template}'`, target: `lxc/${lxcid}`, metadata: { lxcid, template, storage_id: pool.id, privileged } });
          return { container: this.view(rec, 'stopped') };
        });
      } finally {
        this.reserved.delete(lxcid);
        const n = (this.imageReaders.get(imgKey) ?? 1) - 1;
        if (n <= 0) this.imageReaders.delete(imgKey);
        else this.imageReaders.set(imgKey, n);
      }
    }, this.label);
  }

  private networkFromCreate(a: Req<'lxc_create'>): NetworkSettings {
    const bridge = a.network_bridge ? checkBridge(a.network_bridge) : null;
    const type = a.network_type ?? (bridge || this.d.settings.defaultBridge ? 'bridged' : 'none');
    const ip = a.ip_address ? checkCidr(a.ip_address) : null;
    const gateway = a.gateway ? checkGateway(a.gateway, ip) : null;
    return { type, bridge, ip_address: ip, gateway, dns_servers: checkDns(a.dns_servers ?? []), hwaddr: randomHwaddr(crypto.randomBytes(3)) };
  }

  private async buildRootfs(rec: ContainerRecord, image: ImageRef, pool: PoolConfig, seed: string | undefined, _probe: HostProbe): Promise<void> {
    const s = this.d.driver.storage;
    const p = rootfsPaths(pool.path, rec.lxcid);
    await s.preparePool(pool.path);
    await fsp.mkdir(p.dir, { mode: 0o711 });
    if (rec.idmap) {
      await s.ensureTraversable(p.dir, rec.idmap.uid);
      await s.ensureTraversable(this.d.driver.tools.lxcPath, rec.idmap.uid);
    }
    const fill = async (root: string) => {
      await this.writeGuestNetwork(rec, root);
      if (seed !== undefined) await s.writeGuestFile(root, SEED_PATH, seed, 0o600, rec.idmap);
    };
    if (rec.rootfs_kind === 'zfs') {
      const baseDs = `${(await this.d.driver.zfs.datasetOf(pool.path))}/hostd-lxc/images/${rec.template}`;
      const snap = `${baseDs}@base`;
      if (!(await this.d.driver.zfs.snapshotExists(snap))) {
        const mp = path.join(poolRoot(pool.path), 'zfs-images', rec.template);
        if (!(await this.d.driver.zfs.exists(baseDs))) await this.d.driver.zfs.create(baseDs, mp);
        await s.unpack(image.file, mp, rec.idmap);
        await this.d.driver.zfs.snapshot(snap);
      }
      await this.d.driver.zfs.clone(snap, rec.zfs_dataset!, p.rootfs, rec.disk_size_bytes);
      await fill(p.rootfs);
      return;
    }
    if (rec.rootfs_kind === 'loop') {
      await s.makeDiskImage(p.img, rec.disk_size_bytes, rec.idmap);
      const tmp = await s.makeTmp(pool.path);
      try {
        await s.withMounted(p.img, tmp, false, async (root) => {
          await s.unpack(image.file, root, rec.idmap);
          await fill(root);
        });
      } finally {
        await s.remove(tmp);
      }
      return;
    }
    await s.unpack(image.file, p.rootfs, rec.idmap);
    await fill(p.rootfs);
  }

  private async removeContainerFiles(dir: string, confDir: string, zfsDataset?: string): Promise<void> {
    if (zfsDataset) await this.d.driver.zfs.destroy(zfsDataset);
    await this.d.driver.storage.remove(dir);
    await fsp.rm(confDir, { recursive: true, force: true });
  }

  // ------------------------------------------------------------ lifecycle

  /** One change at a time per container; an unknown id is 404 before any lock (never a 409 about nothing). */
  private async ctLock<T>(lxcid: number, what: string, fn: () => Promise<T>): Promise<T> {
    await this.record(lxcid);
    return this.locks.exclusive([`ct:${lxcid}`], what, fn, () => `container ${lxcid}`);
  }

  async start(lxcid: number, ctx: NoteSink): Promise<{ container: ContainerView }> {
    await this.require(LxcService.LIFECYCLE);
    return this.ctLock(lxcid, 'start', async () => {
      let rec = await this.record(lxcid);
      const name = lxcNameOf(lxcid);
      const fast = this.d.driver.cgroups.fastState(name);
      if (fast === 'RUNNING') return { container: this.view(rec, 'running') };
      if (fast === 'FROZEN') {
        await this.d.driver.tools.unfreeze(name);
        ctx.note({ summary: `Started container ${lxcid} '${rec.name}' (it was frozen: unfrozen)`, target: `lxc/${lxcid}` });
        return { container: this.view(rec, 'running') };
      }
      rec = await this.prepareStart(rec);
      try {
        await this.d.driver.tools.start(name);
      } catch (err) {
        // Started meanwhile by someone else (or running where the cgroup files did not say): idempotent.
        if ((await this.d.driver.tools.state(name)) === 'RUNNING') return { container: this.view(rec, 'running') };
        throw err;
      }
      ctx.note({ summary: `Started container ${lxcid} '${rec.name}'`, target: `lxc/${lxcid}` });
      return { container: this.view(rec, 'running') };
    });
  }

  /**
   * Before lxc-start: the container must break no rule now (privileged while
   * lxc.allow_privileged is off; a mount point whose host path went away,
   * resolves elsewhere, or is no longer a managed folder or inside
   * lxc.mount_roots), the bridge must exist, pending guest files are written,
   * the config is current.
   */
  private async prepareStart(rec: ContainerRecord): Promise<ContainerRecord> {
    await this.refuseViolations(rec, 'start');
    const br = this.effectiveBridge(rec.network);
    if (rec.network.type === 'bridged') {
      if (!br) throw conflict(`container ${rec.lxcid} is bridged to the default bridge, and lxc.default_bridge is not set`);
      if (!(await bridgeExists(br))) throw conflict(`bridge '${br}' of container ${rec.lxcid} does not exist on this host`);
    }
    if (rec.idmap) {
      await this.d.driver.storage.ensureTraversable(this.paths(rec).dir, rec.idmap.uid);
      await this.d.driver.storage.ensureTraversable(this.d.driver.tools.lxcPath, rec.idmap.uid);
    }
    if (rec.rootfs_sync_pending) {
      await this.withRootfs(rec, false, (root) => this.writeGuestNetwork(rec, root));
      rec = { ...rec, rootfs_sync_pending: false };
      await this.d.records.put(rec);
    }
    await this.renderAndWrite(rec);
    return rec;
  }

  async stop(lxcid: number, ctx: NoteSink): Promise<{ container: ContainerView }> {
    await this.require(LxcService.LIFECYCLE);
    return this.ctLock(lxcid, 'stop', async () => {
      const rec = await this.record(lxcid);
      await this.stopNow(rec);
      ctx.note({ summary: `Stopped container ${lxcid} '${rec.name}'`, target: `lxc/${lxcid}` });
      return { container: this.view(rec, 'stopped') };
    });
  }

  private async stopNow(rec: ContainerRecord): Promise<void> {
    const name = lxcNameOf(rec.lxcid);
    const st = await this.d.driver.tools.state(name);
    if (st === 'STOPPED') return;
    // Frozen tasks cannot act on the halt signal (or even die): thaw first.
    if (st === 'FROZEN' || st === 'FREEZING') await this.d.driver.tools.unfreeze(name);
    await this.d.driver.tools.stop(name, this.d.settings.stopTimeoutSeconds);
    // 'stopped' means its disk image is released too (the kernel detaches it a moment later).
    if (rec.rootfs_kind === 'loop') await this.d.driver.storage.waitImageFree(this.paths(rec).img);
  }

  async restart(lxcid: number, ctx: NoteSink): Promise<{ container: ContainerView }> {
    await this.require(LxcService.LIFECYCLE);
    return this.ctLock(lxcid, 'restart', async () => {
      let rec = await this.record(lxcid);
      // Refused before the stop: a restart that cannot start again must not stop the container either.
      await this.refuseViolations(rec, 'restart');
      await this.stopNow(rec);
      rec = await this.prepareStart(rec);
      await this.d.driver.tools.start(lxcNameOf(lxcid));
      ctx.note({ summary: `Restarted container ${lxcid} '${rec.name}'`, target: `lxc/${lxcid}` });
      return { container: this.view(rec, 'running') };
    });
  }

  async freeze(lxcid: number, ctx: NoteSink): Promise<{ container: ContainerView }> {
    await this.require(LxcService.LIFECYCLE);
    return this.ctLock(lxcid, 'freeze', async () => {
      const rec = await this.record(lxcid);
      const st = await this.state(rec);
      if (st === 'frozen') return { container: this.view(rec, 'frozen') };
      if (st !== 'running') throw conflict(`container ${lxcid} is ${st}; only a running container can be frozen`);
      await this.d.driver.tools.freeze(lxcNameOf(lxcid));
      ctx.note({ summary: `Froze container ${lxcid} '${rec.name}'`, target: `lxc/${lxcid}` });
      return { container: this.view(rec, 'frozen') };
    });
  }

  async unfreeze(lxcid: number, ctx: NoteSink): Promise<{ container: ContainerView }> {
    await this.require(LxcService.LIFECYCLE);
    return this.ctLock(lxcid, 'unfreeze', async () => {
      const rec = await this.record(lxcid);
      const st = await this.state(rec);
      if (st !== 'frozen') throw conflict(`container ${lxcid} is not frozen (it is ${st})`);
      await this.d.driver.tools.unfreeze(lxcNameOf(lxcid));
      ctx.note({ summary: `Unfroze container ${lxcid} '${rec.name}'`, target: `lxc/${lxcid}` });
      return { container: this.view(rec, 'running') };
    });
  }

  async delete(lxcid: number, ctx: NoteSink): Promise<{ deleted: true; lxcid: number; name: string }> {
    await this.require(['lxc-info']);
    return this.ctLock(lxcid, 'delete', async () => {
      const rec = await this.record(lxcid);
      const st = await this.state(rec);
      if (st !== 'stopped') throw conflict(`container ${lxcid} is ${st}; stop it first`);
      const p = this.paths(rec);
      const confDir = this.d.driver.tools.confDir(lxcNameOf(lxcid));
      await this.d.records.journal.run(`delete:${lxcid}`, { op: 'delete', lxcid, dir: p.dir, confDir, zfs_dataset: rec.zfs_dataset }, async () => {
        await this.removeContainerFiles(p.dir, confDir, rec.zfs_dataset);
      }, { commit: () => this.d.records.delOps(lxcid) });
      ctx.note({ summary: `Deleted container ${lxcid} '${rec.name}'`, target: `lxc/${lxcid}` });
      return { deleted: true as const, lxcid, name: rec.name };
    });
  }

  // ------------------------------------------------------------ clone

  /** `POST /lxc/{id}/clone`: `{id}` is the new container's id (as for VMs), `source_lxcid` the stopped source. */
  async clone(a: Req<'lxc_clone'>, ctx: NoteSink): Promise<{ container: ContainerView }> {
    await this.require([...LxcService.LIFECYCLE, 'setfacl']);
    const name = checkName(a.name, 'name');
    return this.ctLock(a.source_lxcid, 'clone', async () => {
      const src = await this.record(a.source_lxcid);
      if (src.privileged && !this.d.settings.allowPrivileged) throw privilegedRefused(`container ${src.lxcid} is privileged, and so would be its clone`);
      await this.refuseViolations(src, 'be cloned (the clone would carry its mount points)');
      const st = await this.state(src);
      if (st !== 'stopped') throw conflict(`container ${a.source_lxcid} is ${st}; a clone needs the source stopped`);
      return this.locks.exclusive([`name:${name.toLowerCase()}`], 'clone', async () => {
        await this.ensureNameFree(name);
        const lxcid = await this.allocateId(a.id);
        try {
          const pool = this.pool(src.storage_id);
          const sp = rootfsPaths(pool.path, src.lxcid);
          const np = rootfsPaths(pool.path, lxcid);
          const t = now();
          const rec: ContainerRecord = {
            ...structuredClone(src), lxcid, name, created_at: t, updated_at: t,
            // A ZFS clone's copy is a full copy: it no longer depends on the image.
            rootfs_kind: src.rootfs_kind === 'zfs' ? 'dir' : src.rootfs_kind, zfs_dataset: undefined, linked_clone: false,
            network: { ...src.network, ip_address: null, hwaddr: randomHwaddr(crypto.randomBytes(3)) },
            rootfs_sync_pending: true,
          };
          const confDir = this.d.driver.tools.confDir(lxcNameOf(lxcid));
          await this.d.records.journal.run(`create:${lxcid}`, { op: 'create', lxcid, dir: np.dir, confDir }, async () => {
            await fsp.mkdir(np.dir, { mode: 0o711 });
            if (src.rootfs_kind === 'loop') await this.d.driver.storage.copy(sp.img, np.img);
            else await this.d.driver.storage.copy(sp.rootfs, np.rootfs);
            await this.renderAndWrite(rec);
            await this.pauseAt('clone.before_commit');
          }, {
            commit: () => [this.d.records.putOp(rec)],
            rollback: async () => this.removeContainerFiles(np.dir, confDir),
          });
          ctx.note({ summary: `Cloned container ${src.lxcid} '${src.name}' to ${lxcid} '${name}'`, target: `lxc/${lxcid}`, metadata: { source_lxcid: src.lxcid, lxcid } });
          return { container: this.view(rec, 'stopped') };
        } finally {
          this.reserved.delete(lxcid);
        }
      }, this.label);
    });
  }

  // ------------------------------------------------------------ update

  async update(a: Req<'lxc_update'>, ctx: NoteSink): Promise<{ container: ContainerView; restart_required: boolean }> {
    return this.ctLock(a.id, 'update', async () => {
      const cur = await this.record(a.id);
      const rec: ContainerRecord = structuredClone(cur);
      const changed: string[] = [];
      let needsSync = false;
      if (a.new_name !== undefined && a.new_name !== null && a.new_name !== cur.name) {
        rec.name = checkName(a.new_name, 'new_name');
        changed.push('name');
        if (hostnameOf(rec.name, rec.lxcid) !== hostnameOf(cur.name, cur.lxcid)) needsSync = true;
      }
      if (a.cpu_cores) {
        rec.cpu_cores = a.cpu_cores;
        changed.push('cpu_cores');
      }
      if (a.memory_mb) {
        if (a.memory_mb < 16) throw badRequest("argument 'memory_mb' must be 0 (unchanged) or at least 16");
        rec.memory_mb = a.memory_mb;
        changed.push('memory_mb');
      }
      if (a.nesting !== undefined && a.nesting !== cur.nesting) {
        if (a.nesting && cur.privileged && !this.d.settings.allowPrivileged) throw privilegedRefused(`argument 'nesting' in privileged container ${cur.lxcid}`);
        rec.nesting = a.nesting;
        changed.push('nesting');
      }
      const net = rec.network;
      if (a.network_type !== undefined) net.type = a.network_type;
      if (a.network_bridge !== undefined) net.bridge = a.network_bridge === '' ? null : checkBridge(a.network_bridge);
      if (a.ip_address !== undefined && a.ip_address !== null) net.ip_address = a.ip_address === '' ? null : checkCidr(a.ip_address);
      if (a.gateway !== undefined && a.gateway !== null) net.gateway = a.gateway === '' ? null : a.gateway.trim();
      if (a.dns_servers !== undefined && a.dns_servers !== null) net.dns_servers = checkDns(a.dns_servers);
      if (JSON.stringify(net) !== JSON.stringify(cur.network)) {
        if (net.gateway) checkGateway(net.gateway, net.ip_address);
        await this.checkNetwork(net, { typeArg: 'network_type' });
        changed.push('network');
        needsSync = true;
      }
      if (changed.length === 0) return { container: this.view(cur, await this.state(cur)), restart_required: false };
      const st = await this.state(cur);
      const apply = async () => {
        if (needsSync) rec.rootfs_sync_pending = true;
        rec.updated_at = now();
        await this.d.records.put(rec);
        await this.renderAndWrite(rec);
        if (st === 'running' || st === 'frozen') {
          const name = lxcNameOf(rec.lxcid);
          const keys = [
            ...(changed.includes('cpu_cores') ? this.d.driver.cgroups.cpuLimitKeys(rec.cpu_cores, CPU_PERIOD_US) : []),
            ...(changed.includes('memory_mb') ? this.d.driver.cgroups.memoryLimitKeys(rec.memory_mb) : []),
          ];
          for (const [k, v] of keys) await this.d.driver.tools.setCgroup(name, k, v);
        }
      };
      if (rec.name !== cur.name) {
        await this.locks.exclusive([`name:${rec.name.toLowerCase()}`], 'rename', async () => {
          await this.ensureNameFree(rec.name, rec.lxcid);
          await apply();
        }, this.label);
      } else {
        await apply();
      }
      const running = st !== 'stopped';
      const restartRequired = running && (needsSync || changed.includes('nesting'));
      ctx.note({ summary: `Updated container ${a.id} '${rec.name}' (${changed.join(', ')})`, target: `lxc/${a.id}`, metadata: { changed } });
      return { container: this.view(rec, st), restart_required: restartRequired };
    });
  }

  // ------------------------------------------------------------ disk

  async diskUpdate(a: Req<'lxc_disk_update'>, ctx: NoteSink): Promise<{ container: ContainerView }> {
    await this.require(['lxc-info', ...LxcService.DISK]);
    const bytes = a.disk_size_bytes;
    if (bytes > 0 && bytes < MIN_DISK_BYTES) throw badRequest(`argument 'disk_size_bytes' must be 0 (no limit) or at least ${MIN_DISK_BYTES} (32 MiB)`);
    return this.ctLock(a.id, 'disk change', async () => {
      const cur = await this.record(a.id);
      const st = await this.state(cur);
      if (st !== 'stopped') throw conflict(`container ${a.id} is ${st}; stop it to change its disk limit`);
      if (bytes === cur.disk_size_bytes) return { container: this.view(cur, st) };
      const rec: ContainerRecord = { ...structuredClone(cur), disk_size_bytes: bytes, updated_at: now() };
      const pool = this.pool(cur.storage_id);
      const p = rootfsPaths(pool.path, cur.lxcid);
      const s = this.d.driver.storage;
      if (cur.rootfs_kind === 'zfs') {
        await this.d.driver.zfs.setRefquota(cur.zfs_dataset!, bytes);
        await this.d.records.put(rec);
      } else if (cur.rootfs_kind === 'loop' && bytes > cur.disk_size_bytes) {
        // Growing: in place (e2fsck + resize2fs); a crash is finished by recovery.
        await this.d.records.journal.run(`disk:${cur.lxcid}`, { op: 'disk', lxcid: cur.lxcid, dir: p.dir, new_kind: 'loop', new_path: p.img, old_path: p.img, disk_size_bytes: bytes }, async () => {
          await s.growDiskImage(p.img, bytes);
        }, { commit: () => [this.d.records.putOp(rec)] });
      } else {
        await this.checkFits(cur, bytes);
        rec.rootfs_kind = bytes > 0 ? 'loop' : 'dir';
        const newPath = bytes > 0 ? p.img + '.new' : p.rootfs + '.new';
        const oldPath = cur.rootfs_kind === 'loop' ? p.img : p.rootfs;
        const finalPath = bytes > 0 ? p.img : p.rootfs;
        const tmp = await s.makeTmp(pool.path);
        await this.d.records.journal.run(`disk:${cur.lxcid}`, { op: 'disk', lxcid: cur.lxcid, dir: p.dir, new_kind: rec.rootfs_kind, new_path: newPath, old_path: oldPath, disk_size_bytes: bytes }, async () => {
          try {
            if (bytes > 0) {
              await s.makeDiskImage(newPath, bytes, cur.idmap);
              await s.withMounted(newPath, tmp, false, async (dst) => {
                await this.withRootfs(cur, true, (src) => s.copy(src + '/.', dst));
              });
            } else {
              await this.withRootfs(cur, true, (src) => s.copy(src, newPath));
            }
          } catch (err) {
            if (errnoCode(err) === 'ENOSPC' || /No space left/i.test((err as Error).message)) throw conflict(`the rootfs does not fit in ${bytes} bytes`);
            throw err;
          } finally {
            await s.remove(tmp);
          }
          await this.pauseAt('disk.copied');
          await fsp.rename(newPath, finalPath);
          return undefined;
        }, {
          commit: () => [this.d.records.putOp(rec), ...(oldPath !== finalPath ? [this.cleanupOp([oldPath])] : [])],
          rollback: async () => s.remove(newPath),
        });
        await this.renderAndWrite(rec);
        if (oldPath !== finalPath) await this.finishCleanup([oldPath]);
      }
      await this.renderAndWrite(rec);
      ctx.note({ summary: `Set the disk limit of container ${a.id} '${cur.name}' to ${bytes ? `${bytes} bytes` : 'none'}`, target: `lxc/${a.id}`, metadata: { disk_size_bytes: bytes } });
      return { container: this.view(rec, 'stopped') };
    });
  }

  /** 409 when the rootfs already uses more than `bytes` (ext4 needs some room of its own). */
  private async checkFits(rec: ContainerRecord, bytes: number): Promise<void> {
    if (bytes === 0) return;
    const p = this.paths(rec);
    const used = rec.rootfs_kind === 'loop' ? (await this.d.driver.storage.imageUsage(p.img))?.used_bytes ?? null : await this.d.driver.storage.treeUsage(p.rootfs);
    if (used !== null && used > bytes * 0.9) throw conflict(`the rootfs of container ${rec.lxcid} uses ${used} bytes; a limit of ${bytes} bytes cannot hold it (ext4 keeps about 10% for itself on small disks)`);
  }

  private cleanupKey = (paths: string[]) => `cleanup:${crypto.createHash('sha256').update(paths.join('\n')).digest('hex').slice(0, 16)}`;

  private cleanupOp(paths: string[], zfs?: string[]): JournalOp {
    return { type: 'put', sub: this.d.records.intents, key: this.cleanupKey(paths), value: { op: 'cleanup', paths, zfs_datasets: zfs } satisfies Intent };
  }

  private async finishCleanup(paths: string[]): Promise<void> {
    for (const p of paths) await this.d.driver.storage.remove(p);
    await this.d.records.journal.drop(this.cleanupKey(paths));
  }

  // ------------------------------------------------------------ tasks holding locks

  /**
   * Starts a task that holds `keys` until it ends: a conflicting call made
   * while it runs gets 409 naming `what`.
   */
  private lockedTask(keys: string[], what: string, label: (k: string) => string, start: { kind: string; title: string; owner: string; resource: string }, work: (t: TaskHandle) => Promise<unknown>): TaskRecord {
    for (const k of keys) {
      const busy = this.locks.busy(k);
      if (busy) throw conflict(`${label(k)} is busy: ${busy} in progress`);
    }
    let release!: () => void;
    const until = new Promise<void>((r) => (release = r));
    void this.locks.exclusive(keys, what, () => until, label).catch(() => undefined);
    try {
      return this.d.tasks.start(start, async (t) => {
        try {
          return await work(t);
        } finally {
          release();
        }
      });
    } catch (err) {
      release();
      throw err;
    }
  }

  private label = (k: string): string => {
    const [kind, a, b] = k.split(':');
    if (kind === 'ct') return `container ${a}`;
    if (kind === 'img') return `image '${b}' on storage '${a}'`;
    if (kind === 'name') return `the name '${k.slice(5)}'`;
    return k;
  };

  // ------------------------------------------------------------ move

  async move(a: Req<'lxc_move'>, ctx: NoteSink & { owner: string }): Promise<{ task: TaskRecord }> {
    await this.require(['lxc-info', 'tar']);
    const rec = await this.record(a.id);
    const to = this.pool(a.storage_id);
    if (to.id === rec.storage_id) throw conflict(`container ${a.id} is on storage '${to.id}' already`);
    if (rec.linked_clone) throw conflict(`container ${a.id} is a linked clone of image '${rec.template}' and cannot leave its ZFS pool`);
    const st = await this.state(rec);
    if (st !== 'stopped') throw conflict(`container ${a.id} is ${st}; stop it before moving its rootfs`);
    const from = this.pool(rec.storage_id);
    const task = this.lockedTask([`ct:${a.id}`], 'move', this.label, { kind: 'lxc.move', title: `Move container ${a.id} to storage ${to.id}`, owner: ctx.owner, resource: `lxc/${a.id}` }, async (t) => {
      const fresh = await this.record(a.id);
      if (fresh.storage_id !== from.id) throw conflict(`container ${a.id} moved meanwhile`);
      const fromDir = containerDir(from.path, a.id);
      const toDir = containerDir(to.path, a.id);
      const s = this.d.driver.storage;
      await s.preparePool(to.path);
      if (fresh.idmap) await s.ensureTraversable(path.dirname(toDir), fresh.idmap.uid);
      const total = (await s.treeUsage(fromDir, t.signal)) ?? 0;
      t.log(`moving ${total} bytes from ${from.id} to ${to.id}`);
      const moved: ContainerRecord = { ...fresh, storage_id: to.id, updated_at: now() };
      let how: 'renamed' | 'copied' = 'copied';
      await this.d.records.journal.run(`move:${a.id}`, { op: 'move', lxcid: a.id, from_storage: from.id, to_storage: to.id, from_dir: fromDir, to_dir: toDir }, async () => {
        if (fs.existsSync(toDir)) await s.remove(toDir);
        how = await s.relocate(fromDir, toDir, t.signal, (n) => t.progress(total ? Math.min(95, (n / total) * 95) : 50));
        await this.pauseAt('move.copied');
      }, {
        commit: () => [this.d.records.putOp(moved), ...(how === 'copied' ? [this.cleanupOp([fromDir])] : [])],
        rollback: async () => {
          if (how === 'renamed' || !fs.existsSync(fromDir)) await fsp.rename(toDir, fromDir);
          else await s.remove(toDir);
        },
      });
      await this.renderAndWrite(moved);
      await this.pauseAt('move.committed');
      if (how === 'copied') await this.finishCleanup([fromDir]);
      t.log(`moved (${how})`);
      return { lxcid: a.id, storage_id: to.id };
    });
    ctx.note({ summary: `Moving container ${a.id} '${rec.name}' to storage '${to.id}'`, target: `lxc/${a.id}`, metadata: { task_id: task.task_id, from: rec.storage_id, to: to.id } });
    return { task };
  }

  // ------------------------------------------------------------ exec and stats

  async exec(a: Req<'lxc_exec'>, ctx: NoteSink): Promise<{ lxcid: number } & import('./driver.js').ExecResult> {
    const rec = await this.record(a.id);
    const name = lxcNameOf(a.id);
    let st: StateName | null = (() => {
      const f = this.d.driver.cgroups.fastState(name);
      return f ? stateName(f) : null;
    })();
    if (st === null) {
      await this.require(['lxc-info', 'lxc-attach']);
      st = await this.state(rec);
    }
    if (st === 'frozen') throw conflict(`container ${a.id} is frozen; unfreeze it first`);
    if (st !== 'running') throw conflict(`container ${a.id} is not running (it is ${st})`);
    // A container started before the rules (or whose mount changed since) may hold what exec must not reach.
    await this.refuseViolations(rec, 'run commands');
    // A timer cannot wait longer than 2^31-1 ms (about 24.8 days): longer deadlines are that.
    const timeout = Math.min((a.timeout_seconds || 60) * 1000, 2 ** 31 - 1);
    const r = await this.d.driver.tools.exec(name, a.command, timeout);
    ctx.note({
      summary: r.timed_out ? `Command in container ${a.id} '${rec.name}' killed at its ${Math.round(timeout / 1000)} s deadline` : `Ran a command in container ${a.id} '${rec.name}' (exit ${r.exit_code})`,
      target: `lxc/${a.id}`,
      metadata: { exit_code: r.exit_code, timed_out: r.timed_out, truncated: r.truncated, duration_ms: r.duration_ms },
    });
    return { lxcid: a.id, ...r };
  }

  async stats(lxcid: number) {
    const rec = await this.record(lxcid);
    const name = lxcNameOf(lxcid);
    const state = await this.state(rec);
    const cg = this.d.driver.cgroups;
    const running = state === 'running' || state === 'frozen';
    let cpu: { usage_seconds: number | null; usage_percent: number | null; cores_limit: number } = { usage_seconds: null, usage_percent: null, cores_limit: rec.cpu_cores };
    if (running) {
      const t0 = performance.now();
      const u0 = cg.cpuUsageNs(name);
      await new Promise((r) => setTimeout(r, 200));
      const u1 = cg.cpuUsageNs(name);
      const dt = (performance.now() - t0) * 1e6;
      cpu = {
        usage_seconds: u1 === null ? null : Math.round(u1 / 1e6) / 1000,
        usage_percent: u0 !== null && u1 !== null ? Math.round(((u1 - u0) / dt) * 10000) / 100 : null,
        cores_limit: rec.cpu_cores,
      };
    }
    const mem = running ? cg.memory(name) : { used_bytes: null, limit_bytes: null, cache_bytes: null };
    const net = running ? this.d.driver.tools.network(name) : null;
    const p = this.paths(rec);
    let disk: { used_bytes: number | null; limit_bytes: number | null; total_bytes: number | null; available_bytes: number | null; source: string };
    if (rec.rootfs_kind === 'loop' || rec.rootfs_kind === 'zfs') {
      const sf = running ? await this.d.driver.tools.rootStatfs(name) : null;
      if (sf) disk = { used_bytes: sf.total_bytes - sf.free_bytes, limit_bytes: rec.disk_size_bytes || null, total_bytes: sf.total_bytes, available_bytes: sf.free_bytes, source: 'statfs' };
      else if (rec.rootfs_kind === 'loop') {
        const u = await this.d.driver.storage.imageUsage(p.img);
        disk = { used_bytes: u?.used_bytes ?? null, limit_bytes: rec.disk_size_bytes || null, total_bytes: u?.total_bytes ?? null, available_bytes: u ? u.total_bytes - u.used_bytes : null, source: 'ext4 superblock' };
      } else {
        disk = { used_bytes: await this.d.driver.storage.treeUsage(p.rootfs), limit_bytes: rec.disk_size_bytes || null, total_bytes: null, available_bytes: null, source: 'du' };
      }
    } else {
      disk = { used_bytes: await this.d.driver.storage.treeUsage(p.rootfs), limit_bytes: null, total_bytes: null, available_bytes: null, source: 'du' };
    }
    const ifaces = net?.interfaces ?? [];
    return {
      stats: {
        lxcid,
        state,
        cpu,
        memory: { used_bytes: mem.used_bytes, limit_bytes: mem.limit_bytes ?? (running ? null : rec.memory_mb * 1024 * 1024), cache_bytes: mem.cache_bytes },
        disk,
        network: {
          rx_bytes: ifaces.reduce((n, i) => n + i.rx_bytes, 0),
          tx_bytes: ifaces.reduce((n, i) => n + i.tx_bytes, 0),
          interfaces: ifaces,
          addresses: net?.addresses ?? [],
        },
        pids: running ? cg.pids(name) : 0,
        sampled_at: now(),
      },
    };
  }

  // ------------------------------------------------------------ docs

  async docsGet(lxcid: number) {
    await this.record(lxcid);
    const d = await this.d.records.docs.get(ctKey(lxcid));
    return { lxcid, content: d?.content ?? '', updated_at: d?.updated_at ?? null };
  }

  async docsSet(a: Req<'lxc_docs_set'>, ctx: NoteSink) {
    return this.locks.run([`docs:${a.id}`], async () => {
      await this.record(a.id);
      const t = now();
      const content = nextDocs((await this.d.records.docs.get(ctKey(a.id)))?.content ?? '', a.content, a.append_entry ?? false, t);
      await this.d.records.docs.put(ctKey(a.id), { content, updated_at: t });
      ctx.note({ summary: `${a.append_entry ? 'Appended to' : 'Set'} the documentation of container ${a.id}`, target: `lxc/${a.id}` });
      return { lxcid: a.id, content, updated_at: t };
    });
  }

  // ------------------------------------------------------------ images

  private async dependents(storageId: string, imageId: string): Promise<number[]> {
    return (await this.d.records.all()).filter((r) => r.linked_clone && r.template === imageId && r.template_storage_id === storageId).map((r) => r.lxcid);
  }

  private async imageView(ref: ImageRef): Promise<ImageView> {
    const m = ref.meta;
    return {
      image_id: m.image_id, storage_id: ref.storage_id, source: m.source, size_bytes: m.size_bytes, sha256: m.sha256, compression: m.compression,
      created_at: m.created_at, os: m.os ?? null, release: m.release ?? null, arch: m.arch ?? null, variant: m.variant ?? null, version: m.version ?? null,
      from_lxcid: m.from_lxcid ?? null, used_by: await this.dependents(ref.storage_id, m.image_id),
    };
  }

  async imagesList() {
    const refs = await this.d.driver.images.list();
    return { images: await Promise.all(refs.map((r) => this.imageView(r))) };
  }

  private async fetchJson(url: string): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(url, { signal: AbortSignal.timeout(20_000) });
    } catch (err) {
      throw unavailable(`cannot reach the image server: ${(err as Error).message}`);
    }
    if (!res.ok) throw unavailable(`the image server answered ${res.status} for ${new URL(url).pathname}`);
    try {
      return await res.json();
    } catch {
      throw unavailable(`the image server sent something that is not JSON at ${new URL(url).pathname}`);
    }
  }

  private async catalog(): Promise<{ server: string; entries: CatalogEntry[] }> {
    const server = this.d.settings.imageServer;
    if (!server) throw unavailable(NO_SERVER);
    if (this.catalogCache && this.catalogCache.server === server && Date.now() - this.catalogCache.at < 30_000) return this.catalogCache;
    try {
      const index = await this.fetchJson(fileUrl(server, 'streams/v1/index.json'));
      const entries: CatalogEntry[] = [];
      for (const p of productPaths(index)) entries.push(...catalogEntries(await this.fetchJson(fileUrl(server, p)), streamArch(process.arch)));
      this.catalogCache = { at: Date.now(), server, entries };
      return this.catalogCache;
    } catch (err) {
      if (err instanceof StreamFormatError) throw unavailable(`the image server's index is not usable: ${err.message}`);
      throw err;
    }
  }

  async imagesCatalog() {
    if (!this.d.settings.imageServer) return { server: null, images: [], reason: NO_SERVER };
    const { server, entries } = await this.catalog();
    const cached = await this.d.driver.images.list();
    return {
      server,
      images: entries.map((e) => ({
        image_id: e.image_id, product: e.product, os: e.os, release: e.release, arch: e.arch, variant: e.variant, version: e.version,
        aliases: e.aliases, size_bytes: e.size_bytes, sha256: e.sha256,
        cached_on: cached.filter((c) => c.meta.image_id === e.image_id).map((c) => c.storage_id),
      })),
    };
  }

  async imagesDownload(a: Req<'lxc_images_download'>, ctx: NoteSink & { owner: string }): Promise<{ task: TaskRecord }> {
    const id = checkImageId(a.image_id);
    const pool = this.pool(a.storage_id ?? this.d.settings.imageStorage);
    if (!this.d.settings.imageServer) throw notFound(`image '${id}' is not in the catalog: ${NO_SERVER}`);
    const { server, entries } = await this.catalog();
    const entry = entries.find((e) => e.image_id === id);
    if (!entry) throw notFound(`image '${id}' is not in the catalog of ${server}`);
    if (await this.d.driver.images.get(pool, id)) throw conflict(`image '${id}' is on storage '${pool.id}' already`);
    let url: string;
    try {
      url = fileUrl(server, entry.file.path);
    } catch (err) {
      throw unavailable(`the image server's index is not usable: ${(err as Error).message}`);
    }
    const task = this.lockedTask([`img:${pool.id}:${id}`], 'download', this.label, { kind: 'lxc.image.download', title: `Download LXC image ${id} to ${pool.id}`, owner: ctx.owner, resource: `lxc/images/${id}` }, async (t) => {
      return this.stageImage(pool, id, t, async (work) => {
        const file = path.join(work, 'rootfs' + (entry.file.ftype.match(/\.tar(\.\w+)?$/)?.[0] ?? '.tar.xz'));
        t.log(`downloading ${new URL(url).pathname} (${entry.size_bytes} bytes, SHA-256 ${entry.sha256})`);
        let last = -1;
        await this.d.driver.images.download(url, file, { sha256: entry.sha256, size: entry.size_bytes }, t.signal, (n, total) => {
          const pct = Math.floor((n / Math.max(1, total)) * 95);
          if (pct !== last) {
            last = pct;
            t.progress(pct);
          }
        });
        t.log('checksum verified');
        const comp = compressionOf(await readHead(file));
        if (!comp) throw new Error('the downloaded file is not a tar archive');
        return {
          image_id: id, source: 'download', file: path.basename(file), compression: comp, size_bytes: entry.size_bytes, sha256: entry.sha256, created_at: now(),
          os: entry.os, release: entry.release, arch: entry.arch, variant: entry.variant, version: entry.version, product: entry.product,
        };
      }, 'download.fetched');
    });
    ctx.note({ summary: `Downloading LXC image '${id}' to storage '${pool.id}'`, target: `lxc/images/${id}`, metadata: { task_id: task.task_id, storage_id: pool.id } });
    return { task };
  }

  /**
   * Fills a work dir in the pool (through `fill`), writes image.json and
   * renames it into place; the intent lets recovery remove a half-filled one.
   */
  private async stageImage(pool: PoolConfig, id: string, t: TaskHandle, fill: (work: string) => Promise<ImageMeta>, pauseStep: string): Promise<{ image_id: string; storage_id: string }> {
    const s = this.d.driver.storage;
    await s.preparePool(pool.path);
    const work = await s.makeTmp(pool.path);
    const final = this.d.driver.images.dirOf(pool, id);
    await this.d.records.journal.run(`image:${pool.id}:${id}`, { op: 'image', tmp: work, final }, async () => {
      const meta = await fill(work);
      await this.d.driver.images.writeMeta(work, meta);
      await this.pauseAt(pauseStep);
      try {
        await this.d.driver.images.install(work, pool, id);
      } catch (err) {
        if (errnoCode(err) === 'EEXIST' || errnoCode(err) === 'ENOTEMPTY') throw conflict(`image '${id}' appeared on storage '${pool.id}' meanwhile`);
        throw err;
      }
    }, { commit: () => [], rollback: async () => s.remove(work) });
    t.progress(100);
    t.log(`image ${id} is on storage ${pool.id}`);
    return { image_id: id, storage_id: pool.id };
  }

  /** hostctl lxc image import: a local rootfs tarball into a pool, as a task. */
  async imagesImport(body: Record<string, unknown>): Promise<{ task: TaskRecord }> {
    const src = body.path;
    if (typeof src !== 'string' || !path.isAbsolute(src)) throw badRequest("argument 'path' must be an absolute path to a rootfs tarball");
    if (typeof body.image_id !== 'string') throw badRequest("argument 'image_id' is required");
    const id = checkImageId(body.image_id);
    if (body.storage_id !== undefined && typeof body.storage_id !== 'string') throw badRequest("argument 'storage_id' must be a string");
    const pool = this.pool((body.storage_id as string | undefined) ?? this.d.settings.imageStorage);
    try {
      if (!(await fsp.stat(src)).isFile()) throw badRequest(`'${src}' is not a regular file`);
    } catch (err) {
      if (err instanceof ApiError) throw err;
      throw badRequest(`cannot read '${src}'`);
    }
    if (await this.d.driver.images.get(pool, id)) throw conflict(`image '${id}' is on storage '${pool.id}' already`);
    const task = this.lockedTask([`img:${pool.id}:${id}`], 'import', this.label, { kind: 'lxc.image.import', title: `Import LXC image ${id} to ${pool.id}`, owner: 'local-admin', resource: `lxc/images/${id}` }, async (t) => {
      return this.stageImage(pool, id, t, async (work) => {
        t.log(`copying ${src}`);
        let last = -1;
        const b = await this.d.driver.images.importFile(src, work, t.signal, (n, total) => {
          const pct = Math.floor((n / Math.max(1, total)) * 95);
          if (pct !== last) {
            last = pct;
            t.progress(pct);
          }
        });
        t.log(`${b.size_bytes} bytes, SHA-256 ${b.sha256}`);
        return { image_id: id, source: 'import', ...b, created_at: now() };
      }, 'import.copied');
    });
    return { task };
  }

  async templateCreate(a: Req<'lxc_template_create'>, ctx: NoteSink & { owner: string }): Promise<{ task: TaskRecord }> {
    await this.require(['tar', 'bash', 'lxc-usernsexec', 'lxc-info']);
    const rec = await this.record(a.id);
    const id = a.image_id ? checkImageId(a.image_id) : imageIdFromName(rec.name, rec.lxcid);
    const pool = this.pool(rec.storage_id);
    if (await this.d.driver.images.get(pool, id)) throw conflict(`image '${id}' exists on storage '${pool.id}' already`);
    const st = await this.state(rec);
    if (st !== 'stopped') throw conflict(`container ${a.id} is ${st}; stop it to capture a consistent template`);
    const probe = await this.probe();
    const comp: Compression = probe.programs.find((p) => p.name === 'zstd')?.available ? 'zstd' : 'gzip';
    const task = this.lockedTask([`ct:${a.id}`, `img:${pool.id}:${id}`], 'template capture', this.label, { kind: 'lxc.template', title: `Capture container ${a.id} as image ${id}`, owner: ctx.owner, resource: `lxc/images/${id}` }, async (t) => {
      const fresh = await this.record(a.id);
      if ((await this.state(fresh)) !== 'stopped') throw conflict(`container ${a.id} was started meanwhile`);
      return this.stageImage(pool, id, t, async (work) => {
        const file = path.join(work, comp === 'zstd' ? 'rootfs.tar.zst' : 'rootfs.tar.gz');
        t.log(`packing the rootfs of container ${a.id}`);
        t.progress(5);
        await this.withRootfs(fresh, true, (root) => this.d.driver.storage.pack(root, file, fresh.idmap, comp, t.signal));
        t.progress(90);
        const dg = await this.d.driver.images.digest(file);
        t.log(`${dg.size_bytes} bytes, SHA-256 ${dg.sha256}`);
        return {
          image_id: id, source: 'template', file: path.basename(file), compression: comp, ...dg, created_at: now(),
          from_lxcid: fresh.lxcid, from_name: fresh.name, from_privileged: fresh.privileged,
          min_cpu_cores: fresh.cpu_cores, min_memory_mb: fresh.memory_mb, disk_size_bytes: fresh.disk_size_bytes || undefined,
        };
      }, 'template.packed');
    });
    ctx.note({ summary: `Capturing container ${a.id} '${rec.name}' as image '${id}'`, target: `lxc/images/${id}`, metadata: { task_id: task.task_id, storage_id: pool.id } });
    return { task };
  }

  private async imageInUse(storageId: string, id: string): Promise<void> {
    const key = `img:${storageId}:${id}`;
    const busy = this.locks.busy(key);
    if (busy) throw conflict(`image '${id}' on storage '${storageId}' is busy: ${busy} in progress`);
    if (this.imageReaders.get(key)) throw conflict(`image '${id}' on storage '${storageId}' is in use by a container create in progress`);
    const deps = await this.dependents(storageId, id);
    if (deps.length) throw conflict(`image '${id}' on storage '${storageId}' is the base of linked clone(s) ${deps.join(', ')}; delete them first`);
  }

  async imagesDelete(a: Req<'lxc_images_delete'>, ctx: NoteSink) {
    const id = checkImageId(a.image_id);
    const pool = this.pool(a.storage_id);
    const ref = await this.d.driver.images.get(pool, id);
    if (!ref) throw notFound(`image '${id}' not found on storage '${pool.id}'`);
    await this.imageInUse(pool.id, id);
    return this.locks.exclusive([`img:${pool.id}:${id}`], 'delete', async () => {
      const s = this.d.driver.storage;
      const tmp = path.join(tmpRoot(pool.path), `deleted-${crypto.randomBytes(6).toString('hex')}`);
      // One rename takes it out of the list; the rest is clean-up that recovery may finish.
      await fsp.rename(ref.dir, tmp);
      await s.remove(tmp);
      ctx.note({ summary: `Deleted LXC image '${id}' from storage '${pool.id}'`, target: `lxc/images/${id}` });
      return { deleted: { image_id: id, storage_id: pool.id } };
    });
  }

  async imagesMove(a: Req<'lxc_images_move'>, ctx: NoteSink & { owner: string }): Promise<{ task: TaskRecord }> {
    const id = checkImageId(a.image_id);
    const from = this.pool(a.source_storage_id, 'source_storage_id');
    const to = this.pool(a.target_storage_id, 'target_storage_id');
    if (from.id === to.id) throw badRequest("arguments 'source_storage_id' and 'target_storage_id' name the same storage");
    const ref = await this.d.driver.images.get(from, id);
    if (!ref) throw notFound(`image '${id}' not found on storage '${from.id}'`);
    if (await this.d.driver.images.get(to, id)) throw conflict(`image '${id}' exists on storage '${to.id}' already`);
    await this.imageInUse(from.id, id);
    const task = this.lockedTask([`img:${from.id}:${id}`, `img:${to.id}:${id}`], 'move', this.label, { kind: 'lxc.image.move', title: `Move LXC image ${id} from ${from.id} to ${to.id}`, owner: ctx.owner, resource: `lxc/images/${id}` }, async (t) => {
      const s = this.d.driver.storage;
      await s.preparePool(to.path);
      const work = await s.makeTmp(to.path);
      const final = this.d.driver.images.dirOf(to, id);
      const total = ref.meta.size_bytes || 1;
      await this.d.records.journal.run(`image:${to.id}:${id}`, { op: 'image', tmp: work, final, remove_after: ref.dir }, async () => {
        await s.copy(ref.dir, path.join(work, 'img'), t.signal, (n) => t.progress(Math.min(90, (n / total) * 90)));
        await this.pauseAt('image-move.copied');
        await this.d.driver.images.install(path.join(work, 'img'), to, id);
        await s.remove(ref.dir);
        await s.remove(work);
      }, { commit: () => [], rollback: async () => s.remove(work) });
      t.log(`moved image ${id} to ${to.id}`);
      return { image_id: id, storage_id: to.id };
    });
    ctx.note({ summary: `Moving LXC image '${id}' from '${from.id}' to '${to.id}'`, target: `lxc/images/${id}`, metadata: { task_id: task.task_id } });
    return { task };
  }

  // ------------------------------------------------------------ open: recovery, configs, autostart

  /** Settles every open intent by what the disk shows, then clears work dirs and re-renders configs. */
  async recover(): Promise<number> {
    const s = this.d.driver.storage;
    const n = await this.d.records.journal.recover(async (key, intent) => {
      this.d.log.warn({ key, intent: intent.op }, 'lxc: settling an intent left open by the last run');
      switch (intent.op) {
        case 'create':
          // The record is written in the same batch that drops the intent: an open one means no record.
          await this.removeContainerFiles(intent.dir, intent.confDir, intent.zfs_dataset);
          return [];
        case 'delete':
          await this.removeContainerFiles(intent.dir, intent.confDir, intent.zfs_dataset);
          return this.d.records.delOps(intent.lxcid);
        case 'move': {
          const rec = await this.d.records.get(intent.lxcid);
          if (!rec) return [];
          if (!fs.existsSync(intent.from_dir) && fs.existsSync(intent.to_dir)) {
            // It had been renamed (same filesystem): finish the move.
            return [this.d.records.putOp({ ...rec, storage_id: intent.to_storage, updated_at: now() })];
          }
          await s.remove(intent.to_dir);
          return [];
        }
        case 'disk': {
          const rec = await this.d.records.get(intent.lxcid);
          if (!rec) return [];
          if (intent.new_path === intent.old_path) {
            await s.growDiskImage(intent.new_path, intent.disk_size_bytes);
            return [this.d.records.putOp({ ...rec, disk_size_bytes: intent.disk_size_bytes, updated_at: now() })];
          }
          if (fs.existsSync(intent.new_path)) {
            await s.remove(intent.new_path);
            return [];
          }
          // The new rootfs had been renamed into place: finish.
          const finalPath = intent.new_kind === 'loop' ? path.join(intent.dir, 'disk.img') : path.join(intent.dir, 'rootfs');
          if (fs.existsSync(finalPath)) {
            if (intent.old_path !== finalPath) await s.remove(intent.old_path);
            return [this.d.records.putOp({ ...rec, rootfs_kind: intent.new_kind, disk_size_bytes: intent.disk_size_bytes, updated_at: now() })];
          }
          return [];
        }
        case 'cleanup':
          for (const p of intent.paths) await s.remove(p);
          for (const ds of intent.zfs_datasets ?? []) await this.d.driver.zfs.destroy(ds);
          return [];
        case 'image':
          if (fs.existsSync(intent.final) && intent.remove_after) await s.remove(intent.remove_after);
          await s.remove(intent.tmp);
          return [];
      }
    });
    for (const pool of this.d.pools) {
      const tr = tmpRoot(pool.path);
      let names: string[] = [];
      try {
        names = await fsp.readdir(tr);
      } catch {
        continue;
      }
      for (const nme of names) await s.remove(path.join(tr, nme)).catch((err) => this.d.log.error({ err, dir: path.join(tr, nme) }, 'lxc: cannot remove a work dir'));
    }
    return n;
  }

  /** Re-renders every config from its record (records are the truth) and reports orphans. */
  async syncConfigs(): Promise<void> {
    const recs = await this.d.records.all();
    const names = new Set(recs.map((r) => lxcNameOf(r.lxcid)));
    for (const r of recs) {
      try {
        await this.renderAndWrite(r);
      } catch (err) {
        this.d.log.error({ err, lxcid: r.lxcid }, 'lxc: cannot write a container config');
      }
    }
    for (const dir of await this.d.driver.tools.listConfigDirs()) {
      if (dir.startsWith(LXC_NAME_PREFIX) && !names.has(dir)) this.d.log.warn({ dir }, 'lxc: a config dir under the lxc path has no record (left as it is)');
    }
  }

  /**
   * Starts autostart containers once per host boot: the boot id of the last
   * start is stored, so a daemon restart (same boot) starts nothing and never
   * undoes a stop the user asked for.
   */
  startAutostart(bootId: string): void {
    this.background = (async () => {
      const last = await this.d.records.meta.get('boot_id').catch(() => undefined);
      if (last === bootId) return;
      for (const r of await this.d.records.all()) {
        if (!r.autostart) continue;
        try {
          await this.start(r.lxcid, { note() {} });
          this.d.log.info({ lxcid: r.lxcid }, 'lxc: autostarted at boot');
        } catch (err) {
          this.d.log.error({ err, lxcid: r.lxcid }, 'lxc: autostart failed');
        }
      }
      await this.d.records.meta.put('boot_id', bootId);
    })().catch((err) => this.d.log.error({ err }, 'lxc: autostart pass failed'));
  }

  /**
   * Removes this hostd's cgroup directories that nothing uses (LXC leaves the
   * group's own directory in every hierarchy, a crash may leave more).
   * Called at open (stale ones of an earlier run) and at close; directories of
   * running containers stay.
   */
  pruneCgroups(): void {
    try {
      const removed = this.d.driver.cgroups.pruneGroup();
      if (removed.length) this.d.log.info({ removed: removed.length }, 'lxc: removed unused cgroup directories');
    } catch (err) {
      this.d.log.warn({ err }, 'lxc: cannot remove unused cgroup directories');
    }
  }

  async close(): Promise<void> {
    await this.background;
    this.pruneCgroups();
  }
}

/**
 * Whether a Linux security module confines the containers: hostd gives them
 * LXC's generated AppArmor profile where the kernel has AppArmor, and sets no
 * SELinux context (an SELinux host runs them in hostd's own domain). Without
 * one, an unprivileged container holds on its user namespace, capability
 * drops and seccomp alone, and a privileged one on nothing.
 */
export function lsmStatus(p: Pick<HostProbe, 'apparmor' | 'selinux'>) {
  const confines = p.apparmor;
  return {
    apparmor: p.apparmor,
    selinux: p.selinux,
    confines_containers: confines,
    profile: confines ? 'generated' : 'unconfined',
    note: confines
      ? "containers run under LXC's generated AppArmor profile"
      : 'no security module confines containers here: unprivileged containers rely on their user namespace, dropped capabilities and seccomp; a privileged container is root on the host',
  };
}

/**
 * Whether `name` is a bridge in hostd's network namespace: /sys/class/net says
 * so at once; when it does not (sysfs mounted for another namespace, as under
 * nsenter), `ip -d link` asks the kernel of this namespace.
 */
export async function bridgeExists(name: string): Promise<boolean> {
  try {
    if (fs.statSync(`/sys/class/net/${name}/bridge`).isDirectory()) return true;
  } catch {
    /* ask ip */
  }
  try {
    const r = await run('ip', ['-d', '-j', 'link', 'show', 'dev', name], { timeoutMs: 10_000, okCodes: [0, 1, 255] });
    if (r.code !== 0) return false;
    const links = JSON.parse(r.stdout) as Array<{ linkinfo?: { info_kind?: string } }>;
    return links.some((l) => l.linkinfo?.info_kind === 'bridge');
  } catch {
    return false;
  }
}

