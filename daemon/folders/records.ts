/**
 * The folders domain's store: folder records in the `folders` sublevel, kept
 * in memory (GET /folders answers from memory: it is a hot path), and the
 * intent journal (`folder_intents`) of every change that touches the disk in
 * more than one step.
 */
import crypto from 'node:crypto';
import type { DomainOperationName } from '../../api/registry/index.js';
import { IntentJournal, type JournalDb, type JournalOp } from '../lib/journal.js';
import { allValues, type Store, type Sub } from '../store/store.js';

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

export type FolderOperation = DomainOperationName<'folders'>;

/** What one change did to one folder: the folder record's life, or its contents under `sub_path`. */
export interface FolderChange {
  folder_id: string;
  state: 'created' | 'renamed' | 'deleted' | 'changed';
  name?: string;
  sub_path?: string;
}

/**
 * The `folders.state` event a change owes (events.ts), kept in its intent so
 * that recovery can write it for a change a crash cut short. Intents from
 * before it have none: recovery writes no event for them.
 */
export interface FolderReport {
  /** The caller's token name. */
  actor: string;
  operation: FolderOperation;
  change: FolderChange;
}

/** The folder or location an entry change happens in. */
export interface PlaceRef {
  kind: 'folder' | 'connection';
  id: string;
}

/**
 * A multi-step change of entries inside a folder or location. Paths are real
 * paths relative to the place's root (links on the way already followed), so
 * that recovery finds the same entries.
 * - copy: the copy is made under the temporary name `temp` in `parent`, then
 *   renamed into place; recovery removes the temporary entry if it is there.
 * - remove: a folder tree is renamed to `trash` in `parent`, then removed;
 *   recovery removes what is left of it.
 * - moves: renames in order; recovery keeps them when all were done and
 *   otherwise renames the done ones back, last first.
 * - mkdirs: folders made in `parent` in order; recovery removes those that
 *   are still empty folders.
 * - mkdir, move, unlink: one step (a subfolder made, an entry renamed, a
 *   file removed), journaled only for the event it owes; recovery keeps what
 *   was done and reports it.
 *
 * `report` is the event the change owes (none in a connected location);
 * `dest` (copy) and `entry` (remove) say where recovery looks to tell a
 * change made from one undone.
 */
export type EntryIntent = (
  | { op: 'copy'; place: PlaceRef; parent: string; temp: string; dest?: string }
  | { op: 'remove'; place: PlaceRef; parent: string; trash: string; entry?: string }
  | { op: 'moves'; place: PlaceRef; pairs: Array<{ from: string; to: string }> }
  | { op: 'mkdirs'; place: PlaceRef; parent: string; names: string[] }
  | { op: 'mkdir'; place: PlaceRef; rel: string }
  | { op: 'move'; place: PlaceRef; from: string; to: string }
  | { op: 'unlink'; place: PlaceRef; rel: string }
) & { report?: FolderReport };

/**
 * A change in flight. It is stored before the filesystem is touched and
 * dropped (with the outcome's record writes) in one batch after, so that a
 * crash at any moment leaves something recovery can finish or undo.
 *
 * Folder changes are keyed by folder id. `trash` is the name, in the folder's
 * pool directory, its tree is renamed to before removal (older intents held
 * the absolute path; only its last segment is used). Entry changes are keyed
 * `e-<random>`.
 */
export type FolderIntent =
  | (({ op: 'create'; rec: Folder } | { op: 'rename'; from: Folder; to: Folder } | { op: 'delete'; rec: Folder; trash: string }) & { report?: FolderReport })
  | EntryIntent;

const ENTRY_OPS: ReadonlySet<string> = new Set(['copy', 'remove', 'moves', 'mkdirs', 'mkdir', 'move', 'unlink']);

export function isEntryIntent(i: FolderIntent): i is EntryIntent {
  return ENTRY_OPS.has(i.op);
}

/** The listing's order: by name, then pool. */
function byNameThenPool(a: Pick<Folder, 'name' | 'storage_id'>, b: Pick<Folder, 'name' | 'storage_id'>): number {
  if (a.name !== b.name) return a.name < b.name ? -1 : 1;
  if (a.storage_id !== b.storage_id) return a.storage_id < b.storage_id ? -1 : 1;
  return 0;
}

const nameKey = (storageId: string, name: string) => `${storageId}\0${name}`;

