/**
 * Whole trees, walked from open directories without following any link:
 * removal, copy, and the link check of a copy. Every entry is reached as
 * "name in a directory held open", so an entry swapped for a symlink while
 * the walk runs is met as the symlink (removed or copied as a link), never
 * entered.
 */
import fsSync from 'node:fs';
import fs from 'node:fs/promises';
import { FsProblem } from '../driver.js';
import { joinRel } from '../names.js';
import { code, type Dir, settleAll } from './dir.js';
import { Walker } from './paths.js';

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fsSync.constants;
const { COPYFILE_EXCL } = fsSync.constants;
/** How often one entry is looked at again when it changes kind under the walk. */
const RETRIES = 5;
/** Files unlinked at once in one folder. */
const UNLINK_BATCH = 32;

/** Removes the entry `name` of `parent`: the name only for a file or link, the whole tree for a folder. */
export async function removeEntry(parent: Dir, name: string): Promise<void> {
  try {
    await fs.unlink(parent.at(name));
  } catch (err) {
    if (code(err) === 'EISDIR' || code(err) === 'EPERM') await removeTree(parent, name);
    else throw err;
  }
}

/** Removes the folder `name` of `parent` and everything in it. */
async function removeTree(parent: Dir, name: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    let d: Dir;
    try {
      d = await parent.openDir(name);
    } catch (err) {
      // A link or a file now (swapped meanwhile): remove that name only.
      if (code(err) === 'ELOOP' || code(err) === 'ENOTDIR') return unlinkQuiet(parent, name);
      if (code(err) === 'ENOENT') return;
      throw err;
    }
    try {
      const entries = await fs.readdir(d.self, { withFileTypes: true });
      const files = entries.filter((e) => !e.isDirectory()).map((e) => e.name);
      for (let i = 0; i < files.length; i += UNLINK_BATCH) {
        await settleAll(files.slice(i, i + UNLINK_BATCH).map((n) => removeChild(d, n)));
      }
      for (const e of entries) if (e.isDirectory()) await removeTree(d, e.name);
    } finally {
      await d.close();
    }
    try {
      await fs.rmdir(parent.at(name));
      return;
    } catch (err) {
      if (code(err) === 'ENOENT') return;
      if (code(err) === 'ENOTDIR') return unlinkQuiet(parent, name);
      // Something was added meanwhile: empty it again.
      if (code(err) === 'ENOTEMPTY' && attempt < RETRIES) continue;
      throw err;
    }
  }
}

async function removeChild(d: Dir, name: string): Promise<void> {
  try {
    await fs.unlink(d.at(name));
  } catch (err) {
    if (code(err) === 'ENOENT') return;
    if (code(err) === 'EISDIR' || code(err) === 'EPERM') return removeTree(d, name);
    throw err;
  }
}

async function unlinkQuiet(parent: Dir, name: string): Promise<void> {
  try {
    await fs.unlink(parent.at(name));
  } catch (err) {
    if (code(err) === 'EISDIR' || code(err) === 'EPERM') return removeTree(parent, name);
    if (code(err) !== 'ENOENT') throw err;
  }
}

/**
 * Every link under the entry `name` of `parent` (whose real path from the
 * root is `parentReal`) must resolve inside the root of `root`; nothing may
 * be other than a file, folder or link. `sub` is where the entry is relative
 * to the tree being checked.
 */
export async function checkEntry(root: string, parent: Dir, parentReal: string[], name: string, sub: string): Promise<void> {
  for (let attempt = 0; attempt < RETRIES; attempt++) {
    let st: fsSync.Stats;
    try {
      st = await fs.lstat(parent.at(name));
    } catch (err) {
      if (code(err) === 'ENOENT') return; // gone meanwhile: nothing to check
      throw err;
    }
    if (st.isSymbolicLink()) {
      if (!(await leadsInside(root, [...parentReal, name]))) throw new FsProblem('link-outside', sub);
      return;
    }
    if (st.isDirectory()) {
      let d: Dir;
      try {
        d = await parent.openDir(name);
      } catch (err) {
        if (code(err) === 'ELOOP' || code(err) === 'ENOTDIR' || code(err) === 'ENOENT') continue;
        throw err;
      }
      try {
        for (const n of (await fs.readdir(d.self)).sort()) await checkEntry(root, d, [...parentReal, name], n, joinRel(sub, n));
      } finally {
        await d.close();
      }
      return;
    }
    if (!st.isFile()) throw new FsProblem('special', sub);
    return;
  }
  throw changing(sub);
}

