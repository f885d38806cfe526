/**
 * Where a relative path of a root really leads, by path names (realpath and
 * hand-resolved dangling links): the rules of confinement.
 *
 * - the real location of the parent (fs.realpath of its deepest existing
 *   ancestor, dangling symlinks resolved by hand) and of the entry itself
 *   must be inside the real root: symlinks pointing outside are refused, both
 *   as a path component and as the final entry;
 * - the answer is the real parent directory joined with the final name, so an
 *   operation on it acts on the entry itself (a symlink is removed or moved as
 *   a link, never through it).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { badRequest } from '../../lib/errors.js';
import { splitSubPath, type PathArg } from '../names.js';
import { FsProblem } from '../driver.js';

/** How many symlinks are resolved by hand before giving up (Linux uses 40). */
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

export class LinkLoop extends Error {}

function errCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

/**
 * Where `p` really is: fs.realpath when it exists; otherwise the real location
 * of its deepest existing ancestor with the missing tail appended. A dangling
 * symlink is followed by hand (its text resolved against its real parent), so
 * a link to a not-yet-existing place outside is still seen as outside.
 */
export async function realLocation(p: string, hops = 0): Promise<string> {
  if (hops > MAX_LINK_HOPS) throw new LinkLoop();
  try {
    return await fs.realpath(p);
  } catch (err) {
    const code = errCode(err);
    if (code === 'ELOOP') throw new LinkLoop();
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw err;
  }
  const parent = path.dirname(p);
  if (parent === p) return p; // the filesystem root always exists; not reached in practice
  let st: import('node:fs').Stats | null = null;
  try {
    st = await fs.lstat(p);
  } catch (err) {
    const code = errCode(err);
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw err;
  }
  const realParent = await realLocation(parent, hops);
  if (st?.isSymbolicLink()) {
    const text = await fs.readlink(p);
    return realLocation(path.resolve(realParent, text), hops + 1);
  }
  return path.join(realParent, path.basename(p));
}

/**
 * Where the relative path `rel` (normalised: no '', '.' or '..' segments) of
 * `root` really is: the real parent directory joined with the final name.
 * `escape` when the parent, or the entry itself (a link, even dangling),
 * leads outside the real root; `loop` for a symlink loop; `root-missing`.
 */
export async function locate(root: string, rel: string): Promise<{ abs: string; realRoot: string }> {
  let realRoot: string;
  try {
    realRoot = await fs.realpath(root);
  } catch (err) {
    if (errCode(err) === 'ENOENT' || errCode(err) === 'ENOTDIR') throw new FsProblem('root-missing');
    throw err;
  }
  const segs = rel === '' ? [] : rel.split('/');
  if (segs.length === 0) return { abs: realRoot, realRoot };
  try {
    const realParent = segs.length === 1 ? realRoot : await realLocation(path.join(realRoot, ...segs.slice(0, -1)));
    if (!isInsideOrEqual(realRoot, realParent)) throw new FsProblem('escape');
    const abs = path.join(realParent, segs[segs.length - 1]);
    const realSelf = await realLocation(abs);
    if (!isInsideOrEqual(realRoot, realSelf)) throw new FsProblem('escape');
    return { abs, realRoot };
  } catch (err) {
    if (err instanceof LinkLoop) throw new FsProblem('loop');
    throw err;
  }
}

/**
 * Confines a user sub-path to `root`: where it leads now, for tests and
 * messages (never act on the answer: the driver resolves again, safely).
 * Throws ApiError 400 naming the argument when the path is not allowed or
 * escapes the root; the root itself must exist (its fs error is passed
 * through for the caller to map).
 */
export async function confine(root: string, sub: unknown, opts: ConfineOptions = {}): Promise<Confined> {
  const arg = opts.arg ?? 'sub_path';
  const within = opts.within ?? 'folder';
  const segs = splitSubPath(sub, opts);
  await fs.realpath(root);
  try {
    const { abs, realRoot } = await locate(root, segs.join('/'));
    return { abs, rel: segs.join('/'), root: realRoot };
  } catch (err) {
    if (err instanceof FsProblem && err.kind === 'escape') throw badRequest(`argument '${arg}' must stay inside the ${within}`);
    if (err instanceof FsProblem && err.kind === 'loop') throw badRequest(`argument '${arg}' runs into a symlink loop`);
    throw err;
  }
}

/** `confine` returning only the absolute path. */
export async function confinePath(root: string, sub: unknown, opts: ConfineOptions = {}): Promise<string> {
  return (await confine(root, sub, opts)).abs;
}

/** Whether the symlink at `linkPath` resolves (even dangling) inside `realRoot`. Loops count as outside. */
export async function linkStaysInside(realRoot: string, linkPath: string): Promise<boolean> {
  try {
    return isInsideOrEqual(realRoot, await realLocation(linkPath));
  } catch (err) {
    if (err instanceof LinkLoop) return false;
    throw err;
  }
}