export class FolderRecords {
  readonly journal: IntentJournal<FolderIntent>;
  private readonly table: Sub<Folder>;
  private readonly intents: Sub<FolderIntent>;
  private readonly cache = new Map<string, Folder>();
  /** The same records by pool and name (names are unique in a pool). */
  private readonly byName = new Map<string, Folder>();
  /** Ids handed out by `newId` to creates not yet applied, so that two creates in flight never share one. */
  private readonly issued = new Set<string>();
  /**
   * Frozen copies of the records in listing order. A change moves one entry
   * (binary search and splice) rather than copying, freezing and sorting
   * every record: a create in a pool of N folders costs an O(N) move, not
   * O(N log N) work and N objects of garbage.
   */
  private sorted: Folder[] = [];
  /** The answer of folders_list: a frozen copy of `sorted`, made on the first list after a change and shared until the next. */
  private listing: readonly Folder[] | null = null;

  constructor(readonly store: Store) {
    this.table = store.sub<Folder>('folders');
    this.intents = store.sub<FolderIntent>('folder_intents');
    this.journal = new IntentJournal<FolderIntent>(store, this.intents);
  }

  /** The same journal, its commits written by `db` (with the event the change owes: events.ts). */
  journalVia(db: JournalDb): IntentJournal<FolderIntent> {
    return new IntentJournal<FolderIntent>(db, this.intents);
  }

  /** The key of the intent a commit drops (its ops hold the drop). */
  droppedIntent(ops: JournalOp[]): string | undefined {
    return ops.find((o) => o.type === 'del' && o.sub === this.intents)?.key;
  }

  /** Loads every record into memory (after recovery). */
  async load(): Promise<void> {
    this.cache.clear();
    for (const rec of await allValues(this.table)) this.cache.set(rec.folder_id, rec);
    this.byName.clear();
    for (const rec of this.cache.values()) this.byName.set(nameKey(rec.storage_id, rec.name), rec);
    this.sorted = [...this.cache.values()].map((r) => Object.freeze({ ...r })).sort(byNameThenPool);
    this.listing = null;
  }

  get(id: string): Folder | undefined {
    return typeof id === 'string' ? this.cache.get(id) : undefined;
  }

  findByName(storageId: string, name: string): Folder | undefined {
    return this.byName.get(nameKey(storageId, name));
  }

  /** Every record, sorted by name then pool; frozen, shared between calls. */
  all(): Folder[] {
    this.listing ??= Object.freeze(this.sorted.slice());
    return this.listing as Folder[];
  }

  /** A fresh folder id, reserved until `applied` takes it or `release` gives it back. */
  newId(): string {
    for (;;) {
      const id = 'f_' + crypto.randomBytes(8).toString('base64url').slice(0, 10);
      if (this.cache.has(id) || this.issued.has(id)) continue;
      this.issued.add(id);
      return id;
    }
  }

  /** Gives back an id from `newId` whose create did not happen. */
  release(id: string): void {
    this.issued.delete(id);
  }

  /** A fresh key for an entry intent. */
  entryKey(): string {
    return `e-${crypto.randomBytes(9).toString('base64url')}`;
  }

  /** The store write that makes `rec` the record (for a journal commit). */
  putOp(rec: Folder): JournalOp {
    return { type: 'put', sub: this.table, key: rec.folder_id, value: rec };
  }

  delOp(id: string): JournalOp {
    return { type: 'del', sub: this.table, key: id };
  }

  /** Mirrors a committed change in memory. */
  applied(id: string, rec: Folder | null): void {
    this.issued.delete(id);
    const before = this.cache.get(id);
    const sorted = this.sorted;
    if (before) {
      this.byName.delete(nameKey(before.storage_id, before.name));
      const at = this.position(before);
      if (at < sorted.length && sorted[at].folder_id === id) sorted.splice(at, 1);
      else {
        // Not where its name puts it (cannot happen): drop it wherever it is.
        const i = sorted.findIndex((r) => r.folder_id === id);
        if (i >= 0) sorted.splice(i, 1);
      }
    }
    if (rec) {
      this.cache.set(id, rec);
      this.byName.set(nameKey(rec.storage_id, rec.name), rec);
      sorted.splice(this.position(rec), 0, Object.freeze({ ...rec }));
    } else {
      this.cache.delete(id);
    }
    this.listing = null;
  }

  /** The first index of `sorted` whose entry does not sort before `rec`. */
  private position(rec: Folder): number {
    let lo = 0;
    let hi = this.sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (byNameThenPool(this.sorted[mid], rec) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
