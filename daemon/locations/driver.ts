/**
 * What the locations service needs from the host to mount a share: one of
 * two routes, chosen at start by what the host has.
 * - `cifs`: the kernel's CIFS client (`mount -t cifs`, cifs-utils), the
 *   normal path on a host whose kernel has it;
 * - `fuse`: smbnetfs, a FUSE SMB client, where the kernel has no CIFS.
 */
import type { Availability } from '../lib/availability.js';
import type { MaybeCredentials, Remote } from './smb/remote.js';
import type { ShareEntry } from './smb/status.js';

export type MountRoute = 'cifs' | 'fuse';

export interface MountResult {
  /** The helper process that serves the mount (FUSE), or null (kernel). */
  pid: number | null;
}

export interface MountDriver {
  readonly route: MountRoute;
  /** The programs this route needs, as they are now. */
  availability(): Promise<Availability[]>;
  /**
   * Mounts `remote` on the empty directory `dir` (0700, in the data dir).
   * `work` is a private 0700 directory the driver may use for the helper's
   * own files; credentials never stay on disk after the call.
   */
  mount(remote: Remote, creds: MaybeCredentials, dir: string, work: string, signal?: AbortSignal): Promise<MountResult>;
  /** The share's root directory inside a mount on `dir`. */
  shareRoot(dir: string, remote: Remote): string;
  /** Unmounts `dir` and ends its helper; no error when nothing is mounted. */
  unmount(dir: string): Promise<void>;
  /** The helper serving `dir` (FUSE), found in the process table, or null. */
  helperPid(dir: string): Promise<number | null>;
}

/** The SMB client side the service needs besides mounting. */
export interface SmbProbe {
  availability(): Promise<Availability>;
  check(remote: Remote, creds: MaybeCredentials, opts?: { ip?: string; signal?: AbortSignal }): Promise<void>;
  shares(host: string, creds: MaybeCredentials, opts?: { ip?: string; signal?: AbortSignal }): Promise<ShareEntry[]>;
}