/** Whether the path `real` of `root` (a link at its end followed) stays inside; loops count as outside. */
async function leadsInside(root: string, real: string[]): Promise<boolean> {
  const w = await Walker.open(root);
  try {
    await w.walk(real, true);
    return true;
  } catch (err) {
    if (err instanceof FsProblem && (err.kind === 'escape' || err.kind === 'loop')) return false;
    throw err;
  } finally {
    await w.close();
  }
}

/** Tells a copy it has met the folder it is writing into. */
export interface CopyGuard {
  /** dev:ino of the top folder the copy made, once made. */
  made?: string;
  /** Whether the copy has created its top entry (which is then its to remove on failure). */
  created?: boolean;
  /** Entries copied so far. */
  count: number;
  progress?: (entries: number) => Promise<void> | void;
}

async function copied(guard: CopyGuard): Promise<void> {
  guard.count++;
  await guard.progress?.(guard.count);
}

/**
 * Copies the entry `sname` of `src` to the new entry `dname` of `dst`:
 * links as links (text unchanged), files with mode and times, folders
 * recursively with their mode. Files are read only through a descriptor
 * opened without following links and checked to be a regular file.
 */
export async function copyEntry(src: Dir, sname: string, dst: Dir, dname: string, guard: CopyGuard, sub: string): Promise<void> {
  for (let attempt = 0; attempt < RETRIES; attempt++) {
    const st = await fs.lstat(src.at(sname));
    if (st.isSymbolicLink()) {
      let text: string;
      try {
        text = await fs.readlink(src.at(sname));
      } catch (err) {
        if (code(err) === 'EINVAL') continue; // no longer a link
        throw err;
      }
      await fs.symlink(text, dst.at(dname));
      if (sub === '') guard.created = true;
      await copied(guard);
      return;
    }
    if (st.isDirectory()) {
      let from: Dir;
      try {
        from = await src.openDir(sname);
      } catch (err) {
        if (code(err) === 'ELOOP' || code(err) === 'ENOTDIR') continue;
        throw err;
      }
      try {
        const fst = await from.stat();
        if (guard.made === `${fst.dev}:${fst.ino}`) throw new FsProblem('into-itself', sub);
        await fs.mkdir(dst.at(dname), 0o700);
        if (sub === '') guard.created = true;
        const to = await dst.openDir(dname);
        try {
          if (!guard.made) {
            const tst = await to.stat();
            guard.made = `${tst.dev}:${tst.ino}`;
          }
          await copied(guard);
          for (const n of (await fs.readdir(from.self)).sort()) await copyEntry(from, n, to, n, guard, joinRel(sub, n));
          await to.chmod(fst.mode & 0o7777);
        } finally {
          await to.close();
        }
      } finally {
        await from.close();
      }
      return;
    }
    if (st.isFile()) {
      let fh: fs.FileHandle;
      try {
        // O_NONBLOCK: a FIFO swapped in meanwhile must not block the open; it is refused below.
        fh = await fs.open(src.at(sname), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
      } catch (err) {
        if (code(err) === 'ELOOP') continue;
        throw err;
      }
      try {
        const fst = await fh.stat();
        if (!fst.isFile()) throw new FsProblem('special', sub);
        // The open descriptor's own /proc path: the kernel reopens that very file.
        try {
          await fs.copyFile(`/proc/self/fd/${fh.fd}`, dst.at(dname), COPYFILE_EXCL);
        } catch (err) {
          // O_EXCL: anything but EEXIST may have left a partial file of this copy's own.
          if (sub === '' && code(err) !== 'EEXIST') guard.created = true;
          throw err;
        }
        if (sub === '') guard.created = true;
        await fs.lutimes(dst.at(dname), fst.atime, fst.mtime);
        await copied(guard);
      } finally {
        await fh.close();
      }
      return;
    }
    throw new FsProblem('special', sub);
  }
  throw changing(sub);
}

function changing(sub: string): Error {
  return Object.assign(new Error(`'${sub || '.'}' keeps changing while it is read; try again`), { code: 'EAGAIN' });
}
