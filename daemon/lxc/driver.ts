/**
 * What the LXC service needs from its runtime: one interface, grouped by
 * concern (host facts and availability, the lxc-* tools, cgroup figures,
 * mount points pinned for a start, rootfs storage, image files and the image
 * server, ZFS). The types are the domain's; lxc-tools/ implements them on the
 * real programs and files. Nothing here knows of tokens, HTTP or the
 * activity log.
 */
import type { Availability, RuntimeDriver } from '../lib/availability.js';
import type { ExecResult } from '../lib/exec-output.js';
import type { PoolConfig } from '../config.js';
import type { ContainerRecord, MountPoint, RootfsKind } from './model.js';
import type { IdRange } from './settings.js';

/** One answer for every exec (VM, LXC, sandbox): each stream capped, `truncated` when one was cut. */
export type { ExecResult } from '../lib/exec-output.js';

export type LxcState = 'STOPPED' | 'STARTING' | 'RUNNING' | 'STOPPING' | 'ABORTING' | 'FREEZING' | 'FROZEN' | 'THAWED';

export type CgroupVersion = 'v1' | 'hybrid' | 'v2';

export type Compression = 'xz' | 'gzip' | 'zstd' | 'none';

export interface NetCounters {
  name: string;
  rx_bytes: number;
  rx_packets: number;
  tx_bytes: number;
  tx_packets: number;
}

/** What the host has for containers, beyond its programs. */
export interface HostFacts {
  programs: Availability[];
  lxcVersion: string | null;
  cgroups: { version: CgroupVersion; controllers: string[] };
  /** Controllers containers need that are not mounted. */
  cgroupMissing: string[];
  apparmor: boolean;
  /** SELinux mode, or null when the kernel has none. */
  selinux: 'enforcing' | 'permissive' | null;
  idmap: { ready: boolean; uid_range: { start: number; count: number } | null; gid_range: { start: number; count: number } | null; reason: string | null };
  /** The id range unprivileged containers get (null when not ready). */
  idrange: IdRange | null;
}

/**
 * Names `availability()` reports besides the programs: `cgroups` (the
 * controllers containers need are mounted) and `idmap` (root owns a
 * subordinate id range for unprivileged containers).
 */
export const CGROUPS = 'cgroups';
export const IDMAP = 'idmap';

/** Where a container's rootfs is: a directory, an ext4 image LXC loop-mounts, or a ZFS clone's mountpoint. */
export interface RootfsPlacement {
  kind: RootfsKind;
  /** The rootfs directory (dir, zfs) or the disk image (loop). */
  path: string;
}

export interface ContainerPaths {
  /** The container's directory in its pool. */
  dir: string;
  rootfs: string;
  img: string;
}

export interface ContainerTools {
  readonly lxcPath: string;
  /** The container's directory under the lxc path (its config, log and mount staging). */
  confDir(lxcName: string): string;
  /** Renders the container's LXC config from its record and writes it atomically; false when it had this text already. */
  writeConfig(rec: ContainerRecord, at: { rootfs: RootfsPlacement; bridge: string | null }): Promise<boolean>;
  /** Removes the container's directory under the lxc path (unmounting anything still staged there first). */
  removeConfig(lxcName: string): Promise<void>;
  listConfigDirs(): Promise<string[]>;
  info(lxcName: string): Promise<{ state: LxcState | null; pid: number | null; ips: string[] }>;
  /** Cgroup files first (no program run), lxc-info when they say nothing. */
  state(lxcName: string): Promise<LxcState>;
  start(lxcName: string): Promise<void>;
  stop(lxcName: string, timeoutS: number): Promise<void>;
  freeze(lxcName: string): Promise<void>;
  unfreeze(lxcName: string): Promise<void>;
  /** Applies CPU and memory limits to a running container. */
  setLimits(lxcName: string, limits: { cpuCores?: number; memoryMb?: number }): Promise<void>;
  exec(lxcName: string, command: string, timeoutMs: number): Promise<ExecResult>;
  network(lxcName: string): { interfaces: NetCounters[]; addresses: string[] } | null;
  rootStatfs(lxcName: string): Promise<{ total_bytes: number; free_bytes: number } | null>;
}

