/**
 * What the LXC service needs from the runtime, in five parts: the LXC tools
 * (lifecycle, exec, config files), cgroup readings, rootfs storage on the
 * pools, the image files, and ZFS for linked clones. lxc/ implements them on
 * the real programs; nothing here knows of tokens, HTTP or the activity log.
 */
import type { Availability } from '../lib/availability.js';
import type { PoolConfig } from '../config.js';
import type { ExecResult } from '../lib/exec-output.js';
import type { IdRange } from './settings.js';

export type LxcState = 'STOPPED' | 'STARTING' | 'RUNNING' | 'STOPPING' | 'ABORTING' | 'FREEZING' | 'FROZEN' | 'THAWED';

/** One answer for every exec (VM, LXC, sandbox): each stream capped, `truncated` when one was cut. */
export type { ExecResult } from '../lib/exec-output.js';

export interface NetCounters {
  name: string;
  rx_bytes: number;
  rx_packets: number;
  tx_bytes: number;
  tx_packets: number;
}

export interface ContainerTools {
  readonly lxcPath: string;
  confDir(lxcName: string): string;
  logFile(lxcName: string): string;
  /** Atomic write; false when the file already had this text. */
  writeConfig(lxcName: string, text: string): Promise<boolean>;
  removeConfig(lxcName: string): Promise<void>;
  listConfigDirs(): Promise<string[]>;
  info(lxcName: string): Promise<{ state: LxcState | null; pid: number | null; ips: string[] }>;
  state(lxcName: string): Promise<LxcState>;
  start(lxcName: string): Promise<void>;
  stop(lxcName: string, timeoutS: number): Promise<void>;
  freeze(lxcName: string): Promise<void>;
  unfreeze(lxcName: string): Promise<void>;
  setCgroup(lxcName: string, key: string, value: string): Promise<void>;
  exec(lxcName: string, command: string, timeoutMs: number): Promise<ExecResult>;
  network(lxcName: string): { interfaces: NetCounters[]; addresses: string[] } | null;
  rootStatfs(lxcName: string): Promise<{ total_bytes: number; free_bytes: number } | null>;
}

export interface CgroupFigures {
  readonly layout: { version: 'v1' | 'hybrid' | 'v2' };
  /** RUNNING/FROZEN from cgroup files; null when they say nothing. */
  fastState(lxcName: string): 'RUNNING' | 'FROZEN' | null;
  procs(lxcName: string): number[];
  cpuUsageNs(lxcName: string): number | null;
  memory(lxcName: string): { used_bytes: number | null; limit_bytes: number | null; cache_bytes: number | null };
  pids(lxcName: string): number | null;
  cpuLimitKeys(cores: number, periodUs: number): Array<[string, string]>;
  memoryLimitKeys(mb: number): Array<[string, string]>;
  /** Removes this hostd's cgroup directories that no process uses (every hierarchy); returns those removed. */
  pruneGroup(): string[];
}

export type Compression = 'xz' | 'gzip' | 'zstd' | 'none';

export interface RootfsStorage {
  preparePool(poolPath: string): Promise<void>;
  ensureTraversable(dir: string, uid: number): Promise<void>;
  makeTmp(poolPath: string): Promise<string>;
  unpack(tarball: string, dir: string, idmap: IdRange | null, signal?: AbortSignal): Promise<void>;
  pack(rootfs: string, out: string, idmap: IdRange | null, comp: Compression, signal?: AbortSignal): Promise<void>;
  makeDiskImage(img: string, bytes: number, idmap: IdRange | null): Promise<void>;
  growDiskImage(img: string, bytes: number): Promise<void>;
  loopUsers(img: string): string[];
  waitImageFree(img: string, timeoutMs?: number): Promise<void>;
  withMounted<T>(img: string, tmpBase: string, readOnly: boolean, fn: (root: string) => Promise<T>): Promise<T>;
  imageUsage(img: string): Promise<{ total_bytes: number; used_bytes: number } | null>;
  treeUsage(dir: string, signal?: AbortSignal): Promise<number | null>;
  copy(src: string, dst: string, signal?: AbortSignal, onProgress?: (bytes: number) => void): Promise<void>;
  relocate(src: string, dst: string, signal?: AbortSignal, onProgress?: (bytes: number) => void): Promise<'renamed' | 'copied'>;
  remove(p: string): Promise<void>;
  writeGuestFile(rootfs: string, rel: string, content: string | Buffer, mode: number, idmap: IdRange | null): Promise<void>;
  readGuestFile(rootfs: string, rel: string): Promise<string | null>;
  guestHasDir(rootfs: string, rel: string): Promise<boolean>;
  removeGuestFileIfManaged(rootfs: string, rel: string, mark: string): Promise<void>;
  fsType(p: string): Promise<number | null>;
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

export interface ImageFiles {
  dirOf(pool: PoolConfig, imageId: string): string;
  get(pool: PoolConfig, imageId: string): Promise<ImageRef | null>;
  list(): Promise<ImageRef[]>;
  find(imageId: string, storageId?: string | null): Promise<ImageRef | null>;
  writeMeta(workDir: string, meta: ImageMeta): Promise<void>;
  install(workDir: string, pool: PoolConfig, imageId: string): Promise<string>;
  download(url: string, dest: string, want: { sha256: string; size: number }, signal: AbortSignal, progress: (bytes: number, total: number) => void): Promise<void>;
  importFile(src: string, workDir: string, signal: AbortSignal, progress: (bytes: number, total: number) => void): Promise<Pick<ImageMeta, 'file' | 'compression' | 'size_bytes' | 'sha256'>>;
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

export interface HostProbe {
  programs: Availability[];
  lxcVersion: string | null;
  cgroups: { version: 'v1' | 'hybrid' | 'v2'; controllers: string[] };
  cgroupMissing: string[];
  apparmor: boolean;
  /** SELinux mode, or null when the kernel has none. */
  selinux: 'enforcing' | 'permissive' | null;
  idmap: { ready: boolean; uid_range: { start: number; count: number } | null; gid_range: { start: number; count: number } | null; reason: string | null };
  /** The id range unprivileged containers get (null when not ready). */
  idrange: IdRange | null;
}

export interface LxcDriver {
  tools: ContainerTools;
  cgroups: CgroupFigures;
  storage: RootfsStorage;
  images: ImageFiles;
  zfs: ZfsOps;
  probe(): Promise<HostProbe>;
  /** The cgroup paths (relative to each hierarchy's root) the container's config names. */
  cgroupDirs(lxcid: number): { container: string; monitor: string };
}
