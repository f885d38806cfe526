/**
 * What every part of the folders domain shares: its dependencies, the one
 * lock, the crash tests' pause, and the lookups every operation starts with
 * (a folder or its 404, which place and path a request names, where that path
 * leads now, and the API's answer for what the driver found). The operation
 * files (folders.ts, contents.ts, subfolders.ts, entries.ts, copy.ts,
 * recovery.ts) each take this object and nothing of each other.
 *
 * The filesystem is the driver's (driver.ts): the context hands it a root and
 * relative paths and never an absolute path of an entry, and the driver alone
 * keeps every operation inside its root. Mutations on one folder or location
 * are serialised inside the daemon (the keyed lock, waited for rather than
 * refused), so the "destination is free" checks cannot race with another call
 * of this daemon.
 */
import type { Target } from '../../api/registry/schema.js';
import type { PoolConfig } from '../config.js';
import { ensureAvailable } from '../lib/availability.js';
import type { NoteSink } from '../lib/caller.js';
import { ApiError, badRequest, conflict, errnoCode as code, internal, notFound } from '../lib/errors.js';
import { isInternalName } from '../lib/host-paths.js';
import { KeyedLock, lockLabels } from '../lib/lock.js';
import type { IntentRecovery } from '../lib/recovery.js';
import type { IntentJournal } from '../lib/journal.js';
import type { PauseHook } from '../lib/test-pause.js';
import { FsProblem, PROCFS, type FilesDriver, type Look } from './driver.js';
import { baseName, joinRel, parentRel, relStrictlyInside, showRel, splitSubPath, validateNewEntry } from './names.js';
import { committing, NO_EVENTS, type FolderEvents } from './events.js';
import type { Folder, FolderIntent, FolderRecords, FolderReport, PlaceRef } from './records.js';

export type TargetKind = Target['kind'];

/** What a change gets of its call: the activity note's sink, and who made it (its event's actor; none: the operator). */
export type Call = NoteSink & { caller?: { tokenName: string } };

export interface FoldersDeps {
  records: FolderRecords;
  driver: FilesDriver;
  pools: PoolConfig[];
  /** Absolute mount directory of a connected location; throws ApiError 404 for an unknown id. */
  resolveConnection?: (locationId: string) => Promise<string>;
  /** The crash tests' pause (`HOSTD_TEST_PAUSE_AT=folders.<step>`). */
  pause: PauseHook;
  /** Start-up recovery of the domain's intents (run by open() before any call). */
  recovery: IntentRecovery<FolderIntent>;
  /** Where `folders.state` events go, with the store their batches are written to (none: not reported, as in unit tests). */
  events?: FolderEvents;
  /** Search result cap (default 1000). */
  searchLimit?: number;
  /** Entries in one contents answer (default 10,000). */
  listLimit?: number;
}

export const DEFAULT_SEARCH_LIMIT = 1000;
/**
 * A contents answer holds at most this many entries (folders first, then by
 * name), with `truncated: true` when the folder has more: a folder of a
 * million entries must not make the daemon hold a million of them.
 */
export const DEFAULT_LIST_LIMIT = 10_000;

/** Entries named so are the daemon's own: deletions (pool roots and inside places) and copies in progress. */
export const TRASH_PREFIX = '.hostd-trash-';
export const COPY_PREFIX = '.hostd-copy-';
/**
 * The lock key of a folder name in a pool: a name check then a create or a
 * rename to it holds it, so two changes never take one name, while changes of
 * different names run side by side (their synced writes then share fsyncs).
 * Freeing a name (a delete, a rename away) needs no key: a create that still
 * sees the name taken answers 409, as it would a moment earlier.
 */
export const nameKey = (storageId: string, name: string) => `name:${storageId}\0${name}`;
export const placeKey = (kind: TargetKind, id: string) => `${kind}:${id}`;