export interface CgroupFigures {
  /** RUNNING/FROZEN from cgroup files; null when they say nothing. */
  fastState(lxcName: string): 'RUNNING' | 'FROZEN' | null;
  procs(lxcName: string): number[];
  cpuUsageNs(lxcName: string): number | null;
  memory(lxcName: string): { used_bytes: number | null; limit_bytes: number | null; cache_bytes: number | null };
  pids(lxcName: string): number | null;
  /** Bytes the container read from and wrote to block devices (null when its cgroup says nothing). */
  ioBytes(lxcName: string): { read_bytes: number; written_bytes: number } | null;
  /** Removes this hostd's cgroup directories that no process uses (every hierarchy); returns those removed. */
  pruneGroup(): string[];
}

/**
 * A container's mount points held open for one start. `pin` opens each host
 * path (never following a symlink in its last component) and says where the
 * descriptor really leads, for the rule to judge; `stage` bind-mounts each
 * descriptor (not the path, which a guest may have swapped since) on the
 * entry the config names; `release` undoes both once LXC has mounted them.
 */
export interface PinnedMount {
  mount: MountPoint;
  /** Where the opened descriptor leads (symlinks resolved), or null when nothing is there. */
  real: string | null;
  /** Why it cannot be mounted even if the rule allows the place (not a directory or a regular file). */
  problem: string | null;
}

export interface PinnedMounts {
  readonly pins: PinnedMount[];
  stage(): Promise<void>;
  release(): Promise<void>;
}

export interface MountStaging {
  pin(lxcName: string, mounts: MountPoint[]): Promise<PinnedMounts>;
  /** Unmounts staging entries a crash left mounted (at open). */
  clearStale(): Promise<void>;
}

export interface RootfsStorage {
  /** Where container `lxcid` lives in a pool. */
  containerPaths(poolPath: string, lxcid: number): ContainerPaths;
  /** Where the base dataset of image `imageId` is mounted on a ZFS pool. */
  zfsImageMount(poolPath: string, imageId: string): string;
  preparePool(poolPath: string): Promise<void>;
  makeContainerDir(dir: string): Promise<void>;
  ensureTraversable(dir: string, uid: number): Promise<void>;
  makeTmp(poolPath: string): Promise<string>;
  /** Empties the pool's work directory (at open: nothing runs yet). */
  clearWorkDirs(poolPath: string): Promise<void>;
  unpack(tarball: string, dir: string, idmap: IdRange | null, signal?: AbortSignal): Promise<void>;
  pack(rootfs: string, out: string, idmap: IdRange | null, comp: Compression, signal?: AbortSignal): Promise<void>;
  makeDiskImage(img: string, bytes: number, idmap: IdRange | null): Promise<void>;
  growDiskImage(img: string, bytes: number): Promise<void>;
  waitImageFree(img: string, timeoutMs?: number): Promise<void>;
  withMounted<T>(img: string, tmpBase: string, readOnly: boolean, fn: (root: string) => Promise<T>): Promise<T>;
  /** Runs `fn` on a stopped container's rootfs (mounting its disk image when it has one). */
  withRootfs<T>(poolPath: string, at: RootfsPlacement, readOnly: boolean, fn: (root: string) => Promise<T>): Promise<T>;
  imageUsage(img: string): Promise<{ total_bytes: number; used_bytes: number } | null>;
  treeUsage(dir: string, signal?: AbortSignal): Promise<number | null>;
  copy(src: string, dst: string, signal?: AbortSignal, onProgress?: (bytes: number) => void): Promise<void>;
  relocate(src: string, dst: string, signal?: AbortSignal, onProgress?: (bytes: number) => void): Promise<'renamed' | 'copied'>;
  rename(from: string, to: string): Promise<void>;
  exists(p: string): Promise<boolean>;
  /** Removes a path, unmounting anything below it first. */
  remove(p: string): Promise<void>;
  writeGuestFile(rootfs: string, rel: string, content: string | Buffer, mode: number, idmap: IdRange | null): Promise<void>;
  readGuestFile(rootfs: string, rel: string): Promise<string | null>;
  guestHasDir(rootfs: string, rel: string): Promise<boolean>;
  removeGuestFileIfManaged(rootfs: string, rel: string, mark: string): Promise<void>;
  /** Whether the path is on ZFS. */
  isZfs(p: string): Promise<boolean>;
}

export interface ImageMeta {
  image_id: string;
  source: 'download' | 'import' | 'template';
  file: string;
  compression: Compression;
  size_bytes: number;
  sha256: string;
  created_at: string;
  os?: string | null;
  release?: string | null;
  arch?: string | null;
  variant?: string | null;
  version?: string | null;
  product?: string | null;
  from_lxcid?: number;
  from_name?: string;
  from_privileged?: boolean;
  min_cpu_cores?: number;
  min_memory_mb?: number;
  disk_size_bytes?: number;
}

