/**
 * Where containers and images live in a storage pool, and the file work on
 * them: unpacking an image into a rootfs (inside the container's id map, so
 * the files are owned by the container's root and never by the host's),
 * ext4 images for disk limits, copies, safe writes into a stopped rootfs,
 * usage figures, and cleaning up after a crash.
 *
 *   <pool>/.hostd-lxc/containers/<lxcid>/rootfs     a directory rootfs (no disk limit)
 *   <pool>/.hostd-lxc/containers/<lxcid>/disk.img   an ext4 image LXC loop-mounts (disk limit)
 *   <pool>/.hostd-lxc/images/<image_id>/            rootfs.tar[.xz|.gz|.zst] + image.json
 *   <pool>/.hostd-lxc/tmp/<random>/                 work in progress (removed at open)
 *
 * An unprivileged container's root (host uid `idmap.uid`) must be able to
 * traverse every directory above its rootfs and its LXC config (LXC checks
 * this at start). hostd makes its own directories 0711 and gives the
 * container's root uid an `x` ACL entry on ancestors that deny it (for
 * example a 0700 data dir); see docs/lxc.md.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { constants as C } from 'node:fs';
import { run } from '../../lib/run.js';
import { conflict, internal } from '../../lib/errors.js';
import type { Compression, ContainerPaths, RootfsPlacement, RootfsStorage } from '../driver.js';
import type { IdRange } from '../settings.js';

export const INTERNAL_DIR = '.hostd-lxc';
/** statfs f_type of ZFS. */
export const ZFS_MAGIC = 0x2fc12fc1;

export function poolRoot(poolPath: string): string {
  return path.join(poolPath, INTERNAL_DIR);
}
export function containerDir(poolPath: string, lxcid: number): string {
  return path.join(poolRoot(poolPath), 'containers', String(lxcid));
}
export function imagesDir(poolPath: string): string {
  return path.join(poolRoot(poolPath), 'images');
}
export function tmpRoot(poolPath: string): string {
  return path.join(poolRoot(poolPath), 'tmp');
}

/** Detects the compression of a tarball by its first bytes. */
export function compressionOf(head: Buffer): Compression | null {
  if (head.length >= 6 && head.subarray(0, 6).equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]))) return 'xz';
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
  if (head.length >= 4 && head.readUInt32LE(0) === 0xfd2fb528) return 'zstd';
  if (head.length >= 262 && head.subarray(257, 262).toString('latin1') === 'ustar') return 'none';
  return null;
}

export const TAR_SUFFIX: Record<Compression, string> = { xz: '.tar.xz', gzip: '.tar.gz', zstd: '.tar.zst', none: '.tar' };
const TAR_FLAG: Record<Compression, string> = { xz: '-J', gzip: '-z', zstd: '--zstd', none: '' };

