/**
 * What the VM service needs from its runtime, in the domain's own types: the
 * QEMU implementation (`qemu/index.ts`) implements this interface and the
 * service knows nothing of QMP, the agent protocol, qemu-img, debugfs or the
 * seed's file format. Machines are addressed by a `MachineRef` (name and run
 * directory), disks by absolute file paths the service chose. Grouped by
 * concern: the host, machines, the guest agent, disk files, identity and
 * cloud-init.
 */
import type { Availability, RuntimeDriver } from '../lib/availability.js';
import type { ExecResult } from '../lib/exec-output.js';

export type { ExecResult };

// ---------------------------------------------------------------- the host

export type Accel = 'kvm' | 'tcg';

export interface AccelInfo {
  accel: Accel;
  /** Why TCG (software emulation) is used, or null under KVM. */
  reason: string | null;
}
export interface HostProbe {
  accel: AccelInfo;
  programs: Availability[];
  fuse: Availability;
}
export interface HostResources {
  cpuCores: number;
  memoryTotalMb: number;
  memoryAvailableMb: number;
}

// ---------------------------------------------------------------- machines

export type NetSpec =
  | { type: 'user'; mac: string; sshPort: number; restrict: boolean }
  | { type: 'bridged'; mac: string; bridge: string; ifupScript: string }
  | { type: 'none' };
export interface DiskSpec {
  /** Device id suffix and block node name: `disk-<id>`. */
  id: string;
  file: string;
  /** PCI slot (0x08-0x1f). */
  slot: number;
}
export interface MachineSpec {
  /** `vm-<vmid>`. */
  name: string;
  uuid: string;
  accel: Accel;
  cpuCores: number;
  memoryMb: number;
  /** Absolute directory of the QMP and agent sockets, pidfile and serial log. */
  runDir: string;
  /** Absolute path of the root disk's active layer. */
  rootFile: string;
  disks: DiskSpec[];
  /** Absolute path of the NoCloud seed ISO, or null for an empty CD-ROM drive. */
  seedIso: string | null;
  net: NetSpec;
  /**
   * The VM generation ID (a UUID) of the machine's `vmgenid` device, or null
   * for no device: only to resume memory saved by a machine that had none
   * (a resume needs the device set the memory was saved with).
   */
  generationId: string | null;
  /** Absolute path of a saved memory state to resume from. */
  incoming?: string;
  /** TCG translation cache size in MiB (QEMU's default when omitted). */
  tcgTbSizeMb?: number;
}

export interface MachineRef {
  /** `vm-<vmid>`: also the process tag `hostd-vm-<vmid>`. */
  name: string;
  runDir: string;
}
/**
 * What a machine's watch reports: QMP's run-state events as QEMU sends them
 * (`SHUTDOWN`, `STOP`, `RESUME`), and the process's end with why, as far as
 * hostd can tell (`guest-shutdown`: the guest powered itself off; `host-*`:
 * QEMU's own reason for a quit or signal from the host; `crashed`: the
 * process ended without a SHUTDOWN event, e.g. killed with SIGKILL). QEMU
 * runs daemonized (it outlives hostd), so its exit status is not hostd's to read.
 */
export type MachineEvent = { type: 'qmp'; event: 'SHUTDOWN' | 'STOP' | 'RESUME'; data: Record<string, unknown> } | { type: 'exit'; reason: string };

export type MachineStatus =
  | { running: false }
  /** `status` is QEMU's run state: running, paused, postmigrate, inmigrate, shutdown, ... or `unknown` when QMP does not answer. */
  | { running: true; pid: number; status: string };

/**
 * What a running machine has used since its process started, for the
 * metrics' per-VM series (read when scraped, never on another call's path).
 * null: the runtime does not give that figure here.
 */
export interface MachineUsage {
  /** CPU time of the QEMU process (utime + stime): the guest's vCPUs and QEMU's own device emulation. */
  cpuSeconds: number;
  /**
   * Resident memory of the QEMU process: the guest RAM it has touched, plus
   * QEMU's own (under TCG, its translation cache). Not the balloon's figure:
   * the machines have no balloon device, and a guest's own word on its
   * free memory is not the host's cost.
   */
  memoryBytes: number;
  /** Bytes the guest read from and wrote to its block devices (QMP `query-blockstats`, summed over its disks and the seed CD-ROM). */
  diskReadBytes: number | null;
  diskWrittenBytes: number | null;
  /**
   * Bytes the guest's network card received and sent: on a tap (bridged),
   * the host end's counters turned round (what the tap sends, the guest
   * receives); null on user-mode NAT, whose QEMU keeps no byte counters it
   * reports, and without a network.
   */
  networkReceivedBytes: number | null;
  networkTransmittedBytes: number | null;
}

// ---------------------------------------------------------------- the guest agent

/** The agent answered with an error. */
export class AgentError extends Error {
  constructor(
    readonly command: string,
    readonly cls: string,
    desc: string,
  ) {
    super(`guest agent ${command}: ${desc}`);
    this.name = 'AgentError';
  }
}
/** The agent did not answer (not installed, not started yet, or hung). */
export class AgentTimeout extends Error {
  constructor(msg: string) {
    super(msg);
    this.name = 'AgentTimeout';
  }
}