/** A resolved folder or location root. */
export interface Place {
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
export interface Spot {
  place: Place;
  /** The argument it came from, for messages. */
  arg: string;
  /** Normalised, relative to the root; '' is the root. */
  rel: string;
}

/** A spot as the filesystem showed it. */
export interface Seen extends Spot {
  look: Look;
}

/** The path to use and the argument it came from. */
export type PathArg = [string | null | undefined, string];

/** `sub` (relative to the entry at `rel`) relative to the root. */
export function under(rel: string, sub: string): string {
  return sub === '' ? rel : joinRel(rel, sub);
}

/** A missing directory, whether the system or the driver says so. */
export function isMissing(err: unknown): boolean {
  return code(err) === 'ENOENT' || (err instanceof FsProblem && (err.kind === 'missing' || err.kind === 'root-missing'));
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

/** Runs `fn` on every item even when some fail; then throws the first failure. */
export async function everyOne<T>(items: T[], fn: (item: T) => Promise<unknown>): Promise<void> {
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

export class FoldersContext {
  readonly records: FolderRecords;
  readonly fs: FilesDriver;
  readonly pools: PoolConfig[];
  readonly pause: PauseHook;
  readonly recovery: IntentRecovery<FolderIntent>;
  readonly searchLimit: number;
  readonly listLimit: number;
  readonly events: FolderEvents;
  /** Keys: `name:<pool>\0<name>` (a name in a pool being taken), `folder:<id>` and `connection:<id>` (one change at a time in a place). */
  readonly lock = new KeyedLock(
    lockLabels({
      name: (rest) => `the name '${rest.slice(rest.indexOf('\0') + 1)}'`,
      folder: (id) => `folder '${id}'`,
      connection: (id) => `location '${id}'`,
    }),
  );
  private readonly resolveConnection: (locationId: string) => Promise<string>;

  constructor(deps: FoldersDeps) {
    this.records = deps.records;
    this.fs = deps.driver;
    this.pools = deps.pools;
    this.pause = deps.pause;
    this.recovery = deps.recovery;
    this.events = deps.events ?? { port: NO_EVENTS, store: deps.records.store };
    this.searchLimit = deps.searchLimit ?? DEFAULT_SEARCH_LIMIT;
    this.listLimit = deps.listLimit ?? DEFAULT_LIST_LIMIT;
    this.resolveConnection =
      deps.resolveConnection ??
      (async (id: string) => {
        throw notFound(`location '${id}' not found`);
      });
  }

  /** The intent journal of a change whose commit writes the event `report` (none: no event owed). */
  journal(report: FolderReport | undefined): IntentJournal<FolderIntent> {
    return this.records.journalVia(committing(this.events, report));
  }

  /**
   * One step on disk that changes nothing stored: journaled only when it owes an
   * event (`report`), so that the event is committed with the intent's drop and
   * recovery reports the step if a crash cut the call short after it. `pauseAt`
   * is the crash tests' pause after the step.
   */
  async reportedStep<T>(report: FolderReport | undefined, intent: FolderIntent, step: () => Promise<T>, pauseAt?: string): Promise<T> {
    if (!report) return step();
    return this.journal(report).run(
      this.records.entryKey(),
      intent,
      async () => {
        const out = await step();
        if (pauseAt) await this.pause(pauseAt);
        return out;
      },
      { commit: () => [] },
    );
  }

  /** Before any call touches the filesystem: 503 naming procfs when it is not there. */
  async ready(): Promise<void> {
    await ensureAvailable(this.fs, [PROCFS]);
  }

  folder(id: string): Folder {
    const rec = this.records.get(id);
    if (!rec) throw notFound(`folder '${id}' not found`);
    return rec;
  }

  /** A folder made before the reserved-name rule: listed, forgotten on delete, never served. */
  reserved(rec: Folder): ApiError {
    return conflict(
      `folder '${rec.name}' has a name reserved for hostd's own directories (it was made before that rule): its directory may hold another domain's data, ` +
        `so it is not served; DELETE /folders/${rec.folder_id} forgets the record and keeps the directory`,
    );
  }

  missingDir(rec: Folder): ApiError {
    return notFound(`folder '${rec.name}' has no directory at ${rec.path}`);
  }

  async removeQuietly(root: string, rel: string): Promise<void> {
    await this.fs.remove(root, rel).catch((err) => {
      if (!isMissing(err)) throw err;
    });
  }

  // ----- places -----------------------------------------------------------

  /** Which place a request names (target wins over folder id), without touching anything yet. */
  selector(target: Target | null | undefined, folderId: string | null | undefined, folderArg: string) {
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

  place(target: Target | null | undefined, folderId: string | null | undefined, folderArg: string): Promise<Place> {
    return this.selector(target, folderId, folderArg).resolve();
  }

  /**
   * The place's root, ready to use. Entry changes a restart left open in a
   * location that was not mounted then are settled first (`settle`): the
   * first call there after the mount finishes them.
   */
  async resolvePlace(kind: TargetKind, id: string, settle = true): Promise<Place> {
    if (settle) await this.ready();
    let place: Place;
    if (kind === 'folder') {
      const rec = this.folder(id);
      if (isInternalName(rec.name)) throw this.reserved(rec);
      place = { kind, id, label: rec.name, root: rec.path, within: 'folder' };
    } else {
      place = { kind, id, label: id, root: await this.resolveConnection(id), within: 'location' };
    }
    if (settle && this.recovery.pending().length) {
      // A folder change settled now (procfs was missing at start) writes its record: show it.
      if ((await this.recovery.retry()).settled) await this.records.load();
    }
    return place;
  }

  async placeRoot(ref: PlaceRef): Promise<string> {
    return (await this.resolvePlace(ref.kind, ref.id, false)).root;
  }

  placeRef(place: Place): PlaceRef {
    return { kind: place.kind, id: place.id };
  }

  /** The path to use and the argument it came from: target.path when given, else the sub-path argument. */
  pathArg(target: Target | null | undefined, targetArg: string, sub: string | null | undefined, subArg: string): PathArg {
    if (target && target.path !== undefined && target.path !== null) return [target.path, `${targetArg}.path`];
    return [sub, subArg];
  }

  spot(place: Place, sub: unknown, arg: string): Spot {
    return { place, arg, rel: splitSubPath(sub, { arg, within: place.within }).join('/') };
  }

  async see(spot: Spot): Promise<Seen> {
    try {
      return { ...spot, look: await this.fs.look(spot.place.root, spot.rel) };
    } catch (err) {
      throw this.problem(err, spot);
    }
  }

  /** The spot must be an existing folder (following a link, which the driver has checked). */
  async seeDir(spot: Spot): Promise<Seen> {
    const seen = await this.see(spot);
    const { way, target } = seen.look;
    // Decision: an existing path that is not a folder gives 409 (its state blocks the call), not 400.
    if (way === 'not-folder') throw conflict(`'${showRel(spot.rel)}' is not a folder`);
    if (!target) throw notFound(`no such file or folder '${showRel(spot.rel)}'`);
    if (target.type !== 'folder') throw conflict(`'${showRel(spot.rel)}' is not a folder`);
    return seen;
  }

  refuseRoot(spot: Spot): void {
    if (spot.rel === '') throw badRequest(`argument '${spot.arg}' must not be the ${spot.place.within} root`);
  }

  /** The destination must not exist (not even as a dangling link) and its parent must be a folder. */
  requireFreeWithParent(dst: Seen): void {
    if (dst.look.entry) throw conflict(`'${dst.rel}' already exists`);
    const parent = parentRel(dst.rel);
    if (dst.look.way === 'missing') throw notFound(`no such file or folder '${showRel(parent)}'`);
    if (dst.look.way === 'not-folder') throw conflict(`'${showRel(parent)}' is not a folder`);
  }

  /**
   * Both ends of a move or copy: confined, neither the root, the source
   * present, the destination free with its parent present, and a folder not
   * sent into itself.
   */
  async transferEnds(verb: 'move' | 'copy', srcPlace: Place, srcPath: PathArg, dstPlace: Place, dstPath: PathArg): Promise<{ src: Seen; dst: Seen }> {
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

  /** Refuses a tree holding links that leave its root (message by `outside`) or special files. */
  async checkTree(at: Seen, outside: (sub: string) => string, verbRel = at.rel): Promise<void> {
    try {
      await this.fs.checkTree(at.place.root, at.look.real);
    } catch (err) {
      if (err instanceof FsProblem && err.kind === 'link-outside') throw badRequest(`cannot copy '${verbRel}': ${outside(under(at.rel, err.path))}`);
      if (err instanceof FsProblem && err.kind === 'special')
        throw badRequest(`cannot copy '${verbRel}': '${under(at.rel, err.path)}' is not a file, folder or symlink`);
      throw this.problem(err, at);
    }
  }

  // ----- the driver's answers as the API's --------------------------------

  /** Turns a driver's answer about `spot` into the API's. */
  problem(err: unknown, spot: Spot): unknown {
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
  endsProblem(err: unknown, src: Seen, dst: Seen): unknown {
    if (err instanceof FsProblem) {
      if (err.kind === 'into-itself') return badRequest(`cannot copy '${src.rel}' into itself`);
      if (err.kind === 'special') return badRequest(`cannot copy '${src.rel}': '${under(src.rel, err.path)}' is not a file, folder or symlink`);
      if (err.end === 'from') return this.problem(err, src);
      if (err.kind === 'missing' || err.kind === 'not-folder') return this.problem(err, { ...dst, rel: parentRel(dst.rel) });
    }
    return this.problem(err, dst);
  }
}
