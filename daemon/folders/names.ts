/**
 * Names and sub-paths as the folders API accepts them: the lexical rules,
 * with no filesystem access. Where a path really leads is the driver's
 * business (driver.ts); these rules only refuse what can never be right.
 *
 * `validateName` is the rule for every name the API creates (folder names,
 * `new_name`, subfolder names); other domains that create names on disk may
 * reuse it.
 */
import { badRequest } from '../lib/errors.js';
import { INTERNAL_PREFIX, isInternalName, LEGACY_INTERNAL_NAMES } from '../lib/host-paths.js';

export const MAX_NAME_BYTES = 255;

/**
 * An unpaired UTF-16 surrogate (JSON allows "\ud800"). It has no UTF-8 form:
 * the filesystem would get U+FFFD instead, so the record's name and its
 * directory's name would differ, and 'a\ud800' and 'a\udc00' would be one
 * directory.
 */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;
const NOT_UNICODE = 'must be valid Unicode text (it contains an unpaired surrogate)';

/**
 * Control characters (Unicode Cc: C0, DEL, C1): a name holding a newline, a
 * tab or an escape is legal on Linux but unusable by SMB clients and most
 * tools, and treacherous in listings and logs.
 */
export const CONTROL_CHARS = /[\u0000-\u001F\u007F-\u009F]/u;

export interface PathArg {
  /** Argument name used in error messages, e.g. 'sub_path' or 'target.path'. */
  arg?: string;
  /** What the root is, for messages: 'folder' (default) or 'location'. */
  within?: string;
}

/**
 * Validates one name the API creates (folder name, subfolder name, new_name):
 * non-empty, no NUL or other control character, no unpaired surrogate, no '/',
 * no '\', not '.' or '..', at most 255 bytes of UTF-8. The registry states the
 * same rule as a schema pattern (api/registry/folders.ts `NAME_PATTERN`).
 */
export function validateName(name: unknown, arg = 'name'): string {
  if (typeof name !== 'string') throw badRequest(`argument '${arg}' must be a string`);
  if (name === '') throw badRequest(`argument '${arg}' must not be empty`);
  if (name.includes('\0')) throw badRequest(`argument '${arg}' must not contain NUL bytes`);
  if (CONTROL_CHARS.test(name)) throw badRequest(`argument '${arg}' must not contain control characters`);
  if (LONE_SURROGATE.test(name)) throw badRequest(`argument '${arg}' ${NOT_UNICODE}`);
  if (name.includes('/')) throw badRequest(`argument '${arg}' must be a single name without '/'`);
  if (name.includes('\\')) throw badRequest(`argument '${arg}' must not contain backslashes`);
  if (name === '.' || name === '..') throw badRequest(`argument '${arg}' must not be '.' or '..'`);
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES) throw badRequest(`argument '${arg}' must be at most ${MAX_NAME_BYTES} bytes`);
  return name;
}

/**
 * A folder sits directly in a pool, beside the directories every domain keeps
 * there (`.hostd-*`, the VM domain's `.vms`): a folder with one of those
 * names would be that directory, shared as storage. The names come from the
 * one list in daemon/lib/host-paths.ts.
 */
export function checkNotInternal(name: string, arg = 'name'): string {
  if (!isInternalName(name)) return name;
  const legacy = LEGACY_INTERNAL_NAMES.find((n) => n === name.toLowerCase());
  throw badRequest(legacy ? `argument '${arg}' must not be '${legacy}' (reserved)` : `argument '${arg}' must not start with '${INTERNAL_PREFIX}' (reserved)`);
}

/**
 * Splits a user sub-path into its segments, refusing what can never be inside
 * the root: null, undefined and '' are the root; NUL bytes, unpaired
 * surrogates, backslashes, a leading '/' and any '..' segment are refused;
 * empty and '.' segments are collapsed; a segment over 255 bytes is refused.
 */
export function splitSubPath(sub: unknown, opts: PathArg = {}): string[] {
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

/** The name a destination path creates (its last segment) must hold no control character, like any name the API creates. */
export function validateNewEntry(rel: string, arg: string): void {
  if (CONTROL_CHARS.test(baseName(rel))) throw badRequest(`argument '${arg}' must not contain control characters in the name it creates`);
}

// ----- relative paths ('/'-joined segments, '' for the root) ----------------

export function joinRel(parent: string, name: string): string {
  return parent === '' ? name : `${parent}/${name}`;
}

export function parentRel(rel: string): string {
  const i = rel.lastIndexOf('/');
  return i < 0 ? '' : rel.slice(0, i);
}

export function baseName(rel: string): string {
  return rel.slice(rel.lastIndexOf('/') + 1);
}

/** True when relative path `p` lies strictly below `outer` ('' is the root, which holds everything else). */
export function relStrictlyInside(outer: string, p: string): boolean {
  if (p === outer) return false;
  return outer === '' || p.startsWith(outer + '/');
}

/** How a relative path reads in a message: '/' for the root. */
export function showRel(rel: string): string {
  return rel === '' ? '/' : rel;
}
