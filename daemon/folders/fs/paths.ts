/**
 * Where a relative path of a root leads, resolved one component at a time
 * from open directories (dir.ts), the way openat2(RESOLVE_IN_ROOT) would but
 * refusing instead of clamping:
 *
 * - every folder on the way is opened with O_NOFOLLOW|O_DIRECTORY from the
 *   folder before it, so what is resolved is what is then acted on: nothing
 *   done to the names meanwhile can send a later call elsewhere;
 * - a symlink on the way (and the final entry where a call follows it) is
 *   read and its text resolved in place: relative text from the folder
 *   holding the link, absolute text only when it names the root or a place
 *   below it (by the root's path as given or as the kernel reports it);
 *   a '..' above the root, or an absolute link elsewhere, is `escape`;
 * - more than 40 links (or a name that keeps changing kind under the walk)
 *   is `loop`;
 * - a missing or non-folder component ends the walk; the rest of the path is
 *   then followed lexically, so a dangling link to a place outside is still
 *   seen as outside.
 */
import type { Stats } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { badRequest } from '../../lib/errors.js';
import { FsProblem, type EntryInfo, type EntryType, type Look } from '../driver.js';
import { splitSubPath, type PathArg } from '../names.js';
import { code, Dir } from './dir.js';

/** How many symlinks are resolved before giving up (Linux uses 40). */
const MAX_LINK_HOPS = 40;

export type ConfineOptions = PathArg;

export interface Confined {
  /** Absolute path of the entry: real parent directory + final name (the real root for ''). */
  abs: string;
  /** Normalised path relative to the root, segments joined with '/'; '' is the root. */
  rel: string;
  /** Real path of the root. */
  root: string;
}

/** True when `p` is `root` or lies below it. */
export function isInsideOrEqual(root: string, p: string): boolean {
  if (p === root) return true;
  const base = root.endsWith(path.sep) ? root : root + path.sep;
  return p.startsWith(base);
}

/** True when `p` lies strictly below `root`. */
export function isStrictlyInside(root: string, p: string): boolean {
  return p !== root && isInsideOrEqual(root, p);
}

export function typeOf(st: Stats): EntryType {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'folder';
  if (st.isSymbolicLink()) return 'symlink';
  return 'other';
}

export function info(st: Stats): EntryInfo {
  return { type: typeOf(st), size: st.size, mtime: st.mtime };
}

/** Segments of a normalised relative path ('' is none). */
export function segments(rel: string): string[] {
  return rel === '' ? [] : rel.split('/');
}

/** Where a walk ended. */
export type Stop =
  /** On a folder: the walker's top. */
  | { kind: 'dir' }
  /** On the entry `name` of the walker's top, not followed or not a folder; `st` null when missing. */
  | { kind: 'entry'; name: string; st: Stats | null }
  /** A folder on the way is missing or is not one; `lexical` is the real path the rest would have had. */
  | { kind: 'blocked'; way: 'missing' | 'not-folder'; lexical: string[] };

/** A stack of open directories from a root down to where a walk is. */
export class Walker {
  private readonly stack: Dir[];
  /** The real path (relative to the root) of the top of the stack. */
  readonly real: string[] = [];
  private hops = 0;

  private realRootSeen?: string;

  private constructor(
    root: Dir,
    /** The root's path as given. */
    private readonly given: string,
  ) {
    this.stack = [root];
  }

  /** The root's path as the kernel reports it (asked only when needed: an absolute link, a message). */
  async realRoot(): Promise<string> {
    this.realRootSeen ??= await this.root.whereNow();
    return this.realRootSeen;
  }

  /** Opens a root (trusted, links on its own path followed); `root-missing` when it is not there. */
  static async open(root: string): Promise<Walker> {
    let d: Dir;
    try {
      d = await Dir.openTrusted(root);
    } catch (err) {
      if (code(err) === 'ENOENT' || code(err) === 'ENOTDIR') throw new FsProblem('root-missing');
      throw err;
    }
    return new Walker(d, path.resolve(root));
  }

  get top(): Dir {
    return this.stack[this.stack.length - 1];
  }

  get root(): Dir {
    return this.stack[0];
  }

  /**
   * Walks `comps` from the top of the stack. The final component is followed
   * (a link resolved, a folder entered) only when `followFinal`.
   */
  async walk(comps: string[], followFinal: boolean): Promise<Stop> {
    const todo = comps.filter((c) => c !== '' && c !== '.');
    while (todo.length > 0) {
      const c = todo.shift()!;
      if (c === '..') {
        if (this.stack.length === 1) throw new FsProblem('escape');
        await this.stack.pop()!.close();
        this.real.pop();
        continue;
      }
      const last = todo.length === 0;
      const top = this.top;
      const follow = !last || followFinal;
      if (follow) {
        // Open it as a folder first (one call for the common case); otherwise look at what it is.
        let d: Dir | undefined;
        try {
          d = await top.openDir(c);
        } catch (err) {
          // ELOOP or ENOTDIR (O_NOFOLLOW|O_DIRECTORY on a symlink gives either), or ENOENT.
          if (code(err) !== 'ELOOP' && code(err) !== 'ENOTDIR' && code(err) !== 'ENOENT') throw err;
        }
        if (d) {
          this.stack.push(d);
          this.real.push(c);
          continue;
        }
      }
      let st: Stats | null = null;
      try {
        st = await fs.lstat(top.at(c));
      } catch (err) {
        if (code(err) !== 'ENOENT') throw err;
      }
      if (!st) {
        if (last) return { kind: 'entry', name: c, st: null };
        return this.blocked('missing', [c, ...todo]);
      }
      if (follow && st.isSymbolicLink()) {
        // Read the link and walk its text instead.
        this.hop();
        let text: string;
        try {
          text = await fs.readlink(top.at(c));
        } catch (err) {
          // Changed since the lstat: look at it again.
          if (code(err) !== 'ENOENT' && code(err) !== 'EINVAL') throw err;
          todo.unshift(c);
          continue;
        }
        todo.unshift(...(await this.linkText(text)));
        continue;
      }
      if (follow && st.isDirectory()) {
        // A folder now, not when it was opened (swapped meanwhile): look at it again.
        this.hop();
        todo.unshift(c);
        continue;
      }
      if (last) return { kind: 'entry', name: c, st };
      return this.blocked('not-folder', [c, ...todo]);
    }
    return { kind: 'dir' };
  }

