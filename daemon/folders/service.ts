/**
 * Folders: directories `<pool path>/<name>` in the configured storage pools,
 * managed through records (records.ts), and the files and subfolders inside
 * them (or inside a connected location's mount).
 *
 * The rules live here: validation beyond the schema, which place and path a
 * request means, 404s and 409s, locks, activity notes. The filesystem is the
 * driver's (driver.ts): the service hands it a root and relative paths and
 * never an absolute path of an entry, and the driver alone keeps every
 * operation inside its root. Mutations on one folder or location are
 * serialised inside the daemon (a keyed lock), so the "destination is free"
 * checks cannot race with another call of this daemon.
 * Returned shapes and decisions are documented in docs/folders.md.
 */
import crypto from 'node:crypto';
import path from 'node:path';
import type { ArgsOf } from '../../api/registry/index.js';
import type { Target } from '../../api/registry/schema.js';
import { ApiError, badRequest, conflict, errnoCode as code, internal, notFound } from '../lib/errors.js';
import type { PoolConfig } from '../config.js';
import type { FolderRef } from '../domain.js';
import { noNotes, type NoteSink } from '../lib/caller.js';
import { KeyedLock } from '../lib/lock.js';
import type { Store } from '../store/store.js';
import { FsProblem, type EntryInfo, type EntryType, type FilesDriver, type Look } from './driver.js';
import { LocalFiles } from './fs/index.js';
import { isInternalName } from '../lib/host-paths.js';
import { baseName, checkNotInternal, joinRel, parentRel, relStrictlyInside, showRel, splitSubPath, validateName, validateNewEntry } from './names.js';
import type { JournalOp } from '../lib/journal.js';
import { FolderRecords, isEntryIntent, type EntryIntent, type Folder, type FolderIntent, type PlaceRef } from './records.js';

export type { Folder } from './records.js';
export type { Target } from '../../api/registry/schema.js';

// ---------------------------------------------------------------------------
// Shapes

export type TargetKind = Target['kind'];

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

export interface FoldersListResponse { folders: Folder[] }
export interface FolderResponse { folder: Folder }
export interface FolderDeletedResponse { folder: Folder; deleted: true; directory_kept?: true }
export interface ContentsResponse { at: TargetRef; entries: Entry[]; truncated: boolean }
export interface SubfolderResponse { at: TargetRef; entry: Entry }
export interface SubfoldersResponse { at: TargetRef; entries: Entry[] }
export interface TransferResponse { from: TargetRef; to: TargetRef; entry: Entry }
export interface EntryDeletedResponse { deleted: TargetRef; entry: Entry }
export interface SearchResponse { at: TargetRef; pattern: string; matches: Entry[]; truncated: boolean }
export interface BatchMoveResponse { at: TargetRef; moved: MovePair[] }

export interface FoldersServiceOptions {
  /** Absolute mount directory of a connected location; throws ApiError 404 for an unknown id. */
  resolveConnection?: (locationId: string) => Promise<string>;
  /** Search result cap (default 1000). */
  searchLimit?: number;
  /** Entries in one contents answer (default 10,000). */
  listLimit?: number;
  /** The filesystem (default: the local one). */
  driver?: FilesDriver;
  /** Test hook: awaited at named steps of multi-step changes (a test pauses there and kills the daemon). */
  pause?: (step: string) => Promise<void>;
}

export const DEFAULT_SEARCH_LIMIT = 1000;
/**
 * A contents answer holds at most this many entries (folders first, then by
 * name), with `truncated: true` when the folder has more: a folder of a
 * million entries must not make the daemon hold a million of them.
 */
export const DEFAULT_LIST_LIMIT = 10_000;

/** Entries named so are the daemon's own: deletions (pool roots and inside places) and copies in progress. */
const TRASH_PREFIX = '.hostd-trash-';
const COPY_PREFIX = '.hostd-copy-';
const RECORDS_KEY = 'records';
const placeKey = (kind: TargetKind, id: string) => `${kind}:${id}`;

// ---------------------------------------------------------------------------
// Helpers

/** A resolved folder or location root. */
interface Place {
  kind: TargetKind;
  id: string;
  /** For activity labels: folder name or location id. */
  label: string;
  /** The root directory handed to the driver. */
  root: string;
  /** For messages: 'folder' or 'location'. */
  within: 'folder' | 'location';
}

/** A user path in a place: lexically checked, not yet looked up. */
interface Spot {
  place: Place;
  /** The argument it came from, for messages. */
  arg: string;
  /** Normalised, relative to the root; '' is the root. */
  rel: string;
}

/** A spot as the filesystem showed it. */
interface Seen extends Spot {
  look: Look;
}

/** `sub` (relative to the entry at `rel`) relative to the root. */
function under(rel: string, sub: string): string {
  return sub === '' ? rel : joinRel(rel, sub);
}

/** A missing directory, whether the system or the driver says so. */
function isMissing(err: unknown): boolean {
  return code(err) === 'ENOENT' || (err instanceof FsProblem && (err.kind === 'missing' || err.kind === 'root-missing'));
}

function entryOf(name: string, rel: string, e: EntryInfo): Entry {
  return { name, path: rel, type: e.type, size: e.type === 'folder' ? null : e.size, modified: e.mtime.toISOString() };
}

