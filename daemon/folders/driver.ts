/**
 * What the folders service needs from a filesystem: a handful of operations,
 * each given a root (a pool directory, a folder directory or a location's
 * mount directory: absolute, trusted, from the daemon's own records) and paths
 * relative to it ('/'-joined segments without '.', '..' or empty segments; ''
 * is the root itself).
 *
 * Confinement is the implementation's job alone: whatever happens on the disk
 * meanwhile (a directory swapped for a symlink by a process with write access
 * inside), no operation reads, lists, writes or removes anything outside the
 * root. Symlinks inside a root are followed where a path passes through them
 * (and where a method says so for the final entry) only while they lead to a
 * place inside the same root; otherwise the call fails with `escape`.
 *
 * Errors: an `FsProblem` for the outcomes the service turns into answers (its
 * `path` is relative to the entry the call was about, for problems found while
 * walking a tree; `end` says which end of a rename or copy); any other error
 * is the system's (errno `code` kept).
 *
 * The types here are the domain's; the runtime folder (fs/) implements them.
 */
import type { RuntimeDriver } from '../lib/availability.js';

/**
 * What `availability()` reports: procfs, through which every path is resolved
 * from open directories (`/proc/self/fd/<fd>/<name>`, the openat(2) of Node).
 */
export const PROCFS = 'procfs';

export type EntryType = 'file' | 'folder' | 'symlink' | 'other';

/** An entry as the filesystem shows it, links not followed. */
export interface EntryInfo {
  type: EntryType;
  /** Bytes; for a symlink, the length of its text. */
  size: number;
  mtime: Date;
}

export interface NamedEntry extends EntryInfo {
  name: string;
}

/** Where a relative path leads now. */
export interface Look {
  /**
   * The path with every link on the way to the final entry followed: the
   * real parent (relative to the root) joined with the final name. Two looks
   * in one root compare on it (is one inside the other).
   */
  real: string;
  /** 'missing' when a folder on the way does not exist, 'not-folder' when something on the way is not one. */
  way: 'ok' | 'missing' | 'not-folder';
  /** The final entry itself (a link not followed); null when it does not exist. */
  entry: EntryInfo | null;
  /** What the final entry leads to: the entry, or for a link its target inside the root (null when dangling). */
  target: EntryInfo | null;
}

export type FsProblemKind =
  /** The path, or a link on it, leads outside the root. */
  | 'escape'
  /** Too many links on the way. */
  | 'loop'
  /** The root itself does not exist. */
  | 'root-missing'
  /** The path (for mkdir and the destination of copy: its parent) does not exist. */
  | 'missing'
  /** The path (for mkdir and the destination of copy: its parent) is not a folder. */
  | 'not-folder'
  /** The entry to create exists already. */
  | 'exists'
  /** A link in a tree points outside the root (checkTree). */
  | 'link-outside'
  /** A tree holds something that is not a file, folder or symlink (checkTree, copy). */
  | 'special'
  /** A folder would be copied into itself. */
  | 'into-itself';

export class FsProblem extends Error {
  constructor(
    readonly kind: FsProblemKind,
    /** Where, relative to the entry the call was about ('' for the entry itself). */
    readonly path = '',
    /** For calls with two ends (rename, copy): which one. */
    readonly end?: 'from' | 'to',
  ) {
    super(`${kind}${end ? ` (${end})` : ''}${path ? ` at '${path}'` : ''}`);
    this.name = 'FsProblem';
  }

  /** The same problem, said of one end of a two-ended call. */
  at(end: 'from' | 'to'): FsProblem {
    return new FsProblem(this.kind, this.path, end);
  }
}

/** Runs one end's part of a two-ended call, marking its problems with that end. */
export async function onEnd<T>(end: 'from' | 'to', p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    throw err instanceof FsProblem && !err.end ? err.at(end) : err;
  }
}

export interface SearchHit {
  /** Relative to the start of the search. */
  path: string;
  name: string;
  entry: EntryInfo;
}

export interface FilesDriver extends RuntimeDriver {
  /** Creates a root directory (and its parents) if missing: pools at start. */
  ensureRoot(root: string): Promise<void>;

  /** Where `path` leads, without following its final entry (but checking a final link stays inside). */
  look(root: string, path: string): Promise<Look>;

  /**
   * The entries of the folder at `path` (a link to a folder inside is
   * followed); entries vanishing meanwhile are skipped. At most `limit` of
   * them: the first in the answer's order (folders first, then by name),
   * `truncated` when the folder has more. Memory follows `limit`, not the
   * folder's size.
   */
  list(root: string, path: string, limit?: number): Promise<{ entries: NamedEntry[]; truncated: boolean }>;

  /** Makes the folder `path`; its parent must exist (links on the way followed). */
  mkdir(root: string, path: string): Promise<EntryInfo>;

  /** Moves the entry `from` to `to` (both in this root; a link is moved as a link). Returns the entry at `to`. */
  rename(root: string, from: string, to: string): Promise<EntryInfo>;

  /** Removes the entry at `path`, a whole tree for a folder; links are removed, never followed. */
  remove(root: string, path: string): Promise<void>;

  /** Removes the folder at `path` if it is an empty folder; false when it is anything else or missing. */
  removeEmptyDir(root: string, path: string): Promise<boolean>;

  /**
   * Walks the tree at `path` without following links: `link-outside` for a
   * link that does not resolve inside the root, `special` for anything that
   * is not a file, folder or symlink.
   */
  checkTree(root: string, path: string): Promise<void>;

  /**
   * Copies the entry at `src` in `srcRoot` to `dst` in `dstRoot` (which must
   * not exist; its parent must): folders recursively, links as links with
   * their text unchanged, files with their mode and modification time.
   * `progress` is told the number of entries copied so far after each one
   * (the copy waits for it). On failure, what the copy made is removed.
   */
  copy(srcRoot: string, src: string, dstRoot: string, dst: string, progress?: (entries: number) => Promise<void> | void): Promise<EntryInfo>;

  /**
   * Breadth first from the folder at `start`, never entering links, skipping
   * folders it cannot read; names are examined in runs of 1024 as the
   * filesystem lists them, each run sorted (so a folder of up to 1024 entries
   * is examined in name order). At most `limit` hits; `truncated` when there
   * were more, or when more folders waited to be read than the search keeps
   * (100,000), so that some of the tree was not searched. Memory follows
   * those bounds, not the tree's size.
   */
  search(root: string, start: string, match: (name: string) => boolean, limit: number): Promise<{ hits: SearchHit[]; truncated: boolean }>;
}
