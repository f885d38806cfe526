/**
 * The lxc sublevels: container records (the source of truth; each LXC config
 * file is rendered from its record), documentation, the intent journal and a
 * little state (the boot id of the last start).
 */
import type { DocsRecord } from '../lib/docs.js';
import { IntentJournal, type JournalDb } from '../lib/journal.js';
import type { Store, Sub } from '../store/store.js';

export type { NetworkType, NetworkSettings, MountPoint, RootfsKind, ContainerRecord } from './model.js';
import type { ContainerRecord, RootfsKind } from './model.js';

/** What an open intent says was under way when the daemon stopped. */
export type Intent =
  | { op: 'create'; lxcid: number; dir: string; confDir: string; zfs_dataset?: string }
  | { op: 'delete'; lxcid: number; dir: string; confDir: string; zfs_dataset?: string }
  | { op: 'move'; lxcid: number; from_storage: string; to_storage: string; from_dir: string; to_dir: string }
  | { op: 'disk'; lxcid: number; dir: string; new_kind: RootfsKind; new_path: string; old_path: string; disk_size_bytes: number }
  | { op: 'cleanup'; paths: string[]; zfs_datasets?: string[] }
  | { op: 'image'; tmp: string; final: string; remove_after?: string };

export const ctKey = (lxcid: number): string => String(lxcid).padStart(10, '0');

export class LxcRecords {
  readonly containers: Sub<ContainerRecord>;
  readonly docs: Sub<DocsRecord>;
  readonly intents: Sub<Intent>;
  readonly meta: Sub<unknown>;
  readonly journal: IntentJournal<Intent>;

  constructor(readonly store: Store) {
    this.containers = store.sub<ContainerRecord>('lxc_containers');
    this.docs = store.sub<DocsRecord>('lxc_docs');
    this.intents = store.sub<Intent>('lxc_intents');
    this.meta = store.sub<unknown>('lxc_meta');
    this.journal = new IntentJournal<Intent>(store, this.intents);
  }

  async all(): Promise<ContainerRecord[]> {
    return this.containers.values().all();
  }

  async get(lxcid: number): Promise<ContainerRecord | undefined> {
    return (await this.containers.get(ctKey(lxcid))) ?? undefined;
  }

  /** The same journal, its commits written by `db` (a state report joins them: states.ts `committing`). */
  journalVia(db: JournalDb): IntentJournal<Intent> {
    return new IntentJournal<Intent>(db, this.intents);
  }

  putOp(rec: ContainerRecord) {
    return { type: 'put' as const, sub: this.containers, key: ctKey(rec.lxcid), value: rec };
  }

  delOps(lxcid: number) {
    return [
      { type: 'del' as const, sub: this.containers, key: ctKey(lxcid) },
      { type: 'del' as const, sub: this.docs, key: ctKey(lxcid) },
    ];
  }

  async put(rec: ContainerRecord): Promise<void> {
    await this.containers.put(ctKey(rec.lxcid), rec);
  }
}