function byFolderThenName(a: Entry, b: Entry): number {
  const fa = a.type === 'folder' ? 0 : 1;
  const fb = b.type === 'folder' ? 0 : 1;
  if (fa !== fb) return fa - fb;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/** Maps a system error on `rel` to an ApiError; other errors pass through unchanged. */
function fsError(err: unknown, rel: string): unknown {
  if (err instanceof ApiError) return err;
  switch (code(err)) {
    case 'ENOENT':
      return notFound(`no such file or folder '${showRel(rel)}'`);
    case 'EEXIST':
    case 'ENOTEMPTY':
    case 'ERR_FS_CP_EEXIST':
      return conflict(`'${showRel(rel)}' already exists`);
    case 'ENOTDIR':
      return conflict(`'${showRel(rel)}' is not a folder`);
    case 'EACCES':
    case 'EPERM':
      return internal(`permission denied on '${showRel(rel)}'`);
    case 'ENOSPC':
      return internal(`no space left while writing '${showRel(rel)}'`);
    case 'EAGAIN':
      return conflict(`'${showRel(rel)}' kept changing while it was read; try again`);
    default:
      return err;
  }
}

/**
 * '*' is a glob over the whole name; otherwise a substring. Both
 * case-insensitive (both sides lowercased). The glob is matched run by run:
 * the text before the first '*' is a prefix, the text after the last a
 * suffix, and each run between them is found leftmost after the previous one
 * (which is exact when '*' is the only wildcard). Each name costs a few
 * substring searches: a regular expression of many '.*' would backtrack
 * without bound on a long name (`a*a*a*a*a*b` against 255 'a's runs for
 * hours), and it would run on the daemon's only thread.
 */
export function nameMatcher(pattern: string): (name: string) => boolean {
  const p = pattern.toLowerCase();
  if (!p.includes('*')) return (name) => name.toLowerCase().includes(p);
  const runs = p.split('*');
  const first = runs[0];
  const last = runs[runs.length - 1];
  const middle = runs.slice(1, -1).filter((r) => r !== '');
  return (name) => {
    const n = name.toLowerCase();
    if (n.length < first.length + last.length || !n.startsWith(first) || !n.endsWith(last)) return false;
    const end = n.length - last.length;
    let at = first.length;
    for (const m of middle) {
      const i = n.indexOf(m, at);
      if (i < 0 || i + m.length > end) return false;
      at = i + m.length;
    }
    return true;
  };
}


/** A folder name: a valid single name, and not one of the daemon's own. */
function folderName(name: string, arg: string): string {
  return checkNotInternal(validateName(name, arg), arg);
}

// ---------------------------------------------------------------------------

export class FoldersService {
  private readonly records: FolderRecords;
  private readonly lock = new KeyedLock();
  private readonly fs: FilesDriver;
  private readonly resolveConnection: (locationId: string) => Promise<string>;
  private readonly searchLimit: number;
  private readonly listLimit: number;
  private readonly pause?: (step: string) => Promise<void>;
  /** Entry intents in locations that were not mounted at recovery, by place key: settled on the next call there. */
  private readonly pending = new Map<string, Array<[string, EntryIntent]>>();

  constructor(
    store: Store,
    private readonly pools: PoolConfig[],
    opts: FoldersServiceOptions = {},
  ) {
    this.records = new FolderRecords(store);
    this.fs = opts.driver ?? new LocalFiles();
    this.resolveConnection =
      opts.resolveConnection ??
      (async (id: string) => {
        throw notFound(`location '${id}' not found`);
      });
    this.searchLimit = opts.searchLimit ?? DEFAULT_SEARCH_LIMIT;
    this.listLimit = opts.listLimit ?? DEFAULT_LIST_LIMIT;
    this.pause = opts.pause;
  }

  /** Creates every pool directory, recovers interrupted changes, loads the folder records. */
  async init(): Promise<void> {
    for (const pool of this.pools) await this.fs.ensureRoot(pool.path);
    // Entry changes need the folders' directories; folder changes never run beside entry changes of the same
    // folder (both hold its lock), so the records as stored serve for those, and are loaded again after.
    await this.records.load();
    try {
      await this.records.journal.recover((id, intent) => this.recover(id, intent));
      for (const pool of this.pools) {
        for (const e of (await this.fs.list(pool.path, '')).entries) {
          if (e.name.startsWith(TRASH_PREFIX)) await this.fs.remove(pool.path, e.name);
        }
      }
    } catch (err) {
      // The filesystem cannot be used safely here (no /proc): open intents stay for the next start,
      // and every call answers 503 saying why.
      if (!(err instanceof ApiError && err.status === 503)) throw err;
    }
    await this.records.load();
  }

  // ----- folders ----------------------------------------------------------

  async list(_req: ArgsOf<'folders_list'> = {}): Promise<FoldersListResponse> {
    return { folders: this.records.all() };
  }

  async create(req: ArgsOf<'folders_create'>, ctx: NoteSink = noNotes): Promise<FolderResponse> {
    const pool = this.pools.find((p) => p.id === req.storage_id);
    if (!pool) throw notFound(`storage pool '${req.storage_id}' not found`);
    const name = folderName(req.name, 'name');
    return this.lock.run([RECORDS_KEY], async () => {
      const taken = () => conflict(`a folder named '${name}' already exists in storage pool '${pool.id}'`);
      if (this.records.findByName(pool.id, name)) throw taken();
      const rec: Folder = { folder_id: this.records.newId(), name, storage_id: pool.id, path: path.join(pool.path, name), created_at: new Date().toISOString() };
      try {
        await this.records.journal.run(rec.folder_id, { op: 'create', rec }, () => this.fs.mkdir(pool.path, name), {
          commit: () => [this.records.putOp(rec)],
        });
      } catch (err) {
        if (err instanceof FsProblem && err.kind === 'exists') throw taken();
        if (err instanceof FsProblem && err.kind === 'root-missing') throw internal(`storage pool '${pool.id}' directory ${pool.path} is missing`);
        throw err;
      }
      this.records.applied(rec.folder_id, rec);
      ctx.note({ summary: `Created folder ${name}`, target: name, metadata: { folder_id: rec.folder_id, storage_id: pool.id } });
      return { folder: { ...rec } };
    });
  }

  async update(req: ArgsOf<'folders_update'>, ctx: NoteSink = noNotes): Promise<FolderResponse> {
    const newName = folderName(req.new_name, 'new_name');
    return this.lock.run([RECORDS_KEY, placeKey('folder', req.folder_id)], async () => {
      const rec = this.folder(req.folder_id);
      // Renaming it would move a domain's own directory away from under it.
      if (isInternalName(rec.name)) throw this.reserved(rec);
      if (newName === rec.name) {
        ctx.note({ summary: `Renamed folder ${rec.name} to ${newName}`, target: rec.name, metadata: { folder_id: rec.folder_id } });
        return { folder: { ...rec } };
      }
      const taken = () => conflict(`a folder named '${newName}' already exists in storage pool '${rec.storage_id}'`);
      if (this.records.findByName(rec.storage_id, newName)) throw taken();
      const poolDir = path.dirname(rec.path);
      let free: boolean;
      try {
        free = !(await this.fs.look(poolDir, newName)).entry;
      } catch (err) {
        if (err instanceof FsProblem && err.kind === 'root-missing') throw this.missingDir(rec);
        // A link in the pool directory leading out is an entry of that name all the same.
        if (err instanceof FsProblem && (err.kind === 'escape' || err.kind === 'loop')) free = false;
        else throw err;
      }
      if (!free) throw taken();
      const next: Folder = { ...rec, name: newName, path: path.join(poolDir, newName) };
      try {
        await this.records.journal.run(rec.folder_id, { op: 'rename', from: rec, to: next }, () => this.fs.rename(poolDir, path.basename(rec.path), newName), {
          commit: () => [this.records.putOp(next)],
        });
      } catch (err) {
        if (isMissing(err)) throw this.missingDir(rec);
        if (code(err) === 'EEXIST' || code(err) === 'ENOTEMPTY') throw taken();
        throw err;
      }
      this.records.applied(next.folder_id, next);
      ctx.note({ summary: `Renamed folder ${rec.name} to ${newName}`, target: newName, metadata: { folder_id: rec.folder_id } });
      return { folder: { ...next } };
    });
  }

  async delete(req: ArgsOf<'folders_delete'>, ctx: NoteSink = noNotes): Promise<FolderDeletedResponse> {
    return this.lock.run([RECORDS_KEY, placeKey('folder', req.folder_id)], async () => {
      const rec = this.folder(req.folder_id);
      if (isInternalName(rec.name)) {
        // Made before the rule: its directory is (or may become) a domain's own. The record is
        // forgotten and the directory kept as it is: nothing of another domain is deleted.
        await this.records.journal.commit(rec.folder_id, [this.records.delOp(rec.folder_id)]);
        this.records.applied(rec.folder_id, null);
        ctx.note({ summary: `Forgot folder ${rec.name}; its directory ${rec.path} is kept (reserved name)`, target: rec.name, metadata: { folder_id: rec.folder_id, directory_kept: true } });
        return { folder: { ...rec }, deleted: true, directory_kept: true };
      }
      // The record's directory is always <pool>/<name>; refuse anything else rather than remove it.
      if (path.basename(rec.path) !== rec.name || !path.isAbsolute(rec.path)) {
        throw internal(`folder '${rec.name}' has an unexpected path ${rec.path}; not deleting it`);
      }
      // The tree is first renamed aside (atomic), then the record goes, then
      // the tree is removed; removal never follows symlinks inside it.
      const poolDir = path.dirname(rec.path);
      const trash = `${TRASH_PREFIX}${rec.folder_id}-${crypto.randomBytes(4).toString('hex')}`;
      const journal = this.records.journal;
      await journal.begin(rec.folder_id, { op: 'delete', rec, trash });
      try {
        await this.fs.rename(poolDir, rec.name, trash);
      } catch (err) {
        if (!isMissing(err)) {
          await journal.drop(rec.folder_id);
          throw err;
        }
      }
      await journal.commit(rec.folder_id, [this.records.delOp(rec.folder_id)]);
      this.records.applied(rec.folder_id, null);
      await this.fs.remove(poolDir, trash).catch((err) => {
        if (!isMissing(err)) throw err;
      });
      ctx.note({ summary: `Deleted folder ${rec.name}`, target: rec.name, metadata: { folder_id: rec.folder_id } });
      return { folder: { ...rec }, deleted: true };
    });
  }

  // ----- contents ---------------------------------------------------------

  async contentsList(req: ArgsOf<'folders_contents_list'>): Promise<ContentsResponse> {
    const place = await this.place(req.target, req.folder_id, 'folder_id');
    const spot = this.spot(place, ...this.pathArg(req.target, 'target', req.sub_path, 'sub_path'));
    let listed;
    try {
      listed = await this.fs.list(place.root, spot.rel, this.listLimit);
    } catch (err) {
      throw this.problem(err, spot);
    }
    const entries = listed.entries.map((e) => entryOf(e.name, joinRel(spot.rel, e.name), e));
    entries.sort(byFolderThenName);
    return { at: this.ref(spot), entries, truncated: listed.truncated };
  }

  async subfoldersCreate(req: ArgsOf<'folders_subfolders_create'>, ctx: NoteSink = noNotes): Promise<SubfolderResponse> {
    const name = validateName(req.name, 'name');
    const sel = this.selector(req.target, req.folder_id, 'folder_id');
    return this.lock.run([sel.key], async () => {
      const place = await sel.resolve();
      const parent = this.spot(place, ...this.pathArg(req.target, 'target', req.sub_path, 'sub_path'));
      const rel = joinRel(parent.rel, name);
      let made: EntryInfo;
      try {
        made = await this.fs.mkdir(place.root, rel);
      } catch (err) {
        if (err instanceof FsProblem && err.kind === 'exists') throw conflict(`'${rel}' already exists`);
        throw this.problem(err, parent);
      }
      ctx.note({ summary: `Created subfolder ${name}`, target: this.label(place, rel) });
      return { at: this.ref(parent), entry: entryOf(name, rel, made) };
    });
  }

  async subfoldersBatchCreate(req: ArgsOf<'folders_subfolders_batch_create'>, ctx: NoteSink = noNotes): Promise<SubfoldersResponse> {
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
      const parent = await this.seeDir(this.spot(place, ...this.pathArg(req.target, 'target', req.sub_path, 'sub_path')));
      for (const n of names) {
        if ((await this.see(this.spot(place, joinRel(parent.rel, n), parent.arg))).look.entry) throw conflict(`'${joinRel(parent.rel, n)}' already exists`);
      }
      const made: EntryInfo[] = [];
      const base = parent.look.real;
      await this.records.journal.run(
        this.records.entryKey(),
        { op: 'mkdirs', place: this.placeRef(place), parent: base, names },
        async () => {
          for (const n of names) {
            try {
              made.push(await this.fs.mkdir(place.root, joinRel(base, n)));
            } catch (err) {
              if (err instanceof FsProblem && err.kind === 'exists') throw conflict(`'${joinRel(parent.rel, n)}' already exists`);
              throw this.problem(err, parent);
            }
            if (made.length === 1) await this.step('folders.mkdirs');
          }
        },
        {
          commit: () => [],
          // Those already made are removed (still empty: nothing else can have used them yet).
          rollback: () => this.everyOne(names.slice(0, made.length).reverse(), (n) => this.fs.removeEmptyDir(place.root, joinRel(base, n))),
        },
      );
      const entries = names.map((n, i) => entryOf(n, joinRel(parent.rel, n), made[i]));
      ctx.note({
        summary: `Created ${names.length} subfolder${names.length === 1 ? '' : 's'}`,
        target: this.label(place, parent.rel),
        metadata: { names },
      });
      return { at: this.ref(parent), entries };
    });
  }

  // ----- entries ----------------------------------------------------------

  async entriesMove(req: ArgsOf<'folders_entries_move'>, ctx: NoteSink = noNotes): Promise<TransferResponse> {
    const sel = this.selector(req.src_target, req.folder_id, 'folder_id');
    if (req.dst_target && (req.dst_target.kind !== sel.kind || req.dst_target.id !== sel.id)) {
      throw badRequest(`argument 'dst_target' must name the same folder or connection as the source`);
    }
    const dstPath = this.pathArg(req.dst_target, 'dst_target', req.dst_sub_path, 'dst_sub_path');
    if (dstPath[0] === undefined || dstPath[0] === null) throw badRequest(`argument 'dst_sub_path' is required`);
    return this.lock.run([sel.key], async () => {
      const place = await sel.resolve();
      const { src, dst } = await this.transferEnds('move', place, this.pathArg(req.src_target, 'src_target', req.src_sub_path, 'src_sub_path'), place, dstPath);
      let moved: EntryInfo;
      try {
        moved = await this.fs.rename(place.root, src.look.real, dst.look.real);
      } catch (err) {
        // The kernel refuses a folder into itself (changed since the check).
        if (code(err) === 'EINVAL') throw badRequest(`cannot move '${src.rel}' into itself`);
        throw this.endsProblem(err, src, dst);
      }
      ctx.note({ summary: `Moved ${src.rel} to ${dst.rel}`, target: this.label(place, src.rel), metadata: { to: dst.rel } });
      return { from: this.ref(src), to: this.ref(dst), entry: entryOf(path.posix.basename(dst.rel), dst.rel, moved) };
    });
  }

  async entriesCopy(req: ArgsOf<'folders_entries_copy'>, ctx: NoteSink = noNotes): Promise<TransferResponse> {
    const srcSel = this.selector(req.src_target, req.src_folder_id, 'src_folder_id');
    const dstSel = req.dst_target
      ? this.selector(req.dst_target, undefined, 'dst_folder_id')
      : req.dst_folder_id
        ? this.selector(null, req.dst_folder_id, 'dst_folder_id')
        : srcSel;
    const dstPath = this.pathArg(req.dst_target, 'dst_target', req.dst_sub_path, 'dst_sub_path');
    // Decision: with a destination named (dst_folder_id or dst_target) but no path, the copy keeps the
    // entry's name at the destination's root (transferEnds). With neither, it would be a copy onto itself.
    if ((dstPath[0] === undefined || dstPath[0] === null) && dstSel === srcSel) throw badRequest(`argument 'dst_sub_path' is required`);
    return this.lock.run([srcSel.key, dstSel.key], async () => {
      const srcPlace = await srcSel.resolve();
      const dstPlace = dstSel === srcSel ? srcPlace : await dstSel.resolve();
      const srcPath = this.pathArg(req.src_target, 'src_target', req.src_sub_path, 'src_sub_path');
      const { src, dst } = await this.transferEnds('copy', srcPlace, srcPath, dstPlace, dstPath);
      // Nothing outside the source may be read: refuse links leaving it, and special files.
      await this.checkTree(src, (sub) => `symlink '${sub}' points outside the ${srcPlace.within}`);
      // The copy is made under a temporary name beside the destination and renamed into place when
      // complete and checked; the journal lets recovery remove a partial one after a crash.
      const parent = parentRel(dst.look.real);
      const temp = `${COPY_PREFIX}${crypto.randomBytes(6).toString('hex')}`;
      const atTemp: Seen = { ...dst, look: { ...dst.look, real: joinRel(parent, temp) } };
      const intent: EntryIntent = { op: 'copy', place: this.placeRef(dstPlace), parent, temp };
      const copied = await this.records.journal.run(
        this.records.entryKey(),
        intent,
        async () => {
          try {
            await this.fs.copy(srcPlace.root, src.look.real, dstPlace.root, atTemp.look.real, (n) => (n === 2 ? this.step('folders.copy') : undefined));
          } catch (err) {
            throw this.endsProblem(err, src, dst);
          }
          // A link that stayed inside the source may leave the destination once copied (e.g. an absolute
          // link into the source folder, or a relative one copied to a shallower place): undo the copy.
          await this.checkTree(atTemp, (sub) => `symlink '${sub}' would point outside the destination ${dstPlace.within}`, src.rel);
          let placed: EntryInfo;
          try {
            placed = await this.fs.rename(dstPlace.root, atTemp.look.real, dst.look.real);
          } catch (err) {
            throw this.endsProblem(err, dst, dst);
          }
          await this.step('folders.copy.placed');
          return placed;
        },
        { commit: () => [], rollback: () => this.removeQuietly(dstPlace.root, atTemp.look.real) },
      );
      ctx.note({
        summary: `Copied ${src.rel} to ${this.label(dstPlace, dst.rel)}`,
        target: this.label(srcPlace, src.rel),
        metadata: { to: this.ref(dst) },
      });
      return { from: this.ref(src), to: this.ref(dst), entry: entryOf(path.posix.basename(dst.rel), dst.rel, copied) };
    });
  }

  async entriesDelete(req: ArgsOf<'folders_entries_delete'>, ctx: NoteSink = noNotes): Promise<EntryDeletedResponse> {
    const sel = this.selector(req.target, req.folder_id, 'folder_id');
    return this.lock.run([sel.key], async () => {
      const place = await sel.resolve();
      const spot = await this.see(this.spot(place, ...this.pathArg(req.target, 'target', req.sub_path, 'sub_path')));
      this.refuseRoot(spot);
      if (!spot.look.entry) throw notFound(`no such file or folder '${spot.rel}'`);
      const entry = entryOf(path.posix.basename(spot.rel), spot.rel, spot.look.entry);
      try {
        if (entry.type === 'folder') await this.removeTree(place, spot.look.real);
        else await this.fs.remove(place.root, spot.look.real); // one unlink: nothing to journal
      } catch (err) {
        throw this.problem(err, spot);
      }
      // "subfolder" as at creation: "Deleted folder a/c" read as if a managed folder had gone.
      ctx.note({ summary: `Deleted ${entry.type === 'folder' ? 'subfolder' : entry.type} ${spot.rel}`, target: this.label(place, spot.rel) });
      return { deleted: this.ref(spot), entry };
    });
  }

  async search(req: ArgsOf<'folders_search'>): Promise<SearchResponse> {
    if (typeof req.pattern !== 'string' || req.pattern === '') throw badRequest(`argument 'pattern' must not be empty`);
    const match = nameMatcher(req.pattern);
    const place = await this.place(req.target, req.folder_id, 'folder_id');
    const start = this.spot(place, ...this.pathArg(req.target, 'target', req.sub_path, 'sub_path'));
    let found;
    try {
      found = await this.fs.search(place.root, start.rel, match, this.searchLimit);
    } catch (err) {
      throw this.problem(err, start);
    }
    const matches = found.hits.map((h) => entryOf(h.name, joinRel(start.rel, h.path), h.entry));
    return { at: this.ref(start), pattern: req.pattern, matches, truncated: found.truncated };
  }

  async entriesBatchMove(req: ArgsOf<'folders_entries_batch_move'>, ctx: NoteSink = noNotes): Promise<BatchMoveResponse> {
    if (!Array.isArray(req.moves) || req.moves.length === 0) throw badRequest(`argument 'moves' must list at least one move`);
    // Only target.kind and target.id are used; target.path is ignored (moves are relative to the root).
    const sel = this.selector(req.target, req.folder_id, 'folder_id');
    return this.lock.run([sel.key], async () => {
      const place = await sel.resolve();
      const pairs: Array<{ src: Seen; dst: Seen }> = [];
      // 1. Each pair on its own, against the state before the batch.
      for (const [i, m] of req.moves.entries()) {
        const src = await this.see(this.spot(place, m?.src_sub_path, `moves[${i}].src_sub_path`));
        const dstSpot = this.spot(place, m?.dst_sub_path, `moves[${i}].dst_sub_path`);
        validateNewEntry(dstSpot.rel, dstSpot.arg);
        const dst = await this.see(dstSpot);
        this.refuseRoot(src);
        this.refuseRoot(dst);
        if (!src.look.entry) throw notFound(`no such file or folder '${src.rel}'`);
        if (src.look.entry.type === 'folder' && relStrictlyInside(src.look.real, dst.look.real)) throw badRequest(`cannot move '${src.rel}' into itself`);
        this.requireFreeWithParent(dst);
        pairs.push({ src, dst });
      }
      // 2. The pairs against each other, so that doing them in order gives what step 1 checked.
      for (let i = 0; i < pairs.length; i++) {
        for (let j = 0; j < pairs.length; j++) {
          if (i === j) continue;
          const a = pairs[i];
          const b = pairs[j];
          if (j > i && a.dst.look.real === b.dst.look.real) throw badRequest(`argument 'moves' moves two entries to '${a.dst.rel}'`);
          if (j > i && a.src.look.real === b.src.look.real) throw badRequest(`argument 'moves' moves '${a.src.rel}' twice`);
          if (relStrictlyInside(a.src.look.real, b.src.look.real)) {
            throw badRequest(`argument 'moves' moves both '${a.src.rel}' and '${b.src.rel}', which is inside it`);
          }
          if (relStrictlyInside(a.src.look.real, b.dst.look.real)) {
            throw badRequest(`argument 'moves' puts '${b.dst.rel}' inside '${a.src.rel}', which is moved too`);
          }
        }
      }
      // 3. Do them; on a failure put back what was done (and after a crash, recovery does).
      const done: typeof pairs = [];
      let failing: (typeof pairs)[number] | undefined;
      const intent: EntryIntent = { op: 'moves', place: this.placeRef(place), pairs: pairs.map((p) => ({ from: p.src.look.real, to: p.dst.look.real })) };
      try {
        await this.records.journal.run(
          this.records.entryKey(),
          intent,
          async () => {
            for (const p of pairs) {
              failing = p;
              await this.fs.rename(place.root, p.src.look.real, p.dst.look.real);
              done.push(p);
              if (done.length === 1) await this.step('folders.moves');
            }
          },
          { commit: () => [], rollback: () => this.everyOne([...done].reverse(), (q) => this.fs.rename(place.root, q.dst.look.real, q.src.look.real)) },
        );
      } catch (err) {
        const p = failing!;
        if (code(err) === 'EINVAL') throw badRequest(`cannot move '${p.src.rel}' into itself`);
        throw this.endsProblem(err, p.src, p.dst);
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

  // ----- other domains ----------------------------------------------------

  /** A folder as other domains see it (404 when unknown; 409 for a reserved name, never handed out to be mounted). */
  folderRef(id: string): FolderRef {
    const r = this.folder(id);
    if (isInternalName(r.name)) throw this.reserved(r);
    return { folder_id: r.folder_id, name: r.name, storage_id: r.storage_id, path: r.path };
  }

  /** The folders other domains may use (those with a reserved name left out). */
  folderRefs(): FolderRef[] {
    return this.records
      .all()
      .filter((r) => !isInternalName(r.name))
      .map((r) => ({ folder_id: r.folder_id, name: r.name, storage_id: r.storage_id, path: r.path }));
  }

  // ----- internals --------------------------------------------------------

  /** Finishes or undoes a change a crash interrupted, by what the disk shows; returns the record writes of the outcome. */
  private async recover(folderId: string, intent: FolderIntent): Promise<JournalOp[]> {
    if (isEntryIntent(intent)) return this.recoverEntry(intent);
    const isDir = async (rec: Folder) => {
      try {
        return (await this.fs.look(path.dirname(rec.path), path.basename(rec.path))).entry?.type === 'folder';
      } catch (err) {
        if (err instanceof FsProblem) return false;
        throw err;
      }
    };
    switch (intent.op) {
      case 'create':
        // The directory was made: the folder exists. Otherwise it never did.
        return (await isDir(intent.rec)) ? [this.records.putOp(intent.rec)] : [];
      case 'rename':
        return !(await isDir(intent.from)) && (await isDir(intent.to)) ? [this.records.putOp(intent.to)] : [];
      case 'delete': {
        if (await isDir(intent.rec)) return [];
        const poolDir = path.dirname(intent.rec.path);
        await this.fs.remove(poolDir, path.basename(intent.trash)).catch((err) => {
          if (!isMissing(err)) throw err;
        });
        return [this.records.delOp(folderId)];
      }
    }
  }

  /** Finishes or undoes an entry change; one in a location not mounted now is kept (under a new key) for later. */
  private async recoverEntry(intent: EntryIntent): Promise<JournalOp[]> {
    const later = (): JournalOp[] => {
      const key = this.records.entryKey();
      const k = placeKey(intent.place.kind, intent.place.id);
      this.pending.set(k, [...(this.pending.get(k) ?? []), [key, intent]]);
      return [this.records.deferOp(key, intent)];
    };
    let root: string;
    try {
      root = await this.placeRoot(intent.place);
    } catch {
      if (intent.place.kind === 'folder') return []; // the folder is gone, and its tree with it
      return later(); // the location is not mounted (or not known yet): on the next call there
    }
    try {
      await this.settleEntry(root, intent);
    } catch {
      return later(); // e.g. permission denied: tried again on the next call there, never blocking the start
    }
    return [];
  }

  private async settleEntry(root: string, intent: EntryIntent): Promise<void> {
    const quiet = (err: unknown) => {
      if (!isMissing(err) && !(err instanceof FsProblem)) throw err;
    };
    switch (intent.op) {
      case 'copy':
        await this.fs.remove(root, joinRel(intent.parent, intent.temp)).catch(quiet);
        return;
      case 'remove':
        await this.fs.remove(root, joinRel(intent.parent, intent.trash)).catch(quiet);
        return;
      case 'moves': {
        const isThere = async (rel: string) => !!(await this.fs.look(root, rel).catch(() => null))?.entry;
        const done: Array<{ from: string; to: string }> = [];
        for (const p of intent.pairs) if (!(await isThere(p.from)) && (await isThere(p.to))) done.push(p);
        if (done.length === intent.pairs.length) return;
        for (const p of done.reverse()) await this.fs.rename(root, p.to, p.from).catch(quiet);
        return;
      }
      case 'mkdirs':
        for (const n of intent.names) await this.fs.removeEmptyDir(root, joinRel(intent.parent, n)).catch(quiet);
        return;
    }
  }

  /** Settles the entry intents recovery kept for a location, now that it is mounted. */
  private async settlePending(place: Place): Promise<void> {
    const k = placeKey(place.kind, place.id);
    const list = this.pending.get(k);
    if (!list) return;
    this.pending.delete(k);
    const left: Array<[string, EntryIntent]> = [];
    for (const [key, intent] of list) {
      try {
        await this.settleEntry(place.root, intent);
        await this.records.journal.drop(key);
      } catch {
        left.push([key, intent]);
      }
    }
    if (left.length) this.pending.set(k, [...left, ...(this.pending.get(k) ?? [])]);
  }

  private async placeRoot(ref: PlaceRef): Promise<string> {
    return (await this.resolvePlace(ref.kind, ref.id, false)).root;
  }

  /**
   * Removes a folder tree in `place`: renamed aside first (atomic: the entry is gone at once), then removed;
   * if the removal fails, what is left is put back under its name. The journal lets recovery finish it.
   */
  private async removeTree(place: Place, real: string): Promise<void> {
    const parent = parentRel(real);
    const trash = `${TRASH_PREFIX}${crypto.randomBytes(6).toString('hex')}`;
    const aside = joinRel(parent, trash);
    let moved = false;
    await this.records.journal.run(
      this.records.entryKey(),
      { op: 'remove', place: this.placeRef(place), parent, trash },
      async () => {
        await this.fs.rename(place.root, real, aside);
        moved = true;
        await this.step('folders.remove');
        await this.fs.remove(place.root, aside);
      },
      {
        commit: () => [],
        rollback: async () => {
          if (moved) await this.fs.rename(place.root, aside, real);
        },
      },
    );
  }

  /** Runs `fn` on every item even when some fail; then throws the first failure. */
  private async everyOne<T>(items: T[], fn: (item: T) => Promise<unknown>): Promise<void> {
    let first: unknown;
    for (const item of items) {
      try {
        await fn(item);
      } catch (err) {
        first ??= err;
      }
    }
    if (first !== undefined) throw first;
  }

  private async removeQuietly(root: string, rel: string): Promise<void> {
    await this.fs.remove(root, rel).catch((err) => {
      if (!isMissing(err)) throw err;
    });
  }

  private placeRef(place: Place): PlaceRef {
    return { kind: place.kind, id: place.id };
  }

  private step(name: string): Promise<void> {
    return this.pause ? this.pause(name) : Promise.resolve();
  }

  /**
   * Both ends of a move or copy: confined, neither the root, the source
   * present, the destination free with its parent present, and a folder not
   * sent into itself.
   */
  private async transferEnds(
    verb: 'move' | 'copy',
    srcPlace: Place, srcPath: [string | null | undefined, string],
    dstPlace: Place, dstPath: [string | null | undefined, string],
  ): Promise<{ src: Seen; dst: Seen }> {
    const srcSpot = this.spot(srcPlace, ...srcPath);
    // No destination path (copy to a named destination): the source's name, at the destination root.
    const dstSpot = this.spot(dstPlace, dstPath[0] ?? baseName(srcSpot.rel), dstPath[1]);
    validateNewEntry(dstSpot.rel, dstSpot.arg);
    const src = await this.see(srcSpot);
    const dst = await this.see(dstSpot);
    this.refuseRoot(src);
    this.refuseRoot(dst);
    if (!src.look.entry) throw notFound(`no such file or folder '${src.rel}'`);
    if (src.look.entry.type === 'folder' && srcPlace.root === dstPlace.root && relStrictlyInside(src.look.real, dst.look.real)) {
      throw badRequest(`cannot ${verb} '${src.rel}' into itself`);
    }
    this.requireFreeWithParent(dst);
    return { src, dst };
  }

  private folder(id: string): Folder {
    const rec = this.records.get(id);
    if (!rec) throw notFound(`folder '${id}' not found`);
    return rec;
  }

  /** A folder made before the reserved-name rule: listed, forgotten on delete, never served. */
  private reserved(rec: Folder): ApiError {
    return conflict(
      `folder '${rec.name}' has a name reserved for hostd's own directories (it was made before that rule): its directory may hold another domain's data, ` +
        `so it is not served; DELETE /folders/${rec.folder_id} forgets the record and keeps the directory`,
    );
  }

  private missingDir(rec: Folder): ApiError {
    return notFound(`folder '${rec.name}' has no directory at ${rec.path}`);
  }

  /** Which place a request names (target wins over folder id), without touching anything yet. */
  private selector(target: Target | null | undefined, folderId: string | null | undefined, folderArg: string) {
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

  private async place(target: Target | null | undefined, folderId: string | null | undefined, folderArg: string): Promise<Place> {
    return this.selector(target, folderId, folderArg).resolve();
  }

  private async resolvePlace(kind: TargetKind, id: string, settle = true): Promise<Place> {
    if (kind === 'folder') {
      const rec = this.folder(id);
      if (isInternalName(rec.name)) throw this.reserved(rec);
      const place: Place = { kind, id, label: rec.name, root: rec.path, within: 'folder' };
      if (settle) await this.settlePending(place);
      return place;
    }
    const root = await this.resolveConnection(id);
    const place: Place = { kind, id, label: id, root, within: 'location' };
    if (settle) await this.settlePending(place);
    return place;
  }

  /** The path to use and the argument it came from: target.path when given, else the sub-path argument. */
  private pathArg(target: Target | null | undefined, targetArg: string, sub: string | null | undefined, subArg: string): [string | null | undefined, string] {
    if (target && target.path !== undefined && target.path !== null) return [target.path, `${targetArg}.path`];
    return [sub, subArg];
  }

  private spot(place: Place, sub: unknown, arg: string): Spot {
    return { place, arg, rel: splitSubPath(sub, { arg, within: place.within }).join('/') };
  }

  private async see(spot: Spot): Promise<Seen> {
    try {
      return { ...spot, look: await this.fs.look(spot.place.root, spot.rel) };
    } catch (err) {
      throw this.problem(err, spot);
    }
  }

  /** The spot must be an existing folder (following a link, which the driver has checked). */
  private async seeDir(spot: Spot): Promise<Seen> {
    const seen = await this.see(spot);
    const { way, target } = seen.look;
    // Decision: an existing path that is not a folder gives 409 (its state blocks the call), not 400.
    if (way === 'not-folder') throw conflict(`'${showRel(spot.rel)}' is not a folder`);
    if (!target) throw notFound(`no such file or folder '${showRel(spot.rel)}'`);
    if (target.type !== 'folder') throw conflict(`'${showRel(spot.rel)}' is not a folder`);
    return seen;
  }

  /** Turns a driver's answer about `spot` into the API's. */
  private problem(err: unknown, spot: Spot): unknown {
    if (!(err instanceof FsProblem)) return fsError(err, spot.rel);
    const { arg, place } = spot;
    switch (err.kind) {
      case 'escape':
        return badRequest(`argument '${arg}' must stay inside the ${place.within}`);
      case 'loop':
        return badRequest(`argument '${arg}' runs into a symlink loop`);
      case 'root-missing':
        if (place.kind === 'folder') return this.missingDir(this.folder(place.id));
        return notFound(`location '${place.id}' has no mount directory at ${place.root}`);
      case 'missing':
        return notFound(`no such file or folder '${showRel(spot.rel)}'`);
      case 'not-folder':
        return conflict(`'${showRel(spot.rel)}' is not a folder`);
      case 'exists':
        return conflict(`'${showRel(spot.rel)}' already exists`);
      default:
        return internal(`unexpected ${err.message} under '${showRel(spot.rel)}'`);
    }
  }

  /** Turns a driver's answer about a rename or copy from `src` to `dst` into the API's. */
  private endsProblem(err: unknown, src: Seen, dst: Seen): unknown {
    if (err instanceof FsProblem) {
      if (err.kind === 'into-itself') return badRequest(`cannot copy '${src.rel}' into itself`);
      if (err.kind === 'special') return badRequest(`cannot copy '${src.rel}': '${under(src.rel, err.path)}' is not a file, folder or symlink`);
      if (err.end === 'from') return this.problem(err, src);
      if (err.kind === 'missing' || err.kind === 'not-folder') return this.problem(err, { ...dst, rel: parentRel(dst.rel) });
    }
    return this.problem(err, dst);
  }

  /** Refuses a tree holding links that leave its root (message by `outside`) or special files. */
  private async checkTree(at: Seen, outside: (sub: string) => string, verbRel = at.rel): Promise<void> {
    try {
      await this.fs.checkTree(at.place.root, at.look.real);
    } catch (err) {
      if (err instanceof FsProblem && err.kind === 'link-outside') throw badRequest(`cannot copy '${verbRel}': ${outside(under(at.rel, err.path))}`);
      if (err instanceof FsProblem && err.kind === 'special') throw badRequest(`cannot copy '${verbRel}': '${under(at.rel, err.path)}' is not a file, folder or symlink`);
      throw this.problem(err, at);
    }
  }

  private refuseRoot(spot: Spot): void {
    if (spot.rel === '') throw badRequest(`argument '${spot.arg}' must not be the ${spot.place.within} root`);
  }

  /** The destination must not exist (not even as a dangling link) and its parent must be a folder. */
  private requireFreeWithParent(dst: Seen): void {
    if (dst.look.entry) throw conflict(`'${dst.rel}' already exists`);
    const parent = parentRel(dst.rel);
    if (dst.look.way === 'missing') throw notFound(`no such file or folder '${showRel(parent)}'`);
    if (dst.look.way === 'not-folder') throw conflict(`'${showRel(parent)}' is not a folder`);
  }

  private ref(spot: Spot): TargetRef {
    return { kind: spot.place.kind, id: spot.place.id, path: spot.rel };
  }

  private label(place: Place, rel: string): string {
    return rel === '' ? place.label : `${place.label}/${rel}`;
  }
}