export async function readHead(file: string, n = 512): Promise<Buffer> {
  const fh = await fsp.open(file, 'r');
  try {
    const buf = Buffer.alloc(n);
    const { bytesRead } = await fh.read(buf, 0, n, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

/** Parses `dumpe2fs -h` output into block figures. */
export function parseDumpe2fs(text: string): { total_bytes: number; free_bytes: number } | null {
  const get = (k: string) => {
    const m = new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(text);
    return m ? Number(m[1]) : null;
  };
  const count = get('Block count');
  const free = get('Free blocks');
  const size = get('Block size');
  if (count === null || free === null || size === null) return null;
  return { total_bytes: count * size, free_bytes: free * size };
}

/** Mount points at or below `dir`, deepest first (from /proc/self/mounts text). */
export function mountsBelow(mounts: string, dir: string): string[] {
  const base = dir.endsWith('/') ? dir : dir + '/';
  const out: string[] = [];
  for (const line of mounts.split('\n')) {
    const mp = line.split(' ')[1];
    if (!mp) continue;
    const p = mp.replace(/\\(\d{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));
    if (p === dir || p.startsWith(base)) out.push(p);
  }
  return out.sort((a, b) => b.length - a.length);
}

export class Storage implements RootfsStorage {
  /** Directories already made traversable for a uid in this process. */
  private readonly traversable = new Set<string>();

  constructor(private readonly log: { info(o: object, m: string): void; warn(o: object, m: string): void; error(o: object, m: string): void }) {}

  containerPaths(poolPath: string, lxcid: number): ContainerPaths {
    const dir = containerDir(poolPath, lxcid);
    return { dir, rootfs: path.join(dir, 'rootfs'), img: path.join(dir, 'disk.img') };
  }

  zfsImageMount(poolPath: string, imageId: string): string {
    return path.join(poolRoot(poolPath), 'zfs-images', imageId);
  }

  /** A container's directory in its pool: 0711, traversable for its root, not listable. */
  async makeContainerDir(dir: string): Promise<void> {
    await fsp.mkdir(dir, { mode: 0o711 });
  }

  /** Removes every entry of the pool's work dir (mounts below are unmounted first); errors are logged per entry. */
  async clearWorkDirs(poolPath: string): Promise<void> {
    const tr = tmpRoot(poolPath);
    let names: string[] = [];
    try {
      names = await fsp.readdir(tr);
    } catch {
      return;
    }
    for (const n of names) await this.remove(path.join(tr, n)).catch((err) => this.log.error({ err, dir: path.join(tr, n) }, 'lxc: cannot remove a work dir'));
  }

  async withRootfs<T>(poolPath: string, at: RootfsPlacement, readOnly: boolean, fn: (root: string) => Promise<T>): Promise<T> {
    if (at.kind !== 'loop') return fn(at.path);
    const tmp = await this.makeTmp(poolPath);
    try {
      return await this.withMounted(at.path, tmp, readOnly, fn);
    } finally {
      await this.remove(tmp);
    }
  }

  async rename(from: string, to: string): Promise<void> {
    await fsp.rename(from, to);
  }

  async exists(p: string): Promise<boolean> {
    return fs.existsSync(p);
  }

  async isZfs(p: string): Promise<boolean> {
    return (await this.fsType(p)) === ZFS_MAGIC;
  }

  /** Makes hostd's directory tree in a pool (0711: traversable, not listable). */
  async preparePool(poolPath: string): Promise<void> {
    for (const d of [poolRoot(poolPath), path.join(poolRoot(poolPath), 'containers'), tmpRoot(poolPath)]) {
      await fsp.mkdir(d, { recursive: true, mode: 0o711 });
      await fsp.chmod(d, 0o711);
    }
    await fsp.mkdir(imagesDir(poolPath), { recursive: true, mode: 0o700 });
  }

  /**
   * Gives `uid` traverse (x) rights on every ancestor of `dir` that denies it
   * (mode without o+x and not owned by uid), with a POSIX ACL entry.
   */
  async ensureTraversable(dir: string, uid: number): Promise<void> {
    const parts = path.resolve(dir).split('/').filter(Boolean);
    let cur = '/';
    for (const seg of ['', ...parts]) {
      cur = seg ? path.join(cur, seg) : '/';
      const key = `${uid}:${cur}`;
      if (this.traversable.has(key)) continue;
      const st = await fsp.stat(cur);
      if ((st.mode & 0o001) === 0 && st.uid !== uid) {
        await run('setfacl', ['-m', `u:${uid}:x`, cur], { install: 'the acl package', timeoutMs: 10_000 });
        this.log.info({ dir: cur, uid }, "lxc: granted the containers' root uid traverse (x) on a directory above a rootfs");
      }
      this.traversable.add(key);
    }
  }

  async makeTmp(poolPath: string): Promise<string> {
    const d = path.join(tmpRoot(poolPath), crypto.randomBytes(8).toString('hex'));
    await fsp.mkdir(d, { recursive: true, mode: 0o711 });
    return d;
  }

  /**
   * Unpacks an image tarball into `dir` (made when missing). Unprivileged:
   * tar runs inside the id map (`lxc-usernsexec`), reading the tarball from
   * a pipe, so every file is owned by a mapped id and device nodes are never
   * created. /dev contents are skipped (LXC mounts its own /dev).
   */
  async unpack(tarball: string, dir: string, idmap: IdRange | null, signal?: AbortSignal): Promise<void> {
    const comp = compressionOf(await readHead(tarball));
    if (!comp) throw internal(`image file ${path.basename(tarball)} is not a tar archive (plain, xz, gzip or zstd)`);
    await fsp.mkdir(dir, { recursive: true, mode: 0o755 });
    const common = ['--numeric-owner', '--anchored', '--exclude=./dev/*', '--exclude=dev/*', '-C', dir];
    if (!idmap) {
      await run('tar', ['-x', '-p', ...(TAR_FLAG[comp] ? [TAR_FLAG[comp]] : []), '-f', tarball, ...common], {
        timeoutMs: 30 * 60_000,
        signal,
        install: 'the tar package',
      });
      return;
    }
    await fsp.chown(dir, idmap.uid, idmap.gid);
    // A constant script; every input is a positional parameter, never spliced into the text.
    const script =
      'set -o pipefail; f=(); [ -n "$6" ] && f=("$6"); cat -- "$1" | lxc-usernsexec -m "u:0:$3:$5" -m "g:0:$4:$5" -- tar -x -p "${f[@]}" -f - --numeric-owner --anchored "--exclude=./dev/*" "--exclude=dev/*" -C "$2"';
    await run('bash', ['-c', script, 'unpack', tarball, dir, String(idmap.uid), String(idmap.gid), String(idmap.count), TAR_FLAG[comp]], {
      timeoutMs: 30 * 60_000,
      signal,
      install: 'the lxc and uidmap packages',
    });
  }

  /**
   * Packs a rootfs directory into `out` (zstd when available, else gzip),
   * with ids as the container sees them (unshifted through its id map).
   */
  async pack(rootfs: string, out: string, idmap: IdRange | null, comp: Compression, signal?: AbortSignal): Promise<void> {
    const compressor = comp === 'zstd' ? 'zstd -q -T0 -3' : comp === 'gzip' ? 'gzip -1' : comp === 'xz' ? 'xz -T0 -3' : 'cat';
    // lost+found of an ext4 image belongs to the host's root (unreadable through the id map) and
    // means nothing in an image; the seed is the source container's identity, not the template's.
    const tarCmd = 'tar -c -p --numeric-owner --anchored --exclude=./lost+found --exclude=./etc/svc/seed -f - -C "$2" .';
    const script = idmap
      ? `set -o pipefail; lxc-usernsexec -m "u:0:$3:$5" -m "g:0:$4:$5" -- ${tarCmd} | ${compressor} > "$1"`
      : `set -o pipefail; ${tarCmd} | ${compressor} > "$1"`;
    await run('bash', ['-c', script, 'pack', out, rootfs, String(idmap?.uid ?? 0), String(idmap?.gid ?? 0), String(idmap?.count ?? 0)], {
      timeoutMs: 60 * 60_000,
      signal,
      install: 'tar and zstd',
    });
  }

  /** A sparse ext4 image of `bytes` whose root directory belongs to the container's root. */
  async makeDiskImage(img: string, bytes: number, idmap: IdRange | null): Promise<void> {
    const fh = await fsp.open(img, 'wx', 0o600);
    try {
      await fh.truncate(bytes);
    } finally {
      await fh.close();
    }
    const owner = idmap ? `${idmap.uid}:${idmap.gid}` : '0:0';
    await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-E', `root_owner=${owner}`, img], { timeoutMs: 120_000, install: 'the e2fsprogs package' });
  }

  /** Grows an ext4 image file in place (the container is stopped). */
  async growDiskImage(img: string, bytes: number): Promise<void> {
    await this.waitImageFree(img);
    const st = await fsp.stat(img);
    if (st.size < bytes) await fsp.truncate(img, bytes);
    await run('e2fsck', ['-f', '-p', img], { timeoutMs: 600_000, okCodes: [0, 1], install: 'the e2fsprogs package' });
    await run('resize2fs', [img], { timeoutMs: 600_000, install: 'the e2fsprogs package' });
  }

  /** Loop devices whose backing file is `img` (read from /sys; no program run). */
  loopUsers(img: string): string[] {
    let real = img;
    try {
      real = fs.realpathSync(img);
    } catch {
      /* compare the path as given */
    }
    const out: string[] = [];
    let devs: string[] = [];
    try {
      devs = fs.readdirSync('/sys/block').filter((d) => d.startsWith('loop'));
    } catch {
      return out;
    }
    for (const d of devs) {
      try {
        const b = fs.readFileSync(`/sys/block/${d}/loop/backing_file`, 'utf8').trim();
        if (b === img || b === real) out.push(`/dev/${d}`);
      } catch {
        /* not set up */
      }
    }
    return out;
  }

  /**
   * Waits until no loop device is backed by `img`. After a container stops,
   * the kernel tears its mount namespace down a moment later; mounting,
   * copying or resizing the image before that would use a live filesystem.
   */
  async waitImageFree(img: string, timeoutMs = 15_000): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (this.loopUsers(img).length) {
      if (Date.now() > end) throw conflict(`the disk image ${img} is still in use by ${this.loopUsers(img).join(', ')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async mountImage(img: string, mnt: string, readOnly = false): Promise<void> {
    await this.waitImageFree(img);
    await fsp.mkdir(mnt, { recursive: true, mode: 0o711 });
    await run('mount', ['-o', readOnly ? 'loop,ro' : 'loop', img, mnt], { timeoutMs: 60_000 });
  }

  async unmount(mnt: string): Promise<void> {
    await run('umount', [mnt], { timeoutMs: 60_000, okCodes: [0, 32] });
  }

  /** Runs `fn` with the image mounted at a fresh directory; always unmounts. */
  async withMounted<T>(img: string, tmpBase: string, readOnly: boolean, fn: (root: string) => Promise<T>): Promise<T> {
    const mnt = path.join(tmpBase, 'mnt-' + crypto.randomBytes(4).toString('hex'));
    await this.mountImage(img, mnt, readOnly);
    try {
      return await fn(mnt);
    } finally {
      await this.unmount(mnt);
      await fsp.rmdir(mnt).catch(() => undefined);
    }
  }

  /** Used bytes of an ext4 image (from its superblock; no mount). */
  async imageUsage(img: string): Promise<{ total_bytes: number; used_bytes: number } | null> {
    try {
      await this.waitImageFree(img);
      const r = await run('dumpe2fs', ['-h', img], { timeoutMs: 10_000 });
      const p = parseDumpe2fs(r.stdout);
      return p ? { total_bytes: p.total_bytes, used_bytes: p.total_bytes - p.free_bytes } : null;
    } catch {
      return null;
    }
  }

  /** Bytes a directory tree takes on disk (du; one filesystem). */
  async treeUsage(dir: string, signal?: AbortSignal): Promise<number | null> {
    try {
      const r = await run('du', ['-s', '-x', '-B1', dir], { timeoutMs: 120_000, signal, okCodes: [0, 1] });
      const n = Number(r.stdout.trim().split(/\s+/)[0]);
      return Number.isFinite(n) ? n : null;
    } catch {
      return null;
    }
  }

  /** Copies a directory tree or file, keeping owners, modes, links, xattrs and sparseness. */
  async copy(src: string, dst: string, signal?: AbortSignal, onProgress?: (bytes: number) => void): Promise<void> {
    const st = await fsp.lstat(src);
    if (st.isFile()) await this.waitImageFree(src);
    const args = st.isDirectory() ? ['-a', '--reflink=auto', src, dst] : ['-a', '--reflink=auto', '--sparse=always', src, dst];
    let timer: NodeJS.Timeout | null = null;
    if (onProgress) {
      timer = setInterval(() => {
        void (
          st.isDirectory()
            ? this.treeUsage(dst)
            : fsp.stat(dst).then(
                (s) => s.blocks * 512,
                () => null,
              )
        ).then((n) => {
          if (n !== null) onProgress(n);
        });
      }, 1000);
    }
    try {
      await run('cp', args, { timeoutMs: 24 * 3600_000, signal });
    } finally {
      if (timer) clearInterval(timer);
    }
  }

  /**
   * Moves `src` to `dst` by rename when both are on one filesystem, else by
   * copy (the source is left for the caller to remove once the move is committed).
   */
  async relocate(src: string, dst: string, signal?: AbortSignal, onProgress?: (bytes: number) => void): Promise<'renamed' | 'copied'> {
    const [a, b] = await Promise.all([fsp.stat(src), fsp.stat(path.dirname(dst))]);
    if (a.dev === b.dev) {
      await fsp.rename(src, dst);
      return 'renamed';
    }
    await this.copy(src, dst, signal, onProgress);
    return 'copied';
  }

  /**
   * Removes a path, first unmounting anything mounted below it (a crash may
   * leave a loop mount in a work dir); refuses when something stays mounted,
   * so a recursive delete never walks into a mounted filesystem.
   */
  async remove(p: string): Promise<void> {
    if (!fs.existsSync(p)) return;
    for (let i = 0; i < 2; i++) {
      const mounts = mountsBelow(await fsp.readFile('/proc/self/mounts', 'utf8'), path.resolve(p));
      if (mounts.length === 0) break;
      for (const m of mounts) await run('umount', ['-l', m], { timeoutMs: 30_000, okCodes: [0, 32] });
    }
    if (mountsBelow(await fsp.readFile('/proc/self/mounts', 'utf8'), path.resolve(p)).length) {
      throw conflict(`cannot remove ${p}: a filesystem stays mounted below it`);
    }
    await fsp.rm(p, { recursive: true, force: true });
  }

  /**
   * Writes a file inside a stopped container's rootfs without following any
   * symlink the guest placed there: every parent must be a real directory
   * (missing ones are made, owned by the container's root), the file is
   * written to a temporary name and renamed over the target (replacing a
   * symlink, never writing through it).
   */
  async writeGuestFile(rootfs: string, rel: string, content: string | Buffer, mode: number, idmap: IdRange | null): Promise<void> {
    const segs = rel.split('/').filter(Boolean);
    if (segs.some((s) => s === '..' || s === '.')) throw internal(`bad guest path ${rel}`);
    const uid = idmap?.uid ?? 0;
    const gid = idmap?.gid ?? 0;
    let dir = rootfs;
    for (const seg of segs.slice(0, -1)) {
      dir = path.join(dir, seg);
      let st: fs.Stats | null = null;
      try {
        st = await fsp.lstat(dir);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
      if (!st) {
        await fsp.mkdir(dir, { mode: 0o755 });
        await fsp.lchown(dir, uid, gid);
      } else if (!st.isDirectory()) {
        throw conflict(`the container's /${segs.join('/')} cannot be written: /${path.relative(rootfs, dir)} is not a directory (a symlink?)`);
      }
    }
    const target = path.join(dir, segs[segs.length - 1]);
    const tmp = `${target}.hostd-${crypto.randomBytes(4).toString('hex')}`;
    const fh = await fsp.open(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, mode);
    try {
      await fh.writeFile(content);
      await fh.chown(uid, gid);
      await fh.chmod(mode);
    } finally {
      await fh.close();
    }
    try {
      await fsp.rename(tmp, target);
    } catch (err) {
      await fsp.rm(tmp, { force: true });
      throw err;
    }
  }

  /** Reads a regular file of a stopped rootfs (null when absent, a symlink or not a file). */
  async readGuestFile(rootfs: string, rel: string): Promise<string | null> {
    let dir = rootfs;
    const segs = rel.split('/').filter(Boolean);
    for (const seg of segs) {
      dir = path.join(dir, seg);
      try {
        const st = await fsp.lstat(dir);
        if (st.isSymbolicLink()) return null;
      } catch {
        return null;
      }
    }
    try {
      const fh = await fsp.open(dir, C.O_RDONLY | C.O_NOFOLLOW);
      try {
        const st = await fh.stat();
        if (!st.isFile() || st.size > 1024 * 1024) return null;
        return await fh.readFile('utf8');
      } finally {
        await fh.close();
      }
    } catch {
      return null;
    }
  }

  /** Whether a real directory (no symlink on the way) exists in a stopped rootfs. */
  async guestHasDir(rootfs: string, rel: string): Promise<boolean> {
    let dir = rootfs;
    for (const seg of rel.split('/').filter(Boolean)) {
      dir = path.join(dir, seg);
      try {
        const st = await fsp.lstat(dir);
        if (!st.isDirectory()) return false;
      } catch {
        return false;
      }
    }
    return true;
  }

  /** Removes a regular file of a stopped rootfs if hostd wrote it (it starts with `mark`). */
  async removeGuestFileIfManaged(rootfs: string, rel: string, mark: string): Promise<void> {
    const text = await this.readGuestFile(rootfs, rel);
    if (text !== null && text.startsWith(mark)) await fsp.rm(path.join(rootfs, ...rel.split('/').filter(Boolean)), { force: true });
  }

  /** The filesystem type of a path (statfs f_type). */
  private async fsType(p: string): Promise<number | null> {
    try {
      return (await fsp.statfs(p)).type;
    } catch {
      return null;
    }
  }
}