export interface GuestExecOptions {
  /** Goes to the command's stdin (so that data never shows in the guest's process list). */
  input?: string | Buffer;
  /**
   * Variables the command sees (on top of a fixed PATH): passed in the
   * process environment, never on a command line. With `env`, `cwd` or
   * `user` the command runs through a small prelude in the guest that sets
   * them (qemu/exec.ts), like `docker exec -e -w -u`.
   */
  env?: Record<string, string>;
  /** Directory the command starts in; the user's home when omitted. */
  cwd?: string;
  /** Guest user the command runs as; root when omitted. */
  user?: string;
  /** `base64`: stdout and stderr come back base64 (any bytes); `utf8` (the default) as text. */
  encoding?: 'utf8' | 'base64';
  /**
   * false: `/bin/sh -c command` as is, for hostd's own short commands (no
   * wrapper to pay for on a warm start); the output is still bounded here.
   */
  cut?: boolean;
  /** With `cut: false`: positional parameters of the command ($1, $2, ...), never spliced into its text. */
  args?: string[];
  cap?: number;
  /**
   * The longest pause between two asks for the command's status (default
   * 200 ms; they start at 5 ms and double). hostd's own short commands ask
   * more often: each ask is one agent round trip.
   */
  pollMs?: number;
}

/** What a guest path is (stat(2) of the path, symlinks followed; a listing's entries are not followed). */
export interface GuestPathInfo {
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  /** Permission bits, four octal digits (`0644`). */
  mode: string;
  /** ISO 8601. */
  mtime: string;
}
export interface GuestDirEntry extends GuestPathInfo {
  name: string;
}

/** Why a guest file operation was refused (the guest's own answer, in the domain's terms). */
export class GuestPathError extends Error {
  constructor(
    readonly kind: 'missing' | 'is-directory' | 'not-regular' | 'parent-not-directory' | 'not-empty' | 'no-tool',
    readonly path: string,
    detail = '',
  ) {
    super(`${kind}: ${path}${detail ? ` (${detail})` : ''}`);
    this.name = 'GuestPathError';
  }
}

export interface GuestAddress {
  iface: string;
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

// ---------------------------------------------------------------- disk files

export interface ImageInfo {
  format: string;
  virtualSize: number;
  /** Bytes the file takes on disk. */
  actualSize: number;
  /** Absolute path of the backing file, if any. */
  backingFile: string | null;
  /** Whether qemu-img found the image dirty/corrupt flags set (qcow2 only). */
  corrupt: boolean;
}

// ---------------------------------------------------------------- identity and cloud-init

export interface IdentityPlan {
  /** Text for /etc/svc/seed, or null to leave it alone. */
  seed: string | null;
  hostname: string;
  /** Clear machine-id and SSH host keys. */
  rekey: boolean;
}
export interface IdentityResult {
  /** Byte offset of the root filesystem that was edited. */
  rootOffset: number;
}
/** The disk has no ext2/3/4 root the identity could be written into (cloud-init carries it instead). */
export class NoExtRoot extends Error {}

export interface CloudInitSettings {
  enabled: boolean;
  username: string;
  ssh_public_key: string | null;
  ssh_enabled: boolean;
  ssh_password_auth: boolean;
  dns_servers: string[];
  /** Static address with prefix (`10.0.0.5/24`), or null for DHCP. */
  ip_address: string | null;
  gateway: string | null;
  package_upgrade: boolean;
  network_type: 'bridged' | 'none' | 'user';
  network_bridge: string | null;
}
export interface SeedInput {
  settings: CloudInitSettings;
  /** Unique per VM and per change of its settings: cloud-init re-applies per-instance config when it changes. */
  instanceId: string;
  hostname: string;
  mac: string | null;
  /** SHA-512 crypt hash of the password, or null. */
  passwordHash: string | null;
  /** seed_data, written by cloud-init only when hostd could not write it before first boot. */
  seedFallback?: string | null;
  /** Verbatim user-data instead of the rendered one (a template build's own script). */
  userData?: string;
}
export interface SeedFiles {
  'user-data': string;
  'meta-data': string;
  'network-config'?: string;
}

export interface VmDriver extends RuntimeDriver {
  // ---- the host
  /** Accelerator, programs and /dev/fuse, from a short cache unless `fresh`; availability() lists the programs and /dev/fuse. */
  host(opts?: { fresh?: boolean }): Promise<HostProbe>;
  /** CPU cores and memory of the host, now. */
  resources(): Promise<HostResources>;
  /** This boot of the host (changes with every host boot, not with a hostd restart). */
  bootId(file?: string): Promise<string>;
  /** A MAC address for the VM's network card, fixed per vmid and `salt`. */
  macFor(vmid: number, salt: number): string;
  /** The PCI slots additional disks may take. */
  readonly diskSlots: { first: number; last: number };