  /** Walks to the parent of `rel`, which must be a folder; returns the final name ('' for the root itself). */
  async toParent(rel: string): Promise<string> {
    const segs = segments(rel);
    const name = segs.pop() ?? '';
    const stop = await this.walk(segs, true);
    if (stop.kind === 'blocked') throw new FsProblem(stop.way);
    if (stop.kind === 'entry') throw new FsProblem(stop.st ? 'not-folder' : 'missing');
    return name;
  }

  /** Closes every directory it holds; callers make sure no call through them is still running. */
  async close(): Promise<void> {
    const all = this.stack.splice(0);
    await Promise.all(all.map((d) => d.close()));
  }

  private hop(): void {
    if (++this.hops > MAX_LINK_HOPS) throw new FsProblem('loop');
  }

  /** The components a link's text stands for, from the top of the stack (absolute text restarts at the root). */
  private async linkText(text: string): Promise<string[]> {
    const parts = (t: string) => t.split('/').filter((c) => c !== '' && c !== '.');
    if (!text.startsWith('/')) return parts(text);
    for (const alias of new Set([await this.realRoot(), this.given])) {
      const base = alias.endsWith('/') ? alias : `${alias}/`;
      if (text === alias || text.startsWith(base)) {
        while (this.stack.length > 1) await this.stack.pop()!.close();
        this.real.length = 0;
        return text === alias ? [] : parts(text.slice(base.length));
      }
    }
    throw new FsProblem('escape');
  }

  private blocked(way: 'missing' | 'not-folder', rest: string[]): Stop {
    const lexical = [...this.real];
    for (const r of rest) {
      if (r === '' || r === '.') continue;
      if (r === '..') {
        if (lexical.length === 0) throw new FsProblem('escape');
        lexical.pop();
      } else lexical.push(r);
    }
    return { kind: 'blocked', way, lexical };
  }
}

/** Where `rel` leads from the walker's root: the driver's `look`, on an open walker. */
export async function lookWith(w: Walker, rel: string): Promise<Look> {
  const stop = await w.walk(segments(rel), false);
  if (stop.kind === 'dir') {
    const st = info(await w.top.stat());
    return { real: w.real.join('/'), way: 'ok', entry: st, target: st };
  }
  if (stop.kind === 'blocked') return { real: stop.lexical.join('/'), way: stop.way, entry: null, target: null };
  const real = [...w.real, stop.name].join('/');
  if (!stop.st) return { real, way: 'ok', entry: null, target: null };
  let target: Stats | null = stop.st;
  if (stop.st.isSymbolicLink()) {
    // Following the link from where it is: `escape` when it leads out, even dangling.
    const t = await w.walk([stop.name], true);
    target = t.kind === 'dir' ? await w.top.stat() : t.kind === 'entry' ? t.st : null;
  }
  return { real, way: 'ok', entry: info(stop.st), target: target && info(target) };
}

/**
 * Confines a user sub-path to `root`: where it leads now, for tests and
 * messages (never act on the answer: the driver resolves again, from open
 * directories). Throws ApiError 400 naming the argument when the path is not
 * allowed or escapes the root; the root itself must exist (its fs error is
 * passed through for the caller to map).
 */
export async function confine(root: string, sub: unknown, opts: ConfineOptions = {}): Promise<Confined> {
  const arg = opts.arg ?? 'sub_path';
  const within = opts.within ?? 'folder';
  const segs = splitSubPath(sub, opts);
  await fs.realpath(root);
  const w = await Walker.open(root);
  try {
    const look = await lookWith(w, segs.join('/'));
    const realRoot = await w.realRoot();
    return { abs: path.join(realRoot, ...segments(look.real)), rel: segs.join('/'), root: realRoot };
  } catch (err) {
    if (err instanceof FsProblem && err.kind === 'escape') throw badRequest(`argument '${arg}' must stay inside the ${within}`);
    if (err instanceof FsProblem && err.kind === 'loop') throw badRequest(`argument '${arg}' runs into a symlink loop`);
    throw err;
  } finally {
    await w.close();
  }
}

/** `confine` returning only the absolute path. */
export async function confinePath(root: string, sub: unknown, opts: ConfineOptions = {}): Promise<string> {
  return (await confine(root, sub, opts)).abs;
}
