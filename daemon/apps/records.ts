/**
 * The apps sublevels: app records, each app's compose content (as the user or
 * template gave it), documentation, and the intent journal of changes that
 * touch the engine or the disk. Records are kept in memory as well (the list
 * answers without reading the store): every batch written here, the
 * journal's included (start-up recovery commits through it), is mirrored.
 */
import type { ArgsOf } from '../../api/registry/index.js';
import type { DocsRecord } from '../lib/docs.js';
import { IntentJournal, type JournalOp } from '../lib/journal.js';
import type { Store, Sub } from '../store/store.js';

/** A folder assignment as install and PATCH /apps/{app_id}/folders take it, and as it is stored. */
export type FolderAssignment = NonNullable<ArgsOf<'apps_create'>['folder_assignments']>[number];

export interface ReservedPort {
  /** The template's variable. */
  name: string;
  host_port: number;
  protocol: 'tcp' | 'udp';
}

export interface AppRecord {
  app_id: string;
  name: string;
  /** A template id, or `custom`. */
  template_id: string;
  storage_id: string;
  /** `<pool>/.hostd-apps/<app_id>`: the app's own data (its volumes and relative bind mounts). */
  data_dir: string;
  /** Compose project name (naming.ts; apps installed before the current scheme keep theirs until a change re-creates them). */
  project: string;
  folder_assignments: FolderAssignment[];
  /** Host ports hostd chose for the template's port parameters. */
  ports: ReservedPort[];
  compose_sha256: string;
  /** Bumped by every change of the definition; carried by the containers as a label. */
  generation: number;
  desired_state: 'running' | 'stopped';
  status: 'installing' | 'installed';
  /** The install or move task running for it, if any. */
  task_id: string | null;
  created_at: string;
  updated_at: string;
}

export interface AppContent {
  content: string;
  sha256: string;
}

export interface Definition {
  record: AppRecord;
  content: AppContent;
}

export type AppIntent =
  | { op: 'install'; app_id: string; record: AppRecord }
  | { op: 'update'; app_id: string; what: 'compose' | 'folders'; before: Definition; after: Definition }
  | { op: 'move'; app_id: string; phase: 'copy' | 'switch'; before: AppRecord; after: AppRecord; was_running: boolean; staging: string }
  | { op: 'delete'; app_id: string; record: AppRecord }
  | { op: 'action'; app_id: string; action: 'start' | 'stop' | 'restart'; after: AppRecord };

export class AppRecords {
  readonly apps: Sub<AppRecord>;
  readonly content: Sub<AppContent>;
  readonly docs: Sub<DocsRecord>;
  readonly intents: Sub<AppIntent>;
  readonly journal: IntentJournal<AppIntent>;
  /** The state last reported in an `apps.state` event, by app id (states.ts). */
  readonly states: Sub<string>;
  private readonly cache = new Map<string, AppRecord>();

  constructor(readonly store: Store) {
    this.apps = store.sub<AppRecord>('apps');
    this.content = store.sub<AppContent>('apps_content');
    this.docs = store.sub<DocsRecord>('apps_docs');
    this.intents = store.sub<AppIntent>('apps_intents');
    this.states = store.sub<string>('apps_state');
    this.journal = new IntentJournal<AppIntent>({ batch: (ops) => this.write(ops) }, this.intents);
  }

  async load(): Promise<void> {
    this.cache.clear();
    for await (const [k, v] of this.apps.iterator()) this.cache.set(k, v);
  }

  get(appId: string): AppRecord | undefined {
    return this.cache.get(appId);
  }

  all(): AppRecord[] {
    return [...this.cache.values()].sort((a, b) => a.created_at.localeCompare(b.created_at) || a.app_id.localeCompare(b.app_id));
  }

  async contentOf(appId: string): Promise<AppContent> {
    const c = await this.content.get(appId);
    if (!c) throw new Error(`app '${appId}' has no stored compose content`);
    return c;
  }

  putRecord(r: AppRecord): JournalOp {
    return { type: 'put', sub: this.apps, key: r.app_id, value: r };
  }

  putContent(appId: string, c: AppContent): JournalOp {
    return { type: 'put', sub: this.content, key: appId, value: c };
  }

  forget(appId: string): JournalOp[] {
    return [
      { type: 'del', sub: this.apps, key: appId },
      { type: 'del', sub: this.content, key: appId },
      { type: 'del', sub: this.docs, key: appId },
    ];
  }

  /** Writes ops (and nothing else) atomically, then mirrors the record writes in memory. */
  async write(ops: JournalOp[]): Promise<void> {
    await this.store.batch(ops);
    this.mirror(ops);
  }

  /** Records an intent together with other writes (e.g. the installing record). */
  async begin(key: string, intent: AppIntent, ops: JournalOp[] = []): Promise<void> {
    await this.write([...ops, { type: 'put', sub: this.intents, key, value: intent }]);
  }

  /** Writes the outcome and drops the intent in one batch. */
  commit(key: string, ops: JournalOp[]): Promise<void> {
    return this.journal.commit(key, ops);
  }

  /** Keeps the intent open but updates it (a new phase), with other writes. */
  async advance(key: string, intent: AppIntent, ops: JournalOp[] = []): Promise<void> {
    await this.begin(key, intent, ops);
  }

  /** The app's record as `ops` leave it (the one stored when they do not touch it). */
  after(appId: string, ops: JournalOp[]): AppRecord | undefined {
    const mine = ops.filter((o) => o.sub === this.apps && o.key === appId).at(-1);
    if (!mine) return this.get(appId);
    return mine.type === 'put' ? (mine.value as AppRecord) : undefined;
  }

  /** The ops of a commit: the outcome and the intent's drop (what `commit` writes). */
  commitOps(key: string, ops: JournalOp[]): JournalOp[] {
    return [...ops, { type: 'del', sub: this.intents, key }];
  }

  /** Mirrors record writes made in another batch (a state event's, states.ts) in memory. */
  mirror(ops: JournalOp[]): void {
    for (const o of ops) {
      if (o.sub !== this.apps) continue;
      if (o.type === 'put') this.cache.set(o.key, o.value as AppRecord);
      else this.cache.delete(o.key);
    }
  }
}
