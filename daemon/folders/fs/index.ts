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
import type { Dirent, Stats } from 'node:fs';
import fs from 'node:fs/promises';
import { availableAs, missing, ProbeCache, type Availability } from '../../lib/availability.js';
import { FsProblem, onEnd, PROCFS, type EntryInfo, type FilesDriver, type Look, type NamedEntry, type SearchHit } from '../driver.js';
import { code, type Dir, procMounted } from './dir.js';
import { info, lookWith, Walker } from './paths.js';
import { checkEntry, copyEntry, removeEntry, type CopyGuard } from './tree.js';

/** Folders a search keeps open at once (the rest are opened again from their parent when needed). */
const SEARCH_OPEN_DIRS = 64;
/**
 * Directory entries read from the kernel at a time, and the run of names a
 * search sorts and examines together: a folder is never held whole in memory,
 * however many entries it has.
 */
const READ_RUN = 1024;
/** Folders a search keeps waiting to be read; beyond it the search stops going deeper and says it was cut. */
export const SEARCH_QUEUE_LIMIT = 100_000;
/** lstat calls in flight at once for one listing. */
const LSTAT_PARALLEL = 32;

async function withWalker<T>(root: string, fn: (w: Walker) => Promise<T>): Promise<T> {
  const w = await Walker.open(root);
  try {
    return await fn(w);
  } finally {
    await w.close();
  }
}

/** procfs as `availability()` reports it: nothing else is needed (Node's own calls, no host program). */
async function probe(): Promise<Availability[]> {
  return [
    procMounted()
      ? availableAs(PROCFS, null)
      : missing(PROCFS, 'the folders domain needs /proc mounted: it resolves every path from open directories through /proc/self/fd'),
  ];
}

export class LocalFiles implements FilesDriver {
  private readonly probe = new ProbeCache(probe);

  availability(opts?: { fresh?: boolean }): Promise<Availability[]> {
    return this.probe.get(opts);
  }

  async ensureRoot(root: string): Promise<void> {
    await fs.mkdir(root, { recursive: true });
  }

  look(root: string, rel: string): Promise<Look> {
    return withWalker(root, (w) => lookWith(w, rel));
  }

  list(root: string, rel: string, limit = Infinity): Promise<{ entries: NamedEntry[]; truncated: boolean }> {
    return withWalker(root, async (w) => {
      const name = await w.toParent(rel);
      if (name !== '') {
        const stop = await w.walk([name], true);
        if (stop.kind === 'blocked') throw new FsProblem(stop.way);
        if (stop.kind === 'entry') throw new FsProblem(stop.st ? 'not-folder' : 'missing');
      }
      const dir = w.top;
      // The folder is read as a stream and only the first `limit` names in the answer's order
      // (folders first, then by name) are kept: memory follows `limit`, not the folder's size.
      const keep = new Smallest<{ name: string; folder: boolean }>(limit, (a, b) =>
        a.folder !== b.folder ? (a.folder ? -1 : 1) : a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
      );
      let seen = 0;
      for await (const e of await fs.opendir(dir.self, { bufferSize: READ_RUN })) {
        seen++;
        keep.offer({ name: e.name, folder: e.isDirectory() });
      }
      const names = keep.values().map((k) => k.name);
      const out: NamedEntry[] = [];
      for (let i = 0; i < names.length; i += LSTAT_PARALLEL) {
        const part = names.slice(i, i + LSTAT_PARALLEL);
        // allSettled: no lstat may still run on the descriptor when the walker closes it.
        const stats = await Promise.allSettled(part.map((n) => fs.lstat(dir.at(n))));
        for (const [j, r] of stats.entries()) {
          if (r.status === 'fulfilled') out.push({ name: part[j], ...info(r.value) });
          else if (code(r.reason) !== 'ENOENT') throw r.reason; // vanished meanwhile: skipped
        }
      }
      return { entries: out, truncated: seen > names.length };
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
      const top: Folder = { parent: null, name: '' };
      const dirs = new OpenDirs(w.top, top);
      try {
        const hits: SearchHit[] = [];
        let truncated = false;
        // Folders waiting to be read, as links to their parent (a path string per queued folder
        // would cost its depth each); read from `head`, the part before it dropped as the walk goes.
        let queue: Folder[] = [top];
        let head = 0;
        outer: while (head < queue.length) {
          const folder = queue[head++];
          if (head >= READ_RUN && head * 2 >= queue.length) {
            queue = queue.slice(head);
            head = 0;
          }
          const dir = await dirs.get(folder);
          if (!dir) continue; // a subfolder that vanished, changed or cannot be read is skipped
          let stream: Awaited<ReturnType<typeof fs.opendir>>;
          try {
            stream = await fs.opendir(dir.self, { bufferSize: READ_RUN });
          } catch (err) {
            if (folder === top) throw err;
            continue;
          }
          try {
            // Dirent types come from readdir without following links, so symlinked folders are reported but never entered.
            let run: Dirent[] = [];
            const examine = async (): Promise<boolean> => {
              run.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
              for (const d of run) {
                if (match(d.name)) {
                  if (hits.length >= limit) return false;
                  const st = await lstatOrNull(dir, d.name);
                  if (st) hits.push({ path: pathOf(folder, d.name), name: d.name, entry: info(st) });
                }
                if (d.isDirectory()) {
                  if (queue.length - head < SEARCH_QUEUE_LIMIT) queue.push({ parent: folder, name: d.name });
                  else truncated = true;
                }
              }
              run = [];
              return true;
            };
            for await (const d of stream) {
              run.push(d);
              if (run.length >= READ_RUN && !(await examine())) {
                truncated = true;
                break outer;
              }
            }
            if (!(await examine())) {
              truncated = true;
              break;
            }
          } catch (err) {
            if (folder === top) throw err;
          } finally {
            // A break leaves the stream open: close it (closing a closed one is a no-op here).
            await stream.close().catch(() => undefined);
          }
        }
        return { hits, truncated };
      } finally {
        await dirs.close();
      }
    });
  }
}

