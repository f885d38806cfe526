/**
 * The folders domain's store: folder records in the `folders` sublevel, kept
 * in memory (GET /folders answers from memory: it is a hot path), and the
 * intent journal (`folder_intents`) of every change that touches the disk in
 * more than one step.
 */
import crypto from 'node:crypto';
import { IntentJournal, type JournalOp } from '../lib/journal.js';
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

/**
 * A change in flight. It is stored before the filesystem is touched and
 * dropped (with the outcome's record writes) in one batch after, so that a
 * crash at any moment leaves something recovery can finish or undo.
 *
 * Folder changes are keyed by folder id. `trash` is the name, in the folder's
 * pool directory, its tree is renamed to before removal (older intents held
 * the absolute path; only its last segment is used).
 */
export type FolderIntent =
  | { op: 'create'; rec: Folder }
  | { op: 'rename'; from: Folder; to: Folder }
  | { op: 'delete'; rec: Folder; trash: string };

export class FolderRecords {
  readonly journal: IntentJournal<FolderIntent>;
  private readonly table: Sub<Folder>;
  private readonly cache = new Map<string, Folder>();
  /** The answer of folders_list, rebuilt on every change. */
  private listing: Folder[] = [];

  constructor(store: Store) {
    this.table = store.sub<Folder>('folders');
    this.journal = new IntentJournal<FolderIntent>(store, store.sub<FolderIntent>('folder_intents'));
  }

  /** Loads every record into memory (after recovery). */
  async load(): Promise<void> {
    this.cache.clear();
    for (const rec of await allValues(this.table)) this.cache.set(rec.folder_id, rec);
    this.rebuild();
  }

  get(id: string): Folder | undefined {
    return typeof id === 'string' ? this.cache.get(id) : undefined;
  }

  findByName(storageId: string, name: string): Folder | undefined {
    for (const r of this.cache.values()) if (r.storage_id === storageId && r.name === name) return r;
    return undefined;
  }

  /** Every record, sorted by name then pool; frozen, shared between calls. */
  all(): Folder[] {
    return this.listing;
  }

  newId(): string {
    for (;;) {
      const id = 'f_' + crypto.randomBytes(8).toString('base64url').slice(0, 10);
      if (!this.cache.has(id)) return id;
    }
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
    if (rec) this.cache.set(id, rec);
    else this.cache.delete(id);
    this.rebuild();
  }

  private rebuild(): void {
    const listing = [...this.cache.values()]
      .map((r) => Object.freeze({ ...r }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.storage_id < b.storage_id ? -1 : 1));
    Object.freeze(listing);
    this.listing = listing;
  }
}