export interface ImageRef {
  meta: ImageMeta;
  storage_id: string;
  dir: string;
  file: string;
}

/** A downloadable image of the image server's catalog (this host's architecture). */
export interface CatalogEntry {
  image_id: string;
  product: string;
  os: string | null;
  release: string | null;
  arch: string | null;
  variant: string | null;
  version: string;
  aliases: string[];
  size_bytes: number;
  sha256: string;
  /** The rootfs tarball, relative to the server. */
  file: { path: string; sha256: string; size: number; ftype: string };
}

export interface ImageFiles {
  dirOf(pool: PoolConfig, imageId: string): string;
  get(pool: PoolConfig, imageId: string): Promise<ImageRef | null>;
  list(): Promise<ImageRef[]>;
  find(imageId: string, storageId?: string | null): Promise<ImageRef | null>;
  writeMeta(workDir: string, meta: ImageMeta): Promise<void>;
  /** Renames a finished work dir into place; EEXIST/ENOTEMPTY when the id is taken meanwhile. */
  install(workDir: string, pool: PoolConfig, imageId: string): Promise<string>;
  /** Takes the image out of the list (one rename), then removes its files. */
  remove(ref: ImageRef, pool: PoolConfig): Promise<void>;
  /** The server's catalog (cached briefly); 503 when the server cannot be read or its index is unusable. */
  catalog(server: string): Promise<CatalogEntry[]>;
  /** The URL of an entry's tarball; 503 when the index names a file outside the server. */
  fileUrl(server: string, entry: CatalogEntry): string;
  /** Downloads into `dest`, checking size and SHA-256; the tarball's compression. */
  download(
    url: string,
    dest: string,
    want: { sha256: string; size: number },
    signal: AbortSignal,
    progress: (bytes: number, total: number) => void,
  ): Promise<Compression>;
  /** 400 unless `src` is a regular file hostd can read (before an import starts). */
  checkSource(src: string): Promise<void>;
  importFile(
    src: string,
    workDir: string,
    signal: AbortSignal,
    progress: (bytes: number, total: number) => void,
  ): Promise<Pick<ImageMeta, 'file' | 'compression' | 'size_bytes' | 'sha256'>>;
  digest(file: string): Promise<{ sha256: string; size_bytes: number }>;
}

export interface ZfsOps {
  datasetOf(poolPath: string): Promise<string>;
  exists(dataset: string): Promise<boolean>;
  snapshotExists(snap: string): Promise<boolean>;
  create(dataset: string, mountpoint: string): Promise<void>;
  snapshot(snap: string): Promise<void>;
  clone(snap: string, dataset: string, mountpoint: string, refquota: number): Promise<void>;
  setRefquota(dataset: string, bytes: number): Promise<void>;
  destroy(dataset: string): Promise<void>;
}

/**
 * What the runtime says happened to a container, nobody's call needed: a
 * state it passed through (`state`), with its init's exit status when LXC
 * sent one before STOPPED. A hint: the service reads the state itself.
 */
export interface StateSignal {
  lxcName: string;
  state: LxcState;
  exitStatus?: number;
}

/** A running watch on the containers; `stop` ends it and what it started. */
export interface StateWatch {
  stop(): Promise<void>;
}

export interface LxcDriver extends RuntimeDriver {
  // Host: what it has (from the same short cache as availability()), and its bridges.
  host(opts?: { fresh?: boolean }): Promise<HostFacts>;
  bridgeExists(name: string): Promise<boolean>;
  // Containers: the lxc-* tools, on hostd's own lxc path.
  readonly tools: ContainerTools;
  // State and usage from cgroup files (no program run).
  readonly cgroups: CgroupFigures;
  // Mount points pinned by descriptor for a start.
  readonly mounts: MountStaging;
  // Rootfs storage on the pools.
  readonly storage: RootfsStorage;
  // Template images on the pools, and the image server.
  readonly images: ImageFiles;
  // Linked clones on ZFS pools.
  readonly zfs: ZfsOps;
  /**
   * Watches hostd's containers for state changes (LXC's own monitor): each
   * change goes to `onSignal`; `onResync` when the watch had to start again
   * (changes meanwhile are unknown: check every container).
   */
  watchStates(onSignal: (s: StateSignal) => void, onResync: () => void): Promise<StateWatch>;
}
