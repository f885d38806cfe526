/**
 * What the VM service needs from its runtime. The QEMU implementation is
 * `qemu/index.ts`; the service knows nothing of QMP, the agent protocol,
 * qemu-img or debugfs. Machines are addressed by a `MachineRef` (name and run
 * directory), disks by absolute file paths the service chose.
 */
import type { MachineSpec, DiskSpec } from './qemu/args.js';
import type { ExecResult } from '../lib/exec-output.js';
import type { MachineRef, MachineStatus } from './qemu/machine.js';
import type { GuestExecOptions } from './qemu/exec.js';
import type { HostProbe } from './qemu/host.js';
import type { ImageInfo } from './qemu/img.js';
import type { IdentityPlan, IdentityResult } from './qemu/identity.js';
import type { SeedFiles } from './qemu/seed.js';

export type { MachineSpec, DiskSpec, ExecResult, GuestExecOptions, MachineRef, MachineStatus, HostProbe, ImageInfo, IdentityPlan, IdentityResult, SeedFiles };

export interface GuestAddress {
  iface: string;
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

export interface VmDriver {
  /** Programs, accelerator and their versions (cached; `refresh` probes again). */
  host(refresh?: boolean): Promise<HostProbe>;

  // ---- machines (one process each)
  /** Starts the machine: a cold boot, or with `spec.incoming` a resume that returns once the guest runs. */
  start(spec: MachineSpec): Promise<{ pid: number }>;
  status(m: MachineRef): Promise<MachineStatus>;
  /** ACPI power-down, then a hard stop after `graceMs`. */
  stop(m: MachineRef, graceMs: number): Promise<'acpi' | 'forced' | 'not-running'>;
  /** Hard stop now. */
  kill(m: MachineRef): Promise<void>;
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
  /** Writes seed, hostname and (optionally) a fresh machine-id/SSH keys into a stopped disk. */
  writeIdentity(disk: string, workDir: string, plan: IdentityPlan): Promise<IdentityResult>;

  // ---- cloud-init
  writeSeed(file: string, files: SeedFiles): Promise<void>;
  hashPassword(password: string): Promise<string>;
}
