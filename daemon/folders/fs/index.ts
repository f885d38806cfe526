/**
 * The local filesystem as the folders driver: pools, folder directories and
 * location mounts are all ordinary directories here.
 */
import type { Dirent, Stats } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { FsProblem, type EntryInfo, type EntryType, type FilesDriver, type Look, type NamedEntry, type SearchHit } from '../driver.js';
import { joinRel } from '../names.js';
import { linkStaysInside, locate } from './paths.js';

function code(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

function typeOf(st: Stats): EntryType {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'folder';
  if (st.isSymbolicLink()) return 'symlink';
  return 'other';
}

function info(st: Stats): EntryInfo {
  return { type: typeOf(st), size: st.size, mtime: st.mtime };
}

async function lstatOrNull(p: string): Promise<Stats | null> {
  try {
    return await fs.lstat(p);
  } catch (err) {
    if (code(err) === 'ENOENT' || code(err) === 'ENOTDIR') return null;
    throw err;
  }
}

async function statOrNull(p: string): Promise<Stats | null> {
  try {
    return await fs.stat(p);
  } catch (err) {
    if (code(err) === 'ENOENT' || code(err) === 'ENOTDIR' || code(err) === 'ELOOP') return null;
    throw err;
  }
}

/** The folder at `abs` (a link followed), or `missing` / `not-folder`. */
async function requireDir(abs: string): Promise<void> {
  let st: Stats;
  try {
    st = await fs.stat(abs);
  } catch (err) {
    if (code(err) === 'ENOENT') throw new FsProblem('missing');
    if (code(err) === 'ENOTDIR') throw new FsProblem('not-folder');
    throw err;
  }
  if (!st.isDirectory()) throw new FsProblem('not-folder');
}

/** Visits `abs` and everything below it without following symlinks. */
async function walkTree(abs: string, rel: string, visit: (abs: string, rel: string, st: Stats) => Promise<void>): Promise<void> {
  const st = await fs.lstat(abs);
  await visit(abs, rel, st);
  if (!st.isDirectory()) return;
  for (const name of await fs.readdir(abs)) await walkTree(path.join(abs, name), joinRel(rel, name), visit);
}

export class LocalFiles implements FilesDriver {
  async ensureRoot(root: string): Promise<void> {
    await fs.mkdir(root, { recursive: true });
  }

  async look(root: string, rel: string): Promise<Look> {
    const { abs, realRoot } = await locate(root, rel);
    const st = await lstatOrNull(abs);
    let way: Look['way'] = 'ok';
    if (!st) {
      try {
        if (!(await fs.stat(path.dirname(abs))).isDirectory()) way = 'not-folder';
      } catch (err) {
        way = code(err) === 'ENOTDIR' ? 'not-folder' : 'missing';
      }
    }
    const target = st?.isSymbolicLink() ? await statOrNull(abs) : st;
    return { real: path.relative(realRoot, abs).split(path.sep).join('/'), way, entry: st && info(st), target: target && info(target) };
  }

  async list(root: string, rel: string): Promise<NamedEntry[]> {
    const { abs } = await locate(root, rel);
    await requireDir(abs);
    const dirents = await fs.readdir(abs, { withFileTypes: true });
    const out = await Promise.all(
      dirents.map(async (d) => {
        const st = await lstatOrNull(path.join(abs, d.name));
        return st ? { name: d.name, ...info(st) } : null; // vanished meanwhile
      }),
    );
    return out.filter((e): e is NamedEntry => e !== null);
  }

  async mkdir(root: string, rel: string): Promise<EntryInfo> {
    const i = rel.lastIndexOf('/');
    const { abs: parent } = await locate(root, i < 0 ? '' : rel.slice(0, i));
    const abs = path.join(parent, rel.slice(i + 1));
    try {
      await fs.mkdir(abs);
    } catch (err) {
      if (code(err) === 'EEXIST') throw new FsProblem('exists');
      if (code(err) === 'ENOENT') throw new FsProblem('missing');
      if (code(err) === 'ENOTDIR') throw new FsProblem('not-folder');
      throw err;
    }
    return info(await fs.lstat(abs));
  }

  async rename(root: string, from: string, to: string): Promise<EntryInfo> {
    const src = await locate(root, from);
    const dst = await locate(root, to);
    await fs.rename(src.abs, dst.abs);
    return info(await fs.lstat(dst.abs));
  }

  async remove(root: string, rel: string): Promise<void> {
    const { abs } = await locate(root, rel);
    // rm does not follow symlinks, neither the entry itself nor any inside the tree.
    await fs.rm(abs, { recursive: true, force: false });
  }

  async removeEmptyDir(root: string, rel: string): Promise<boolean> {
    const { abs } = await locate(root, rel);
    try {
      await fs.rmdir(abs);
      return true;
    } catch (err) {
      if (['ENOENT', 'ENOTDIR', 'ENOTEMPTY', 'EEXIST'].includes(code(err) ?? '')) return false;
      throw err;
    }
  }

  async checkTree(root: string, rel: string): Promise<void> {
    const { abs, realRoot } = await locate(root, rel);
    await walkTree(abs, '', async (p, sub, st) => {
      if (st.isSymbolicLink()) {
        if (!(await linkStaysInside(realRoot, p))) throw new FsProblem('link-outside', sub);
      } else if (!st.isFile() && !st.isDirectory()) {
        throw new FsProblem('special', sub);
      }
    });
  }

  async copy(srcRoot: string, src: string, dstRoot: string, dst: string): Promise<EntryInfo> {
    const from = await locate(srcRoot, src);
    const to = await locate(dstRoot, dst);
    try {
      // verbatimSymlinks: links are copied as links with their text unchanged, never dereferenced.
      await fs.cp(from.abs, to.abs, { recursive: true, verbatimSymlinks: true, errorOnExist: true, force: false, preserveTimestamps: true });
    } catch (err) {
      if (code(err) === 'EEXIST' || code(err) === 'ERR_FS_CP_EEXIST') throw new FsProblem('exists');
      // Undo a partial copy.
      await fs.rm(to.abs, { recursive: true, force: true }).catch(() => undefined);
      throw err;
    }
    return info(await fs.lstat(to.abs));
  }

  async search(root: string, start: string, match: (name: string) => boolean, limit: number): Promise<{ hits: SearchHit[]; truncated: boolean }> {
    const { abs: startAbs } = await locate(root, start);
    await requireDir(startAbs);
    const hits: SearchHit[] = [];
    let truncated = false;
    // Dirent types come from readdir without following links, so symlinked folders are reported but never entered.
    const queue: Array<{ abs: string; rel: string }> = [{ abs: startAbs, rel: '' }];
    outer: for (let next = 0; next < queue.length; next++) {
      const dir = queue[next];
      let dirents: Dirent[];
      try {
        dirents = await fs.readdir(dir.abs, { withFileTypes: true });
      } catch (err) {
        if (next === 0) throw err;
        continue; // a subfolder that vanished or cannot be read is skipped
      }
      dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      for (const d of dirents) {
        const abs = path.join(dir.abs, d.name);
        const rel = joinRel(dir.rel, d.name);
        if (match(d.name)) {
          if (hits.length >= limit) {
            truncated = true;
            break outer;
          }
          const st = await lstatOrNull(abs);
          if (st) hits.push({ path: rel, name: d.name, entry: info(st) });
        }
        if (d.isDirectory()) queue.push({ abs, rel });
      }
    }
    return { hits, truncated };
  }
}
