/**
 * Folders: directories `<pool path>/<name>` in the configured storage pools,
 * managed through records in the `folders` sublevel, and the files and
 * subfolders inside them (or inside a connected location's mount).
 *
 * Every user path goes through `confine` (paths.ts). Mutations on one folder
 * or location are serialised inside the daemon (a keyed lock), so the
 * "destination is free" checks cannot race with another call of this daemon.
 * Returned shapes and decisions are documented in docs/folders.md.
 */
import crypto from 'node:crypto';
import type { Dirent, Stats } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ApiError, badRequest, conflict, internal, notFound } from '../lib/errors.js';
import type { PoolConfig } from '../config.js';
import type { FolderRef } from '../domain.js';
import type { ActivityNote } from '../lib/caller.js';
import { allValues, type Store, type Sub } from '../store/store.js';
import { confine, isStrictlyInside, linkStaysInside, validateName, type Confined } from './paths.js';

// ---------------------------------------------------------------------------
// Shapes

export type TargetKind = 'folder' | 'connection';

/** The spec's Target object (request side). */
export interface Target {
  kind: TargetKind;
  id: string;
  path?: string | null;
}
export type MaybeTarget = Target | null | undefined;

/** A folder record as stored and as returned. */
export interface Folder {
  folder_id: string;
  name: string;
  storage_id: string;
  /** Absolute directory on the host. */
  path: string;
  /** ISO 8601. */
  created_at: string;
}

export type EntryType = 'file' | 'folder' | 'symlink' | 'other';

export interface Entry {
  name: string;
  /** Relative to the folder (or location) root, '/'-separated. */
  path: string;
  type: EntryType;
  /** Bytes (for a symlink, the length of its text); null for folders (tree sizes are not computed). */
  size: number | null;
  /** ISO 8601 modification time. */
  modified: string;
}

/** A place in a response: which folder or location, and the path inside it. */
export interface TargetRef {
  kind: TargetKind;
  id: string;
  path: string;
}

export interface MovePair {
  src_sub_path: string;
  dst_sub_path: string;
}

// Requests (arguments after schema validation; path parameters included; peer_id ignored here)
export interface FoldersListRequest { peer_id?: string }
export interface FoldersCreateRequest { storage_id: string; name: string; peer_id?: string }
export interface FoldersUpdateRequest { folder_id: string; new_name: string; peer_id?: string }
export interface FoldersDeleteRequest { folder_id: string; peer_id?: string }
export interface FoldersContentsListRequest { folder_id: string; sub_path?: string | null; target?: MaybeTarget; peer_id?: string }
export interface FoldersSubfoldersCreateRequest { folder_id: string; name: string; sub_path?: string | null; target?: MaybeTarget; peer_id?: string }
export interface FoldersSubfoldersBatchCreateRequest { folder_id: string; names: string[]; sub_path?: string | null; target?: MaybeTarget; peer_id?: string }
export interface FoldersEntriesMoveRequest {
  folder_id: string;
  src_sub_path: string;
  dst_sub_path?: string | null;
  src_target?: MaybeTarget;
  dst_target?: MaybeTarget;
  peer_id?: string;
}
export interface FoldersEntriesCopyRequest {
  src_folder_id: string;
  src_sub_path: string;
  dst_folder_id?: string | null;
  dst_sub_path?: string | null;
  src_target?: MaybeTarget;
  dst_target?: MaybeTarget;
  peer_id?: string;
}
export interface FoldersEntriesDeleteRequest { folder_id: string; sub_path: string; target?: MaybeTarget; peer_id?: string }
export interface FoldersSearchRequest { folder_id: string; pattern: string; sub_path?: string | null; target?: MaybeTarget; peer_id?: string }
export interface FoldersEntriesBatchMoveRequest { folder_id: string; moves: MovePair[]; target?: MaybeTarget; peer_id?: string }

// Responses
export interface FoldersListResponse { folders: Folder[] }
export interface FolderResponse { folder: Folder }
export interface FolderDeletedResponse { folder: Folder; deleted: true }
export interface ContentsResponse { at: TargetRef; entries: Entry[] }
export interface SubfolderResponse { at: TargetRef; entry: Entry }
export interface SubfoldersResponse { at: TargetRef; entries: Entry[] }
export interface TransferResponse { from: TargetRef; to: TargetRef; entry: Entry }
export interface EntryDeletedResponse { deleted: TargetRef; entry: Entry }
export interface SearchResponse { at: TargetRef; pattern: string; matches: Entry[]; truncated: boolean }
export interface BatchMoveResponse { at: TargetRef; moved: MovePair[] }

/** What a service method needs of the call context. */
export interface NoteSink {
  note(n: ActivityNote): void;
}

