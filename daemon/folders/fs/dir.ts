/**
 * Open directories as the base of every filesystem call, so that nothing is
 * ever looked up by an absolute path that a process inside a folder could
 * redirect between a check and an action.
 *
 * Node has no openat(2) family. The kernel gives the same thing through
 * procfs: `/proc/self/fd/<fd>/<name>` resolves `/proc/self/fd/<fd>` (a "magic
 * link") to the very directory the descriptor holds, whatever has been
 * renamed or swapped since it was opened, and then looks `name` up in it. So
 * with a single-component `name`:
 *   open(`…/<fd>/<name>`, O_DIRECTORY|O_NOFOLLOW)  = openat(fd, name, …)
 *   lstat / readlink / unlink / rmdir / mkdir / symlink / rename / lutimes on
 *   `…/<fd>/<name>`  = their *at(fd, name) forms (none follows a final link)
 *   readdir(`…/<fd>`)  = getdents on the held directory
 * Calls that would follow a final link (stat, chmod, utimes, opendir of an
 * entry, realpath) are never made on such paths.
 *
 * Descriptor numbers are reused by the kernel as soon as they are closed, so a
 * Dir is closed only after every call made through its paths has settled
 * (`settleAll`, never a bare Promise.all that returns at the first failure).
 */
import fsSync from 'node:fs';
import fs, { type FileHandle } from 'node:fs/promises';

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = fsSync.constants;
const PROC_FD = '/proc/self/fd';

/** Whether procfs is there to resolve through (what the driver's availability reports). */
export function procMounted(): boolean {
  return fsSync.existsSync(PROC_FD);
}

export { errnoCode as code } from '../../lib/errors.js';

/** A single directory entry name: never '', '.', '..', and without '/' or NUL. */
export function assertName(name: string): void {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw new Error(`internal: '${name}' is not a single entry name`);
  }
}

export class Dir {
  private closed = false;

  private constructor(private readonly handle: FileHandle) {}

  /** Opens a directory by an absolute path the daemon trusts (a root); links on the way are followed. */
  static async openTrusted(abs: string): Promise<Dir> {
    return new Dir(await fs.open(abs, O_RDONLY | O_DIRECTORY));
  }

  /** The path of this directory, for calls that read the directory itself (readdir). */
  get self(): string {
    return `${PROC_FD}/${this.handle.fd}`;
  }

  /** The path of the entry `name` of this directory, looked up in the held directory by the kernel. */
  at(name: string): string {
    assertName(name);
    return `${PROC_FD}/${this.handle.fd}/${name}`;
  }

  /** Opens the subfolder `name` without following a link (ELOOP or ENOTDIR when it is not a folder now). */
  async openDir(name: string): Promise<Dir> {
    return new Dir(await fs.open(this.at(name), O_RDONLY | O_DIRECTORY | O_NOFOLLOW));
  }

  /** Where the kernel says this directory is (for messages and absolute links; never acted on). */
  async whereNow(): Promise<string> {
    return fs.readlink(this.self);
  }

  stat(): Promise<fsSync.Stats> {
    return this.handle.stat();
  }

  chmod(mode: number): Promise<void> {
    return this.handle.chmod(mode);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.handle.close();
  }
}

/** Awaits every promise, then throws the first failure (so no call is still running on a descriptor about to be closed). */
export async function settleAll<T>(ps: Array<Promise<T>>): Promise<T[]> {
  const rs = await Promise.allSettled(ps);
  const bad = rs.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (bad) throw bad.reason;
  return rs.map((r) => (r as PromiseFulfilledResult<T>).value);
}