  // ---- machines (one process each)
  /** Starts the machine: a cold boot, or with `spec.incoming` a resume that returns once the guest runs. */
  start(spec: MachineSpec): Promise<{ pid: number }>;
  status(m: MachineRef): Promise<MachineStatus>;
  /** ACPI power-down, then a hard stop after `graceMs`. */
  stop(m: MachineRef, graceMs: number): Promise<'acpi' | 'forced' | 'not-running'>;
  /** Hard stop now. */
  kill(m: MachineRef): Promise<void>;
  /**
   * Watches a running machine until its process ends (reported once, then
   * the watch ends) or the returned function is called. Absent in a driver
   * made for tests of service rules.
   */
  watch?(m: MachineRef, fn: (e: MachineEvent) => void): () => void;
  /** Saves memory and device state to `file`; the guest is left paused (postmigrate). */
  saveMemory(m: MachineRef, file: string): Promise<{ ms: number; bytes: number }>;
  /** Makes `newTop` the root disk's active layer; returns the now read-only previous layer. */
  snapshotRoot(m: MachineRef, newTop: string, nodeName: string): Promise<string>;
  activeRoot(m: MachineRef): Promise<{ node: string; file: string }>;
  cont(m: MachineRef): Promise<void>;
  /** The guid of the running machine's VM generation ID device; null when it has none (started by an earlier hostd). */
  generationId(m: MachineRef): Promise<string | null>;
  attachDisk(m: MachineRef, d: DiskSpec): Promise<void>;
  detachDisk(m: MachineRef, id: string, timeoutMs?: number): Promise<void>;
  growDisk(m: MachineRef, id: string, sizeBytes: number): Promise<void>;
  /**
   * The machine's figures (MachineUsage), or null when it does not run. On
   * the kept QMP connection; absent in a driver made for tests of service rules.
   */
  usage?(m: MachineRef): Promise<MachineUsage | null>;

  // ---- the guest agent
  ping(m: MachineRef, timeoutMs?: number): Promise<boolean>;
  /** Raw agent command; throws AgentTimeout (no answer) or AgentError. */
  agent<T = any>(m: MachineRef, command: string, args?: Record<string, unknown>, timeoutMs?: number): Promise<T>;
  /**
   * `/bin/sh -c command` in the guest: each stream bounded to the shared cap
   * (daemon/lib/exec-output.ts) before it leaves the guest, the command's
   * process group killed at `timeoutMs` (`timed_out`, partial output).
   */
  exec(m: MachineRef, command: string, timeoutMs: number, opts?: GuestExecOptions): Promise<ExecResult>;
  addresses(m: MachineRef, timeoutMs?: number): Promise<GuestAddress[]>;
  writeGuestFile(m: MachineRef, file: string, content: string, mode?: string): Promise<void>;

  // ---- disk files
  imageInfo(file: string): Promise<ImageInfo>;
  backingChain(file: string): Promise<ImageInfo[]>;
  /** New qcow2, empty or a copy-on-write overlay on `backing`. */
  createDisk(file: string, sizeBytes: number | null, backing?: string): Promise<void>;
  /** Grows a disk no running machine holds. */
  resizeDisk(file: string, sizeBytes: number): Promise<void>;
  /** Flattened standalone qcow2 copy of `src` and its backing chain. */
  copyDisk(src: string, dst: string, opts?: { signal?: AbortSignal; onProgress?: (pct: number) => void; sourceFormat?: string }): Promise<void>;

  // ---- identity and cloud-init
  /** Writes seed, hostname and (optionally) a fresh machine-id/SSH keys into a stopped disk; NoExtRoot when it has no ext root. */
  writeIdentity(disk: string, workDir: string, plan: IdentityPlan): Promise<IdentityResult>;
  /** The NoCloud seed of `seed` as an ISO at `file`. */
  writeSeed(file: string, seed: SeedInput): Promise<void>;
  hashPassword(password: string): Promise<string>;
}

/**
 * Guest files by path, through the guest agent, every path given to the
 * agent as data (a JSON argument, or a positional parameter of a fixed
 * script), never spliced into a command: `stat` (GuestPathError `missing`),
 * `list` (entries, and whether the listing was cut at the exec output cap),
 * `read` (up to `length` bytes at `offset`), `put` (creates parents and the
 * file, sets `mode`, writes or appends; the file as it is after), `remove`.
 * The QEMU driver provides it beside its VmDriver (`qemuDriver().files`); a
 * driver made for tests of service rules has none.
 */
export interface GuestFileDriver {
  stat(m: MachineRef, file: string): Promise<GuestPathInfo>;
  list(m: MachineRef, dir: string): Promise<{ entries: GuestDirEntry[]; truncated: boolean }>;
  read(m: MachineRef, file: string, offset: number, length: number): Promise<{ data: Buffer; eof: boolean }>;
  put(m: MachineRef, file: string, data: Buffer, opts: { mode?: string; append: boolean }): Promise<GuestPathInfo>;
  remove(m: MachineRef, file: string, recursive: boolean): Promise<{ type: GuestPathInfo['type'] }>;
}
