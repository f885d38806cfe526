/**
 * Mount points held by descriptor for one start, so that what LXC mounts is
 * the directory the rule judged, not whatever a path names a moment later.
 *
 * A guest that can write a shared folder could swap a sub-path for a symlink
 * between the rule's check and LXC's bind mount (LXC follows the path when
 * it mounts). So a start:
 *   1. opens each host path with O_PATH | O_NOFOLLOW (a symlink in the last
 *      component is never followed; nothing is read, so a FIFO cannot block),
 *      and reads where the descriptor leads from /proc/self/fd/N (every
 *      component as it is now): the service judges that path;
 *   2. bind-mounts `/proc/<hostd>/fd/N` (the kernel follows the descriptor,
 *      not the path; `--no-canonicalize` keeps mount(8) from resolving it to
 *      a path first) on the container's staging entry
 *      `<lxc path>/svc-lxc-<id>/mounts/<index>`, made private so that no
 *      mount event propagates between it and the container;
 *   3. LXC bind-mounts the staging entry (the config names it) into the
 *      container's rootfs;
 *   4. once lxc-start returned, the staging mounts are taken down (the
 *      container keeps its own) and the descriptors closed.
 * A crash between 2 and 4 leaves staging mounts, which `clearStale` takes
 * down at the next open (and removing a container's directory unmounts
 * below it first, so a delete never walks into a shared folder).
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/run.js';
import type { MountPoint } from '../model.js';
import type { MountStaging, PinnedMount, PinnedMounts } from '../driver.js';
import { mountsBelow } from './storage.js';

/** Linux's O_PATH (fs.constants does not carry it): a descriptor that names a file without opening it. */
const O_PATH = 0o10000000;

/** Where the staging entries of a container live (inside its directory under the lxc path). */
export function stagingDir(confDir: string): string {
  return path.join(confDir, 'mounts');
}

export function stagingEntry(confDir: string, index: number): string {
  return path.join(stagingDir(confDir), String(index));
}

interface Held extends PinnedMount {
  fd: number | null;
  kind: 'dir' | 'file' | null;
}

/** Removes a staging entry (an empty directory or file; never recursively: it may be a mount point still). */
async function removeEntry(entry: string): Promise<void> {
  const st = await fsp.lstat(entry).catch(() => null);
  if (!st) return;
  if (st.isDirectory()) await fsp.rmdir(entry);
  else await fsp.unlink(entry);
}

async function unmountBelow(dir: string): Promise<void> {
  for (const m of mountsBelow(await fsp.readFile('/proc/self/mounts', 'utf8'), path.resolve(dir))) {
    await run('umount', ['-l', m], { timeoutMs: 30_000, okCodes: [0, 32] });
  }
}

/** Opens one host path and says where the descriptor leads. */
async function pinOne(m: MountPoint): Promise<Held> {
  let fd: number;
  try {
    fd = fs.openSync(m.host_path, O_PATH | fs.constants.O_NOFOLLOW);
  } catch {
    return { mount: m, real: null, problem: null, fd: null, kind: null };
  }
  const st = fs.fstatSync(fd);
  if (st.isSymbolicLink()) {
    // The last component was swapped for a symlink: where it leads is elsewhere by definition.
    fs.closeSync(fd);
    let real: string | null = null;
    try {
      real = await fsp.realpath(m.host_path);
    } catch {
      /* dangling */
    }
    return { mount: m, real, problem: null, fd: null, kind: null };
  }
  let real: string | null = null;
  try {
    real = fs.readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    /* gone meanwhile */
  }
  // A directory deleted since it was opened reads as '<path> (deleted)': not where the record says.
  const kind = st.isDirectory() ? 'dir' : st.isFile() ? 'file' : null;
  return { mount: m, real, problem: kind ? null : 'is neither a directory nor a regular file', fd, kind };
}

class Pinned implements PinnedMounts {
  private staged: string[] = [];

  constructor(
    private readonly confDir: string,
    private readonly held: Held[],
  ) {}

  get pins(): PinnedMount[] {
    return this.held.map(({ mount, real, problem }) => ({ mount, real, problem }));
  }

  async stage(): Promise<void> {
    if (this.held.length === 0) return;
    const dir = stagingDir(this.confDir);
    await fsp.mkdir(dir, { recursive: true, mode: 0o711 });
    await unmountBelow(dir);
    for (const [i, h] of this.held.entries()) {
      if (h.fd === null || h.kind === null) throw new Error(`mount point ${h.mount.container_path} was not pinned`);
      const entry = stagingEntry(this.confDir, i);
      await removeEntry(entry);
      if (h.kind === 'dir') await fsp.mkdir(entry, { mode: 0o711 });
      else await fsp.writeFile(entry, '', { mode: 0o600 });
      await run('mount', ['--no-canonicalize', '--bind', `/proc/${process.pid}/fd/${h.fd}`, entry], { timeoutMs: 30_000, install: 'the mount package' });
      this.staged.push(entry);
      await run('mount', ['--make-private', entry], { timeoutMs: 30_000 });
    }
  }

  async release(): Promise<void> {
    for (const entry of this.staged.splice(0).reverse()) await run('umount', ['-l', entry], { timeoutMs: 30_000, okCodes: [0, 32] });
    for (const h of this.held) {
      if (h.fd !== null) fs.closeSync(h.fd);
      h.fd = null;
    }
  }
}

export class MountPins implements MountStaging {
  constructor(
    private readonly confDir: (lxcName: string) => string,
    private readonly lxcPath: string,
  ) {}

  async pin(lxcName: string, mounts: MountPoint[]): Promise<PinnedMounts> {
    const held: Held[] = [];
    try {
      for (const m of mounts) held.push(await pinOne(m));
    } catch (err) {
      for (const h of held) if (h.fd !== null) fs.closeSync(h.fd);
      throw err;
    }
    return new Pinned(this.confDir(lxcName), held);
  }

  async clearStale(): Promise<void> {
    await unmountBelow(this.lxcPath);
  }
}
