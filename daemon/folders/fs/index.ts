/**
 * The local filesystem as the folders driver: pools, folder directories and
 * location mounts are all ordinary directories here.
 *
 * Every call opens its root, walks to what it acts on one component at a
 * time from open directories (paths.ts) and acts relative to the directory
 * it holds (dir.ts), so that nothing a process inside the root does to the
 * names meanwhile (swapping a folder for a symlink pointing outside) can make
 * it read, write or remove anything outside the root.
 */
import type { Stats } from 'node:fs';
import fs from 'node:fs/promises';
import { FsProblem, onEnd, type EntryInfo, type FilesDriver, type Look, type NamedEntry, type SearchHit } from '../driver.js';
import { baseName, joinRel, parentRel } from '../names.js';
import { code, Dir } from './dir.js';
import { info, lookWith, Walker } from './paths.js';
import { checkEntry, copyEntry, removeEntry, type CopyGuard } from './tree.js';

/** Folders a search keeps open at once (the rest are opened again from their parent when needed). */
const SEARCH_OPEN_DIRS = 64;

async function withWalker<T>(root: string, fn: (w: Walker) => Promise<T>): Promise<T> {
  const w = await Walker.open(root);
  try {
    return await fn(w);
  } finally {
    await w.close();
  }
}

export class LocalFiles implements FilesDriver {
  async ensureRoot(root: string): Promise<void> {
    await fs.mkdir(root, { recursive: true });
  }

  look(root: string, rel: string): Promise<Look> {
    return withWalker(root, (w) => lookWith(w, rel));
  }

  list(root: string, rel: string): Promise<NamedEntry[]> {
    return withWalker(root, async (w) => {
      const name = await w.toParent(rel);
      if (name !== '') {
        const stop = await w.walk([name], true);
        if (stop.kind === 'blocked') throw new FsProblem(stop.way);
        if (stop.kind === 'entry') throw new FsProblem(stop.st ? 'not-folder' : 'missing');
      }
      const dir = w.top;
      const names = await fs.readdir(dir.self);
      // allSettled: no lstat may still run on the descriptor when the walker closes it.
      const stats = await Promise.allSettled(names.map((n) => fs.lstat(dir.at(n))));
      const out: NamedEntry[] = [];
      for (const [i, r] of stats.entries()) {
        if (r.status === 'fulfilled') out.push({ name: names[i], ...info(r.value) });
        else if (code(r.reason) !== 'ENOENT') throw r.reason; // vanished meanwhile: skipped
      }
      return out;
    });
  }

  mkdir(root: string, rel: string): Promise<EntryInfo> {
    return withWalker(root, async (w) => {
      const name = await w.toParent(rel);
      try {
        await fs.mkdir(w.top.at(name));
      } catch (err) {
        if (code(err) === 'EEXIST') throw new FsProblem('exists');
        throw err;
      }
      return info(await fs.lstat(w.top.at(name)));
    });
  }

  rename(root: string, from: string, to: string): Promise<EntryInfo> {
    return withWalker(root, (a) =>
      withWalker(root, async (b) => {
        const src = await onEnd('from', a.toParent(from));
        const dst = await onEnd('to', b.toParent(to));
        await fs.rename(a.top.at(src), b.top.at(dst));
        return info(await fs.lstat(b.top.at(dst)));
      }),
    );
  }

  remove(root: string, rel: string): Promise<void> {
    return withWalker(root, async (w) => {
      const name = await w.toParent(rel);
      await removeEntry(w.top, name);
    });
  }

  removeEmptyDir(root: string, rel: string): Promise<boolean> {
    return withWalker(root, async (w) => {
      let name: string;
      try {
        name = await w.toParent(rel);
      } catch (err) {
        if (err instanceof FsProblem && (err.kind === 'missing' || err.kind === 'not-folder')) return false;
        throw err;
      }
      try {
        await fs.rmdir(w.top.at(name));
        return true;
      } catch (err) {
        if (['ENOENT', 'ENOTDIR', 'ENOTEMPTY', 'EEXIST'].includes(code(err) ?? '')) return false;
        throw err;
      }
    });
  }

