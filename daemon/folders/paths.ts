/**
 * Path confinement for the folders domain.
 *
 * Every user-supplied path (`sub_path`, `src_sub_path`, `dst_sub_path`,
 * `target.path`, batch move pairs) goes through `confine`, which returns an
 * absolute path that is guaranteed (at the time of the check) to lie inside
 * the real location of the folder or location root.
 *
 * Rules (see docs/folders.md):
 * - null, undefined and '' mean the root;
 * - NUL bytes and backslashes are refused;
 * - a leading '/' (an absolute path) and any '..' segment are refused;
 * - empty segments ('a//b', a trailing '/') and '.' segments are collapsed;
 * - a segment longer than 255 bytes is refused;
 * - the real location of the parent (fs.realpath of its deepest existing
 *   ancestor, dangling symlinks resolved by hand) and of the target itself
 *   must be inside the real root: symlinks pointing outside are refused, both
 *   as a path component and as the final entry.
 *
 * The returned `abs` is the real parent directory joined with the final name,
 * so an operation on it acts on the entry itself (a symlink is removed or
 * moved as a link, never through it).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { badRequest } from '../lib/errors.js';

export const MAX_NAME_BYTES = 255;
/** How many symlinks are resolved by hand before giving up (Linux uses 40). */
const MAX_LINK_HOPS = 40;

export interface ConfineOptions {
  /** Argument name used in error messages, e.g. 'sub_path' or 'target.path'. */
  arg?: string;
  /** What the root is, for messages: 'folder' (default) or 'location'. */
  within?: string;
}

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

/**
 * An unpaired UTF-16 surrogate (JSON allows "\ud800"). It has no UTF-8 form:
 * the filesystem would get U+FFFD instead, so the record's name and its
 * directory's name would differ, and 'a\ud800' and 'a\udc00' would be one
 * directory.
 */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;
const NOT_UNICODE = 'must be valid Unicode text (it contains an unpaired surrogate)';

/**
 * Validates one name (folder name, subfolder name, new_name): non-empty, no
 * '/', no '\', no NUL, no unpaired surrogate, not '.' or '..', at most 255 bytes
 * of UTF-8.
 */
export function validateName(name: unknown, arg = 'name'): string {
  if (typeof name !== 'string') throw badRequest(`argument '${arg}' must be a string`);
  if (name === '') throw badRequest(`argument '${arg}' must not be empty`);
  if (name.includes('\0')) throw badRequest(`argument '${arg}' must not contain NUL bytes`);
  if (LONE_SURROGATE.test(name)) throw badRequest(`argument '${arg}' ${NOT_UNICODE}`);
  if (name.includes('/')) throw badRequest(`argument '${arg}' must be a single name without '/'`);
  if (name.includes('\\')) throw badRequest(`argument '${arg}' must not contain backslashes`);
  if (name === '.' || name === '..') throw badRequest(`argument '${arg}' must not be '.' or '..'`);
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES) throw badRequest(`argument '${arg}' must be at most ${MAX_NAME_BYTES} bytes`);
  return name;
}

/**
 * The lexical part of confinement: splits a user sub-path into its segments,
 * refusing what can never be inside the root. No filesystem access.
 */
export function splitSubPath(sub: unknown, opts: ConfineOptions = {}): string[] {
  const arg = opts.arg ?? 'sub_path';
  const within = opts.within ?? 'folder';
  if (sub === undefined || sub === null) return [];
  if (typeof sub !== 'string') throw badRequest(`argument '${arg}' must be a string`);
  if (sub.includes('\0')) throw badRequest(`argument '${arg}' must not contain NUL bytes`);
  if (LONE_SURROGATE.test(sub)) throw badRequest(`argument '${arg}' ${NOT_UNICODE}`);
  if (sub.includes('\\')) throw badRequest(`argument '${arg}' must not contain backslashes`);
  if (sub.startsWith('/')) throw badRequest(`argument '${arg}' must stay inside the ${within}`);
  const segs: string[] = [];
  for (const seg of sub.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') throw badRequest(`argument '${arg}' must stay inside the ${within}`);
    if (Buffer.byteLength(seg, 'utf8') > MAX_NAME_BYTES) {
      throw badRequest(`argument '${arg}' has a path segment longer than ${MAX_NAME_BYTES} bytes`);
    }
    segs.push(seg);
  }
  return segs;
}

class LinkLoop extends Error {}

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
 * Confines a user sub-path to `root`. Throws ApiError 400 naming the argument
 * when the path is not allowed or escapes the root; the root itself must
 * exist (its fs error is passed through for the caller to map).
 */
export async function confine(root: string, sub: unknown, opts: ConfineOptions = {}): Promise<Confined> {
  const arg = opts.arg ?? 'sub_path';
  const within = opts.within ?? 'folder';
  const segs = splitSubPath(sub, opts);
  const realRoot = await fs.realpath(root);
  if (segs.length === 0) return { abs: realRoot, rel: '', root: realRoot };
  const escape = () => badRequest(`argument '${arg}' must stay inside the ${within}`);
  try {
    const realParent = segs.length === 1 ? realRoot : await realLocation(path.join(realRoot, ...segs.slice(0, -1)));
    if (!isInsideOrEqual(realRoot, realParent)) throw escape();
    const abs = path.join(realParent, segs[segs.length - 1]);
    const realSelf = await realLocation(abs);
    if (!isInsideOrEqual(realRoot, realSelf)) throw escape();
    return { abs, rel: segs.join('/'), root: realRoot };
  } catch (err) {
    if (err instanceof LinkLoop) throw badRequest(`argument '${arg}' runs into a symlink loop`);
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
