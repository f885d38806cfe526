/**
 * The one rule for host directories handed to a guest (an LXC mount point
 * today; app folder assignments and any later bind mount may use it too):
 * which host paths are shared storage, and which are hostd's own.
 *
 * Every domain keeps its files inside a storage pool under one directory
 * named by the convention below (`<pool>/.hostd-<domain>`, temporary entries
 * `<pool>/.hostd-<job>-*`), or in the data dir. A guest may be given a path
 * only when its real location (symlinks resolved) is
 *
 *   1. at or below an allowed root (a managed folder, an operator's root),
 *   2. with no component named like an internal directory (so a domain added
 *      later is covered the day it follows the convention),
 *   3. not at or above one of hostd's own directories (a pool root, the data
 *      dir): mounting those would show every domain's files at once,
 *   4. not below a private directory (the data dir, where the store, secrets
 *      and certificates live) unless it is below a pool root (pools may live
 *      in the data dir; what they hold is judged by 1-3).
 *
 * `judgeHostPath` is pure (real paths in, a verdict out); `resolveReal` and
 * `realRoots` are the only parts that touch the filesystem.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';

/** Directories (and work entries) hostd keeps inside a storage pool are named with this prefix. */
export const INTERNAL_PREFIX = '.hostd-';

/** Internal directories named before the convention existed (the VM domain's `<pool>/.vms`). */
export const LEGACY_INTERNAL_NAMES: readonly string[] = ['.vms'];

/** The directory a domain keeps inside each pool, by the convention. */
export function internalDirName(domain: string): string {
  return `${INTERNAL_PREFIX}${domain}`;
}

/**
 * Whether a single path component names one of hostd's internal directories.
 * Compared without case after NFKC, as a case-insensitive (or normalising)
 * pool filesystem would compare them: there `.VMS` is `.vms`, and refusing a
 * little more is the safe side.
 */
export function isInternalName(name: string): boolean {
  const n = name.normalize('NFKC').toLowerCase();
  return n.startsWith(INTERNAL_PREFIX) || LEGACY_INTERNAL_NAMES.includes(n);
}

/** A directory that may be shared with guests, and what it is (for messages). */
export interface AllowedRoot {
  /** Real path (symlinks resolved). */
  path: string;
  /** e.g. `managed folder 'media'`, `lxc.mount_roots`. */
  label: string;
}

export interface HostPathPolicy {
  /** Roots a guest may be given (at or below). */
  allowed: AllowedRoot[];
  /** Storage pool roots (real paths): never given, nor anything above them. */
  poolRoots: string[];
  /** hostd's private directories (real paths; labels like `data directory`): never at, above or below, except inside a pool. */
  private: Array<{ path: string; label: string }>;
}

export type HostPathVerdict = { ok: true; root: AllowedRoot } | { ok: false; rule: 'outside' | 'internal' | 'holds-own' | 'private'; reason: string };

/** `p` is `dir` or below it (both normalised absolute paths). */
export function isAtOrBelow(p: string, dir: string): boolean {
  if (dir === '/') return true;
  return p === dir || p.startsWith(dir + '/');
}

/** Judges a real, absolute path against the policy; the reason reads after "host path X ...". */
export function judgeHostPath(real: string, policy: HostPathPolicy): HostPathVerdict {
  const p = path.resolve(real);
  const internal = p.split('/').find((seg) => seg !== '' && isInternalName(seg));
  if (internal !== undefined) {
    return { ok: false, rule: 'internal', reason: `is inside a directory hostd keeps for itself ('${internal}')` };
  }
  const holds = policy.private.find((r) => isAtOrBelow(r.path, p));
  if (holds) return { ok: false, rule: 'holds-own', reason: `is or holds hostd's ${holds.label}` };
  if (policy.poolRoots.some((r) => isAtOrBelow(r, p))) {
    return { ok: false, rule: 'holds-own', reason: 'is a storage pool root or holds one (every domain keeps its files there)' };
  }
  const inside = policy.private.find((r) => isAtOrBelow(p, r.path));
  if (inside && !policy.poolRoots.some((r) => isAtOrBelow(p, r))) return { ok: false, rule: 'private', reason: `is inside hostd's ${inside.label}` };
  const root = policy.allowed.find((r) => isAtOrBelow(p, r.path));
  if (!root) return { ok: false, rule: 'outside', reason: 'is neither a managed folder nor inside one, nor inside a configured root' };
  return { ok: true, root };
}

/** The real path of `p`, or null when it does not exist (or cannot be resolved). */
export async function resolveReal(p: string): Promise<string | null> {
  try {
    return await fsp.realpath(p);
  } catch {
    return null;
  }
}

/** Real paths of the given directories; one that does not exist is left out (it allows, or protects, nothing). */
export async function realRoots<T extends { path: string }>(list: T[]): Promise<T[]> {
  const out: T[] = [];
  for (const r of list) {
    const real = await resolveReal(r.path);
    if (real !== null) out.push({ ...r, path: real });
  }
  return out;
}