  checkTree(root: string, rel: string): Promise<void> {
    return withWalker(root, async (w) => {
      const name = await w.toParent(rel);
      if (name === '') throw new FsProblem('missing');
      await checkEntry(root, w.top, [...w.real], name, '');
    });
  }

  copy(srcRoot: string, src: string, dstRoot: string, dst: string, progress?: (entries: number) => Promise<void> | void): Promise<EntryInfo> {
    return withWalker(srcRoot, (s) =>
      withWalker(dstRoot, async (t) => {
        const from = await onEnd('from', s.toParent(src));
        const to = await onEnd('to', t.toParent(dst));
        const guard: CopyGuard = { count: 0, progress };
        try {
          await copyEntry(s.top, from, t.top, to, guard, '');
        } catch (err) {
          if (!guard.created) throw code(err) === 'EEXIST' ? new FsProblem('exists', '', 'to') : err;
          // Undo a partial copy: what this copy made.
          await removeEntry(t.top, to).catch(() => undefined);
          throw err;
        }
        return info(await fs.lstat(t.top.at(to)));
      }),
    );
  }

  search(root: string, start: string, match: (name: string) => boolean, limit: number): Promise<{ hits: SearchHit[]; truncated: boolean }> {
    return withWalker(root, async (w) => {
      const name = await w.toParent(start);
      if (name !== '') {
        const stop = await w.walk([name], true);
        if (stop.kind === 'blocked') throw new FsProblem(stop.way);
        if (stop.kind === 'entry') throw new FsProblem(stop.st ? 'not-folder' : 'missing');
      }
      const dirs = new OpenDirs(w.top);
      try {
        const hits: SearchHit[] = [];
        let truncated = false;
        // Dirent types come from readdir without following links, so symlinked folders are reported but never entered.
        const queue: string[] = [''];
        outer: for (let next = 0; next < queue.length; next++) {
          const rel = queue[next];
          const dir = await dirs.get(rel);
          if (!dir) continue; // a subfolder that vanished, changed or cannot be read is skipped
          let dirents;
          try {
            dirents = await fs.readdir(dir.self, { withFileTypes: true });
          } catch (err) {
            if (rel === '') throw err;
            continue;
          }
          dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
          for (const d of dirents) {
            const childRel = joinRel(rel, d.name);
            if (match(d.name)) {
              if (hits.length >= limit) {
                truncated = true;
                break outer;
              }
              const st = await lstatOrNull(dir, d.name);
              if (st) hits.push({ path: childRel, name: d.name, entry: info(st) });
            }
            if (d.isDirectory()) queue.push(childRel);
          }
        }
        return { hits, truncated };
      } finally {
        await dirs.close();
      }
    });
  }
}

async function lstatOrNull(dir: Dir, name: string): Promise<Stats | null> {
  try {
    return await fs.lstat(dir.at(name));
  } catch (err) {
    if (code(err) === 'ENOENT') return null;
    throw err;
  }
}

/**
 * The folders of a search, by path relative to its start: the start always
 * open, the others opened from their parent without following links and kept
 * in a small most-recently-used set (a breadth-first walk reads siblings one
 * after another, so their parent is nearly always still open).
 */
class OpenDirs {
  private readonly open = new Map<string, Dir>();

  constructor(private readonly start: Dir) {}

  async get(rel: string): Promise<Dir | null> {
    if (rel === '') return this.start;
    const held = this.open.get(rel);
    if (held) {
      this.open.delete(rel);
      this.open.set(rel, held);
      return held;
    }
    const parent = await this.get(parentRel(rel));
    if (!parent) return null;
    let d: Dir;
    try {
      d = await parent.openDir(baseName(rel));
    } catch {
      return null;
    }
    this.open.set(rel, d);
    while (this.open.size > SEARCH_OPEN_DIRS) {
      const [oldest, dir] = this.open.entries().next().value as [string, Dir];
      this.open.delete(oldest);
      await dir.close();
    }
    return d;
  }

  async close(): Promise<void> {
    for (const d of this.open.values()) await d.close();
    this.open.clear();
  }
}