export interface FoldersServiceOptions {
  /** Absolute mount directory of a connected location; throws ApiError 404 for an unknown id. */
  resolveConnection?: (locationId: string) => Promise<string>;
  /** Search result cap (default 1000). */
  searchLimit?: number;
}

export const DEFAULT_SEARCH_LIMIT = 1000;

// ---------------------------------------------------------------------------
// Helpers

/** A resolved folder or location root. */
interface Place {
  kind: TargetKind;
  id: string;
  /** For activity labels: folder name or location id. */
  label: string;
  root: string;
  /** For messages: 'folder' or 'location'. */
  within: 'folder' | 'location';
}

/** A confined path in a place. */
interface Spot extends Confined {
  place: Place;
  arg: string;
}

const noop: NoteSink = { note() {} };

function code(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

function show(rel: string): string {
  return rel === '' ? '/' : rel;
}

function typeOf(st: Stats): EntryType {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'folder';
  if (st.isSymbolicLink()) return 'symlink';
  return 'other';
}

function entryOf(name: string, rel: string, st: Stats): Entry {
  const type = typeOf(st);
  return { name, path: rel, type, size: type === 'folder' ? null : st.size, modified: st.mtime.toISOString() };
}

function joinRel(parent: string, name: string): string {
  return parent === '' ? name : `${parent}/${name}`;
}

function parentRel(rel: string): string {
  const i = rel.lastIndexOf('/');
  return i < 0 ? '' : rel.slice(0, i);
}

function byFolderThenName(a: Entry, b: Entry): number {
  const fa = a.type === 'folder' ? 0 : 1;
  const fb = b.type === 'folder' ? 0 : 1;
  if (fa !== fb) return fa - fb;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

async function lstatOrNull(p: string): Promise<Stats | null> {
  try {
    return await fs.lstat(p);
  } catch (err) {
    if (code(err) === 'ENOENT' || code(err) === 'ENOTDIR') return null;
    throw err;
  }
}

/** Maps a filesystem error on `rel` to an ApiError; other errors pass through unchanged. */
function fsError(err: unknown, rel: string): unknown {
  if (err instanceof ApiError) return err;
  switch (code(err)) {
    case 'ENOENT':
      return notFound(`no such file or folder '${show(rel)}'`);
    case 'EEXIST':
    case 'ENOTEMPTY':
    case 'ERR_FS_CP_EEXIST':
      return conflict(`'${show(rel)}' already exists`);
    case 'ENOTDIR':
      return conflict(`'${show(rel)}' is not a folder`);
    case 'EACCES':
    case 'EPERM':
      return internal(`permission denied on '${show(rel)}'`);
    case 'ENOSPC':
      return internal(`no space left while writing '${show(rel)}'`);
    default:
      return err;
  }
}

/** '*' is a glob over the whole name; otherwise a substring. Both case-insensitive. */
export function nameMatcher(pattern: string): (name: string) => boolean {
  if (pattern.includes('*')) {
    const body = pattern.split('*').map((part) => part.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')).join('.*');
    const re = new RegExp(`^${body}$`, 'isu');
    return (name) => re.test(name);
  }
  const needle = pattern.toLowerCase();
  return (name) => name.toLowerCase().includes(needle);
}

/**
 * Serialises work per key. A job waits for the previous holder of each of its
 * keys; all keys are registered at once, so there is no lock-order deadlock.
 */
class KeyedLock {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(keys: string[], fn: () => Promise<T>): Promise<T> {
    const uniq = [...new Set(keys)];
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const before = uniq.map((k) => this.tails.get(k) ?? Promise.resolve());
    for (const k of uniq) this.tails.set(k, mine);
    try {
      await Promise.all(before);
      return await fn();
    } finally {
      release();
      for (const k of uniq) if (this.tails.get(k) === mine) this.tails.delete(k);
    }
  }
}

const RECORDS_KEY = 'records';
const placeKey = (kind: TargetKind, id: string) => `${kind}:${id}`;

// ---------------------------------------------------------------------------

/** A folder name: a valid single name, and not one of the daemon's own. */
function folderName(name: string, arg: string): string {
  const n = validateName(name, arg);
  if (n.startsWith(RESERVED_PREFIX)) throw badRequest(`argument '${arg}' must not start with '${RESERVED_PREFIX}' (reserved)`);
  return n;
}

/**
 * A folder change in flight. It is stored before the filesystem is touched and
 * replaced by the outcome in one batch after, so that a crash at any moment
 * leaves something `init()` can finish or undo: records and directories agree.
 */
type Intent =
  | { op: 'create'; rec: Folder }
  | { op: 'rename'; from: Folder; to: Folder }
  | { op: 'delete'; rec: Folder; trash: string };

/** Directories in a pool root named so are the daemon's own (deletions in progress). */
const TRASH_PREFIX = '.hostd-trash-';
const RESERVED_PREFIX = '.hostd-';

export class FoldersService {
  private readonly records: Sub<Folder>;
  private readonly intents: Sub<Intent>;
  private readonly cache = new Map<string, Folder>();
  /** The answer of folders_list, rebuilt on every change (GET /folders is a hot path). */
  private listing: Folder[] = [];
  private readonly lock = new KeyedLock();
  private readonly resolveConnection: (locationId: string) => Promise<string>;
  private readonly searchLimit: number;

  constructor(
    private readonly store: Store,
    private readonly pools: PoolConfig[],
    opts: FoldersServiceOptions = {},
  ) {
    this.records = store.sub<Folder>('folders');
    this.intents = store.sub<Intent>('folder_intents');
    this.resolveConnection =
      opts.resolveConnection ??
      (async (id: string) => {
        throw notFound(`location '${id}' not found`);
      });
    this.searchLimit = opts.searchLimit ?? DEFAULT_SEARCH_LIMIT;
  }

  /** Creates every pool directory and loads the folder records into memory. */
  async init(): Promise<void> {
    for (const pool of this.pools) await fs.mkdir(pool.path, { recursive: true });
    for (const [id, intent] of await this.intents.iterator().all()) await this.recover(id, intent);
    for (const pool of this.pools) {
      for (const name of await fs.readdir(pool.path)) {
        if (name.startsWith(TRASH_PREFIX)) await fs.rm(path.join(pool.path, name), { recursive: true, force: true });
      }
    }
    this.cache.clear();
    for (const rec of await allValues(this.records)) this.cache.set(rec.folder_id, rec);
    this.rebuildListing();
  }

  // ----- folders ----------------------------------------------------------

  async list(_req: FoldersListRequest = {}): Promise<FoldersListResponse> {
    return { folders: this.listing };
  }

  async create(req: FoldersCreateRequest, ctx: NoteSink = noop): Promise<FolderResponse> {
    const pool = this.pools.find((p) => p.id === req.storage_id);
    if (!pool) throw notFound(`storage pool '${req.storage_id}' not found`);
    const name = folderName(req.name, 'name');
    return this.lock.run([RECORDS_KEY], async () => {
      const taken = () => conflict(`a folder named '${name}' already exists in storage pool '${pool.id}'`);
      if (this.findByName(pool.id, name)) throw taken();
      const dir = path.join(pool.path, name);
      const rec: Folder = { folder_id: this.newId(), name, storage_id: pool.id, path: dir, created_at: new Date().toISOString() };
      await this.intents.put(rec.folder_id, { op: 'create', rec });
      try {
        await fs.mkdir(dir);
      } catch (err) {
        await this.intents.del(rec.folder_id);
        if (code(err) === 'EEXIST') throw taken();
        if (code(err) === 'ENOENT') throw internal(`storage pool '${pool.id}' directory ${pool.path} is missing`);
        throw err;
      }
      await this.settle(rec.folder_id, rec);
      this.cache.set(rec.folder_id, rec);
      this.rebuildListing();
      ctx.note({ summary: `Created folder ${name}`, target: name, metadata: { folder_id: rec.folder_id, storage_id: pool.id } });
      return { folder: { ...rec } };
    });
  }

  async update(req: FoldersUpdateRequest, ctx: NoteSink = noop): Promise<FolderResponse> {
    const newName = folderName(req.new_name, 'new_name');
    return this.lock.run([RECORDS_KEY, placeKey('folder', req.folder_id)], async () => {
      const rec = this.folder(req.folder_id);
      if (newName === rec.name) {
        ctx.note({ summary: `Renamed folder ${rec.name} to ${newName}`, target: rec.name, metadata: { folder_id: rec.folder_id } });
        return { folder: { ...rec } };
      }
      const taken = () => conflict(`a folder named '${newName}' already exists in storage pool '${rec.storage_id}'`);
      if (this.findByName(rec.storage_id, newName)) throw taken();
      const dir = path.join(path.dirname(rec.path), newName);
      if (await lstatOrNull(dir)) throw taken();
      const next: Folder = { ...rec, name: newName, path: dir };
      await this.intents.put(rec.folder_id, { op: 'rename', from: rec, to: next });
      try {
        await fs.rename(rec.path, dir);
      } catch (err) {
        await this.intents.del(rec.folder_id);
        if (code(err) === 'ENOENT') throw this.missingDir(rec);
        if (code(err) === 'EEXIST' || code(err) === 'ENOTEMPTY') throw taken();
        throw err;
      }
      await this.settle(next.folder_id, next);
      this.cache.set(next.folder_id, next);
      this.rebuildListing();
      ctx.note({ summary: `Renamed folder ${rec.name} to ${newName}`, target: newName, metadata: { folder_id: rec.folder_id } });
      return { folder: { ...next } };
    });
  }

  async delete(req: FoldersDeleteRequest, ctx: NoteSink = noop): Promise<FolderDeletedResponse> {
    return this.lock.run([RECORDS_KEY, placeKey('folder', req.folder_id)], async () => {
      const rec = this.folder(req.folder_id);
      // The record's directory is always <pool>/<name>; refuse anything else rather than rm -rf it.
      if (path.basename(rec.path) !== rec.name || !path.isAbsolute(rec.path)) {
        throw internal(`folder '${rec.name}' has an unexpected path ${rec.path}; not deleting it`);
      }
      // The tree is first renamed aside (atomic), then the record goes, then
      // the tree is removed; rm does not follow symlinks inside it.
      const trash = path.join(path.dirname(rec.path), `${TRASH_PREFIX}${rec.folder_id}-${crypto.randomBytes(4).toString('hex')}`);
      await this.intents.put(rec.folder_id, { op: 'delete', rec, trash });
      try {
        await fs.rename(rec.path, trash);
      } catch (err) {
        if (code(err) !== 'ENOENT') {
          await this.intents.del(rec.folder_id);
          throw err;
        }
      }
      await this.settle(rec.folder_id, null);
      await fs.rm(trash, { recursive: true, force: true });
      this.cache.delete(rec.folder_id);
      this.rebuildListing();
      ctx.note({ summary: `Deleted folder ${rec.name}`, target: rec.name, metadata: { folder_id: rec.folder_id } });
      return { folder: { ...rec }, deleted: true };
    });
  }

  // ----- contents ---------------------------------------------------------

  async contentsList(req: FoldersContentsListRequest): Promise<ContentsResponse> {
    const place = await this.place(req.target, req.folder_id, 'folder_id');
    const spot = await this.locate(place, ...this.pathArg(req.target, 'target', req.sub_path, 'sub_path'));
    await this.requireDir(spot);
    let dirents: Dirent[];
    try {
      dirents = await fs.readdir(spot.abs, { withFileTypes: true });
    } catch (err) {
      throw fsError(err, spot.rel);
    }
    const entries = (
      await Promise.all(
        dirents.map(async (d) => {
          const st = await lstatOrNull(path.join(spot.abs, d.name));
          return st ? entryOf(d.name, joinRel(spot.rel, d.name), st) : null; // vanished meanwhile
        }),
      )
    ).filter((e): e is Entry => e !== null);
    entries.sort(byFolderThenName);
    return { at: this.ref(spot), entries };
  }

  async subfoldersCreate(req: FoldersSubfoldersCreateRequest, ctx: NoteSink = noop): Promise<SubfolderResponse> {
    const name = validateName(req.name, 'name');
    const sel = this.selector(req.target, req.folder_id, 'folder_id');
    return this.lock.run([sel.key], async () => {
      const place = await sel.resolve();
      const parent = await this.locate(place, ...this.pathArg(req.target, 'target', req.sub_path, 'sub_path'));
      await this.requireDir(parent);
      const rel = joinRel(parent.rel, name);
      const abs = path.join(parent.abs, name);
      if (await lstatOrNull(abs)) throw conflict(`'${rel}' already exists`);
      try {
        await fs.mkdir(abs);
      } catch (err) {
        throw fsError(err, rel);
      }
      ctx.note({ summary: `Created subfolder ${name}`, target: this.label(place, rel) });
      return { at: this.ref(parent), entry: entryOf(name, rel, await fs.lstat(abs)) };
    });
  }

  async subfoldersBatchCreate(req: FoldersSubfoldersBatchCreateRequest, ctx: NoteSink = noop): Promise<SubfoldersResponse> {
    if (!Array.isArray(req.names) || req.names.length === 0) throw badRequest(`argument 'names' must list at least one name`);
    const names = req.names.map((n, i) => validateName(n, `names[${i}]`));
    const seen = new Set<string>();
    for (const n of names) {
      if (seen.has(n)) throw badRequest(`argument 'names' lists '${n}' twice`);
      seen.add(n);
    }
    const sel = this.selector(req.target, req.folder_id, 'folder_id');
    return this.lock.run([sel.key], async () => {
      const place = await sel.resolve();
      const parent = await this.locate(place, ...this.pathArg(req.target, 'target', req.sub_path, 'sub_path'));
      await this.requireDir(parent);
      for (const n of names) {
        if (await lstatOrNull(path.join(parent.abs, n))) throw conflict(`'${joinRel(parent.rel, n)}' already exists`);
      }
      const made: string[] = [];
      try {
        for (const n of names) {
          const abs = path.join(parent.abs, n);
          try {
            await fs.mkdir(abs);
          } catch (err) {
            throw fsError(err, joinRel(parent.rel, n));
          }
          made.push(abs);
        }
      } catch (err) {
        for (const abs of made.reverse()) await fs.rmdir(abs).catch(() => undefined);
        throw err;
      }
      const entries = await Promise.all(names.map(async (n) => entryOf(n, joinRel(parent.rel, n), await fs.lstat(path.join(parent.abs, n)))));
      ctx.note({
        summary: `Created ${names.length} subfolder${names.length === 1 ? '' : 's'}`,
        target: this.label(place, parent.rel),
        metadata: { names },
      });
      return { at: this.ref(parent), entries };
    });
  }

  // ----- entries ----------------------------------------------------------

  async entriesMove(req: FoldersEntriesMoveRequest, ctx: NoteSink = noop): Promise<TransferResponse> {
    const sel = this.selector(req.src_target, req.folder_id, 'folder_id');
    if (req.dst_target && (req.dst_target.kind !== sel.kind || req.dst_target.id !== sel.id)) {
      throw badRequest(`argument 'dst_target' must name the same folder or connection as the source`);
    }
    const dstPath = this.pathArg(req.dst_target, 'dst_target', req.dst_sub_path, 'dst_sub_path');
    if (dstPath[0] === undefined || dstPath[0] === null) throw badRequest(`argument 'dst_sub_path' is required`);
    return this.lock.run([sel.key], async () => {
      const place = await sel.resolve();
      const { src, dst } = await this.transferEnds('move', place, this.pathArg(req.src_target, 'src_target', req.src_sub_path, 'src_sub_path'), place, dstPath);
      try {
        await fs.rename(src.abs, dst.abs);
      } catch (err) {
        throw fsError(err, dst.rel);
      }
      ctx.note({ summary: `Moved ${src.rel} to ${dst.rel}`, target: this.label(place, src.rel), metadata: { to: dst.rel } });
      return { from: this.ref(src), to: this.ref(dst), entry: entryOf(path.basename(dst.abs), dst.rel, await fs.lstat(dst.abs)) };
    });
  }

  async entriesCopy(req: FoldersEntriesCopyRequest, ctx: NoteSink = noop): Promise<TransferResponse> {
    const srcSel = this.selector(req.src_target, req.src_folder_id, 'src_folder_id');
    const dstSel = req.dst_target
      ? this.selector(req.dst_target, undefined, 'dst_folder_id')
      : req.dst_folder_id
        ? this.selector(null, req.dst_folder_id, 'dst_folder_id')
        : srcSel;
    const dstPath = this.pathArg(req.dst_target, 'dst_target', req.dst_sub_path, 'dst_sub_path');
    if (dstPath[0] === undefined || dstPath[0] === null) throw badRequest(`argument 'dst_sub_path' is required`);
    return this.lock.run([srcSel.key, dstSel.key], async () => {
      const srcPlace = await srcSel.resolve();
      const dstPlace = dstSel === srcSel ? srcPlace : await dstSel.resolve();
      const { src, dst, st } = await this.transferEnds('copy', srcPlace, this.pathArg(req.src_target, 'src_target', req.src_sub_path, 'src_sub_path'), dstPlace, dstPath);
      // Nothing outside the source may be read: refuse links leaving it, and special files.
      await this.walkTree(src.abs, src.rel, async (abs, rel, est) => {
        if (est.isSymbolicLink()) {
          if (!(await linkStaysInside(src.root, abs))) {
            throw badRequest(`cannot copy '${src.rel}': symlink '${rel}' points outside the ${srcPlace.within}`);
          }
        } else if (!est.isFile() && !est.isDirectory()) {
          throw badRequest(`cannot copy '${src.rel}': '${rel}' is not a file, folder or symlink`);
        }
      });
      try {
        // verbatimSymlinks: links are copied as links with their text unchanged, never dereferenced.
        await fs.cp(src.abs, dst.abs, { recursive: true, verbatimSymlinks: true, errorOnExist: true, force: false, preserveTimestamps: true });
        // A link that stayed inside the source may leave the destination once copied (e.g. an absolute
        // link into the source folder, or a relative one copied to a shallower place): undo the copy.
        await this.walkTree(dst.abs, dst.rel, async (abs, rel, est) => {
          if (est.isSymbolicLink() && !(await linkStaysInside(dst.root, abs))) {
            throw badRequest(`cannot copy '${src.rel}': symlink '${rel}' would point outside the destination ${dstPlace.within}`);
          }
        });
      } catch (err) {
        // Undo a partial copy, unless something else created the destination meanwhile.
        if (code(err) !== 'EEXIST' && code(err) !== 'ERR_FS_CP_EEXIST') {
          await fs.rm(dst.abs, { recursive: true, force: true }).catch(() => undefined);
        }
        throw fsError(err, dst.rel);
      }
      ctx.note({
        summary: `Copied ${src.rel} to ${this.label(dstPlace, dst.rel)}`,
        target: this.label(srcPlace, src.rel),
        metadata: { to: this.ref(dst) },
      });
      return { from: this.ref(src), to: this.ref(dst), entry: entryOf(path.basename(dst.abs), dst.rel, await fs.lstat(dst.abs)) };
    });
  }

  async entriesDelete(req: FoldersEntriesDeleteRequest, ctx: NoteSink = noop): Promise<EntryDeletedResponse> {
    const sel = this.selector(req.target, req.folder_id, 'folder_id');
    return this.lock.run([sel.key], async () => {
      const place = await sel.resolve();
      const spot = await this.locate(place, ...this.pathArg(req.target, 'target', req.sub_path, 'sub_path'));
      this.refuseRoot(spot);
      const st = await lstatOrNull(spot.abs);
      if (!st) throw notFound(`no such file or folder '${spot.rel}'`);
      const entry = entryOf(path.basename(spot.abs), spot.rel, st);
      try {
        // rm does not follow symlinks, neither the entry itself nor any inside the tree.
        await fs.rm(spot.abs, { recursive: true, force: false });
      } catch (err) {
        throw fsError(err, spot.rel);
      }
      ctx.note({ summary: `Deleted ${entry.type} ${spot.rel}`, target: this.label(place, spot.rel) });
      return { deleted: this.ref(spot), entry };
    });
  }

  async search(req: FoldersSearchRequest): Promise<SearchResponse> {
    if (typeof req.pattern !== 'string' || req.pattern === '') throw badRequest(`argument 'pattern' must not be empty`);
    const match = nameMatcher(req.pattern);
    const place = await this.place(req.target, req.folder_id, 'folder_id');
    const start = await this.locate(place, ...this.pathArg(req.target, 'target', req.sub_path, 'sub_path'));
    await this.requireDir(start);
    const matches: Entry[] = [];
    let truncated = false;
    // Breadth first, so a capped answer holds the nearest matches. Dirent types come from
    // readdir without following links, so symlinked folders are reported but never entered.
    const queue: Array<{ abs: string; rel: string }> = [{ abs: start.abs, rel: start.rel }];
    outer: for (let next = 0; next < queue.length; next++) {
      const dir = queue[next];
      let dirents: Dirent[];
      try {
        dirents = await fs.readdir(dir.abs, { withFileTypes: true });
      } catch (err) {
        if (dir.abs === start.abs) throw fsError(err, start.rel);
        continue; // a subfolder that vanished or cannot be read is skipped
      }
      dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      for (const d of dirents) {
        const abs = path.join(dir.abs, d.name);
        const rel = joinRel(dir.rel, d.name);
        if (match(d.name)) {
          if (matches.length >= this.searchLimit) {
            truncated = true;
            break outer;
          }
          const st = await lstatOrNull(abs);
          if (st) matches.push(entryOf(d.name, rel, st));
        }
        if (d.isDirectory()) queue.push({ abs, rel });
      }
    }
    return { at: this.ref(start), pattern: req.pattern, matches, truncated };
  }

  async entriesBatchMove(req: FoldersEntriesBatchMoveRequest, ctx: NoteSink = noop): Promise<BatchMoveResponse> {
    if (!Array.isArray(req.moves) || req.moves.length === 0) throw badRequest(`argument 'moves' must list at least one move`);
    // Only target.kind and target.id are used; target.path is ignored (moves are relative to the root).
    const sel = this.selector(req.target, req.folder_id, 'folder_id');
    return this.lock.run([sel.key], async () => {
      const place = await sel.resolve();
      const pairs: Array<{ src: Spot; dst: Spot; isDir: boolean }> = [];
      // 1. Each pair on its own, against the state before the batch.
      for (const [i, m] of req.moves.entries()) {
        const src = await this.locate(place, m?.src_sub_path, `moves[${i}].src_sub_path`);
        const dst = await this.locate(place, m?.dst_sub_path, `moves[${i}].dst_sub_path`);
        this.refuseRoot(src);
        this.refuseRoot(dst);
        const st = await lstatOrNull(src.abs);
        if (!st) throw notFound(`no such file or folder '${src.rel}'`);
        if (st.isDirectory() && isStrictlyInside(src.abs, dst.abs)) throw badRequest(`cannot move '${src.rel}' into itself`);
        await this.requireFreeWithParent(dst);
        pairs.push({ src, dst, isDir: st.isDirectory() });
      }
      // 2. The pairs against each other, so that doing them in order gives what step 1 checked.
      for (let i = 0; i < pairs.length; i++) {
        for (let j = 0; j < pairs.length; j++) {
          if (i === j) continue;
          const a = pairs[i];
          const b = pairs[j];
          if (j > i && a.dst.abs === b.dst.abs) throw badRequest(`argument 'moves' moves two entries to '${a.dst.rel}'`);
          if (j > i && a.src.abs === b.src.abs) throw badRequest(`argument 'moves' moves '${a.src.rel}' twice`);
          if (isStrictlyInside(a.src.abs, b.src.abs)) {
            throw badRequest(`argument 'moves' moves both '${a.src.rel}' and '${b.src.rel}', which is inside it`);
          }
          if (isStrictlyInside(a.src.abs, b.dst.abs)) {
            throw badRequest(`argument 'moves' puts '${b.dst.rel}' inside '${a.src.rel}', which is moved too`);
          }
        }
      }
      // 3. Do them; on a failure put back what was done.
      const done: typeof pairs = [];
      for (const p of pairs) {
        try {
          await fs.rename(p.src.abs, p.dst.abs);
          done.push(p);
        } catch (err) {
          for (const q of done.reverse()) await fs.rename(q.dst.abs, q.src.abs).catch(() => undefined);
          throw fsError(err, p.dst.rel);
        }
      }
      const moved = pairs.map((p) => ({ src_sub_path: p.src.rel, dst_sub_path: p.dst.rel }));
      ctx.note({
        summary: `Moved ${moved.length} entr${moved.length === 1 ? 'y' : 'ies'}`,
        target: place.label,
        metadata: { moves: moved },
      });
      return { at: { kind: place.kind, id: place.id, path: '' }, moved };
    });
  }

  // ----- internals --------------------------------------------------------

  /**
   * Both ends of a move or copy: confined, neither the root, the source
   * present, the destination free with its parent present, and a folder not
   * sent into itself.
   */
  private async transferEnds(
    verb: 'move' | 'copy',
    srcPlace: Place, srcPath: [string | null | undefined, string],
    dstPlace: Place, dstPath: [string | null | undefined, string],
  ): Promise<{ src: Spot; dst: Spot; st: Stats }> {
    const src = await this.locate(srcPlace, ...srcPath);
    const dst = await this.locate(dstPlace, ...dstPath);
    this.refuseRoot(src);
    this.refuseRoot(dst);
    const st = await lstatOrNull(src.abs);
    if (!st) throw notFound(`no such file or folder '${src.rel}'`);
    if (st.isDirectory() && isStrictlyInside(src.abs, dst.abs)) throw badRequest(`cannot ${verb} '${src.rel}' into itself`);
    await this.requireFreeWithParent(dst);
    return { src, dst, st };
  }

  /** Replaces an intent by its outcome (the new record, or none) in one batch. */
  private async settle(folderId: string, rec: Folder | null): Promise<void> {
    await this.store.batch([
      rec ? { type: 'put', sub: this.records, key: folderId, value: rec } : { type: 'del', sub: this.records, key: folderId },
      { type: 'del', sub: this.intents, key: folderId },
    ]);
  }

  /** Finishes or undoes a change a crash interrupted, by what the disk shows. */
  private async recover(folderId: string, intent: Intent): Promise<void> {
    const isDir = async (p: string) => (await lstatOrNull(p))?.isDirectory() ?? false;
    switch (intent.op) {
      case 'create':
        // The directory was made: the folder exists. Otherwise it never did.
        if (await isDir(intent.rec.path)) await this.settle(folderId, intent.rec);
        else await this.intents.del(folderId);
        return;
      case 'rename':
        if (!(await isDir(intent.from.path)) && (await isDir(intent.to.path))) await this.settle(folderId, intent.to);
        else await this.intents.del(folderId);
        return;
      case 'delete':
        if (await isDir(intent.rec.path)) await this.intents.del(folderId);
        else {
          await this.settle(folderId, null);
          await fs.rm(intent.trash, { recursive: true, force: true });
        }
        return;
    }
  }

  private rebuildListing(): void {
    this.listing = [...this.cache.values()]
      .map((r) => Object.freeze({ ...r }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.storage_id < b.storage_id ? -1 : 1));
    Object.freeze(this.listing);
  }

  private newId(): string {
    for (;;) {
      const id = 'f_' + crypto.randomBytes(8).toString('base64url').slice(0, 10);
      if (!this.cache.has(id)) return id;
    }
  }

  /** A folder as other domains see it (404 when unknown). */
  folderRef(id: string): FolderRef {
    const r = this.folder(id);
    return { folder_id: r.folder_id, name: r.name, storage_id: r.storage_id, path: r.path };
  }

  folderRefs(): FolderRef[] {
    return this.listing.map((r) => ({ folder_id: r.folder_id, name: r.name, storage_id: r.storage_id, path: r.path }));
  }

  private findByName(storageId: string, name: string): Folder | undefined {
    for (const r of this.cache.values()) if (r.storage_id === storageId && r.name === name) return r;
    return undefined;
  }

  private folder(id: string): Folder {
    const rec = typeof id === 'string' ? this.cache.get(id) : undefined;
    if (!rec) throw notFound(`folder '${id}' not found`);
    return rec;
  }

  private missingDir(rec: Folder): ApiError {
    return notFound(`folder '${rec.name}' has no directory at ${rec.path}`);
  }

  /** Which place a request names (target wins over folder id), without touching anything yet. */
  private selector(target: MaybeTarget, folderId: string | null | undefined, folderArg: string) {
    let kind: TargetKind;
    let id: string;
    if (target) {
      kind = target.kind;
      id = target.id;
      if (kind !== 'folder' && kind !== 'connection') throw badRequest(`argument 'target.kind' must be 'folder' or 'connection'`);
    } else {
      if (typeof folderId !== 'string') throw badRequest(`argument '${folderArg}' is required`);
      kind = 'folder';
      id = folderId;
    }
    return { kind, id, key: placeKey(kind, id), resolve: () => this.resolvePlace(kind, id) };
  }

  private async place(target: MaybeTarget, folderId: string | null | undefined, folderArg: string): Promise<Place> {
    return this.selector(target, folderId, folderArg).resolve();
  }

  private async resolvePlace(kind: TargetKind, id: string): Promise<Place> {
    if (kind === 'folder') {
      const rec = this.folder(id);
      return { kind, id, label: rec.name, root: rec.path, within: 'folder' };
    }
    const root = await this.resolveConnection(id);
    return { kind, id, label: id, root, within: 'location' };
  }

  /** The path to use and the argument it came from: target.path when given, else the sub-path argument. */
  private pathArg(target: MaybeTarget, targetArg: string, sub: string | null | undefined, subArg: string): [string | null | undefined, string] {
    if (target && target.path !== undefined && target.path !== null) return [target.path, `${targetArg}.path`];
    return [sub, subArg];
  }

  private async locate(place: Place, sub: unknown, arg: string): Promise<Spot> {
    try {
      const c = await confine(place.root, sub, { arg, within: place.within });
      return { ...c, place, arg };
    } catch (err) {
      if (err instanceof ApiError) throw err;
      // confine resolves missing paths itself; an fs error here is about the root.
      if (code(err) === 'ENOENT' || code(err) === 'ENOTDIR') {
        if (place.kind === 'folder') throw this.missingDir(this.folder(place.id));
        throw notFound(`location '${place.id}' has no mount directory at ${place.root}`);
      }
      throw err;
    }
  }

  private refuseRoot(spot: Spot): void {
    if (spot.rel === '') throw badRequest(`argument '${spot.arg}' must not be the ${spot.place.within} root`);
  }

  /** The spot must be an existing folder (following a link, which confine has checked). */
  private async requireDir(spot: Spot): Promise<void> {
    let st: Stats;
    try {
      st = await fs.stat(spot.abs);
    } catch (err) {
      throw fsError(err, spot.rel);
    }
    // Decision: an existing path that is not a folder gives 409 (its state blocks the call), not 400.
    if (!st.isDirectory()) throw conflict(`'${show(spot.rel)}' is not a folder`);
  }

  /** The destination must not exist (not even as a dangling link) and its parent must be a folder. */
  private async requireFreeWithParent(dst: Spot): Promise<void> {
    if (await lstatOrNull(dst.abs)) throw conflict(`'${dst.rel}' already exists`);
    const parent = parentRel(dst.rel);
    let st: Stats;
    try {
      st = await fs.stat(path.dirname(dst.abs));
    } catch (err) {
      throw fsError(err, parent);
    }
    if (!st.isDirectory()) throw conflict(`'${show(parent)}' is not a folder`);
  }

  /** Visits `abs` and everything below it without following symlinks. */
  private async walkTree(abs: string, rel: string, visit: (abs: string, rel: string, st: Stats) => Promise<void>): Promise<void> {
    const st = await fs.lstat(abs);
    await visit(abs, rel, st);
    if (!st.isDirectory()) return;
    for (const name of await fs.readdir(abs)) await this.walkTree(path.join(abs, name), joinRel(rel, name), visit);
  }

  private ref(spot: Spot): TargetRef {
    return { kind: spot.place.kind, id: spot.place.id, path: spot.rel };
  }

  private label(place: Place, rel: string): string {
    return rel === '' ? place.label : `${place.label}/${rel}`;
  }
}