/** A folder of a search: its name in its parent (the start has none). */
interface Folder {
  parent: Folder | null;
  name: string;
}

/** The path of `name` in `folder`, relative to the start of the search. */
function pathOf(folder: Folder, name: string): string {
  const parts = [name];
  for (let f: Folder | null = folder; f && f.parent; f = f.parent) parts.push(f.name);
  return parts.reverse().join('/');
}

/**
 * The `limit` smallest of the values offered, by `cmp`, kept in a max-heap so
 * that memory follows `limit` however many are offered.
 */
class Smallest<T> {
  private readonly heap: T[] = [];

  constructor(
    private readonly limit: number,
    private readonly cmp: (a: T, b: T) => number,
  ) {}

  offer(v: T): void {
    const h = this.heap;
    if (h.length < this.limit) {
      h.push(v);
      let i = h.length - 1;
      while (i > 0) {
        const up = (i - 1) >> 1;
        if (this.cmp(h[up], h[i]) >= 0) break;
        [h[up], h[i]] = [h[i], h[up]];
        i = up;
      }
      return;
    }
    if (!h.length || this.cmp(v, h[0]) >= 0) return;
    h[0] = v;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let big = i;
      if (l < h.length && this.cmp(h[l], h[big]) > 0) big = l;
      if (r < h.length && this.cmp(h[r], h[big]) > 0) big = r;
      if (big === i) break;
      [h[big], h[i]] = [h[i], h[big]];
      i = big;
    }
  }

  /** The values kept, smallest first. */
  values(): T[] {
    return [...this.heap].sort(this.cmp);
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
 * The folders of a search: the start always open, the others opened from
 * their parent without following links and kept in a small most-recently-used
 * set (a breadth-first walk reads siblings one after another, so their parent
 * is nearly always still open).
 */
class OpenDirs {
  private readonly open = new Map<Folder, Dir>();

  constructor(
    private readonly start: Dir,
    private readonly top: Folder,
  ) {}

  async get(folder: Folder): Promise<Dir | null> {
    if (folder === this.top || !folder.parent) return this.start;
    const held = this.open.get(folder);
    if (held) {
      this.open.delete(folder);
      this.open.set(folder, held);
      return held;
    }
    const parent = await this.get(folder.parent);
    if (!parent) return null;
    let d: Dir;
    try {
      d = await parent.openDir(folder.name);
    } catch {
      return null;
    }
    this.open.set(folder, d);
    while (this.open.size > SEARCH_OPEN_DIRS) {
      const [oldest, dir] = this.open.entries().next().value as [Folder, Dir];
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
