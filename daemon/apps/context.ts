/**
 * What every part of the apps domain shares: its dependencies, the one lock
 * of its resources, and the few lookups every operation starts with (an app
 * or its 404, a pool, where its files are). The operation files (install.ts,
 * actions.ts, update.ts, move.ts, ...) take this object; none reaches into
 * another's state.
 *
 * Truth is in the store (record + compose content); the files compose runs
 * are rendered from it before every `up`, so a crash between writing files
 * and committing a record never leaves a definition the store does not know.
 */
import path from 'node:path';
import type { Logger } from 'pino';
import type { PoolConfig } from '../config.js';
import type { EventsPort, FoldersPort } from '../domain.js';
import { ensureAvailable } from '../lib/availability.js';
import type { NoteSink } from '../lib/caller.js';
import { conflict, notFound } from '../lib/errors.js';
import { KeyedLock, lockLabels, type Release } from '../lib/lock.js';
import type { JournalOp } from '../lib/journal.js';
import type { IntentRecovery } from '../lib/recovery.js';
import type { Tasks } from '../lib/tasks.js';
import type { PauseHook } from '../lib/test-pause.js';
import type { AppsDriver, AppsProgram, ContainerSignal, ProjectRef } from './driver.js';
import type { AppIntent, AppRecord, AppRecords } from './records.js';
import type { AppsSettings } from './settings.js';
import { CUSTOM, type TemplateCatalog } from './templates.js';

/** What a call hands an operation: where its activity note goes, and who made it (no caller: the operator). */
export type Call = NoteSink & { caller?: { tokenName: string } };

export interface AppsContextDeps {
  driver: AppsDriver;
  records: AppRecords;
  catalog: TemplateCatalog;
  pools: PoolConfig[];
  folders: () => FoldersPort;
  tasks: Tasks;
  log: Logger;
  /** hostd's data directory: the rendered compose files live in `<dataDir>/apps`; no app may mount it. */
  dataDir: string;
  settings: AppsSettings;
  /** The crash tests' pause (`HOSTD_TEST_PAUSE_AT=apps.<step>`). */
  pause: PauseHook;
  /** Start-up recovery of the domain's intents (run by open() before any call). */
  recovery: IntentRecovery<AppIntent>;
  /** Where `apps.state` events go (none: not reported, as in the unit tests over a fake driver). */
  events?: EventsPort;
}

/** How often a call retries interrupted changes that could not be settled yet (their runtime was missing). */
const RETRY_MS = 10_000;

export const appKey = (appId: string) => `app:${appId}`;

export class AppsContext {
  readonly driver: AppsDriver;
  readonly records: AppRecords;
  readonly catalog: TemplateCatalog;
  readonly tasks: Tasks;
  readonly log: Logger;
  readonly settings: AppsSettings;
  readonly pause: PauseHook;
  readonly pools: PoolConfig[];
  readonly dataDir: string;
  /** `<dataDir>/apps`: one directory per app with what compose runs. */
  readonly composeRoot: string;
  /** One key per app (`app:<id>`), plus the id allocation and each app's documentation. */
  readonly lock = new KeyedLock(lockLabels({ app: (id) => `app '${id}'`, docs: (id) => `the documentation of app '${id}'` }));
  /** Whether each app's stored compose file passes today's rules, by the input it was checked with (refusals.ts). */
  readonly refusals = new Map<string, { key: string; why: string | null }>();
  /** `apps.state` events: each change once, from a call or from the engine watch. */
  states!: AppsStates;
  private readonly folderPort: () => FoldersPort;
  private readonly recovery: IntentRecovery<AppIntent>;
  private lastRetry = 0;

  constructor(d: AppsContextDeps) {
    this.driver = d.driver;
    this.records = d.records;
    this.catalog = d.catalog;
    this.tasks = d.tasks;
    this.log = d.log;
    this.settings = d.settings;
    this.pause = d.pause;
    this.pools = d.pools;
    this.dataDir = d.dataDir;
    this.composeRoot = path.join(d.dataDir, 'apps');
    this.folderPort = d.folders;
    this.recovery = d.recovery;
  }

  folders(): FoldersPort {
    return this.folderPort();
  }

  /**
   * Before an operation uses the runtime: 503 naming what is missing. Once
   * the runtime answers, changes that a restart interrupted and that could
   * not be settled then are tried again (at most every 10 s).
   */
  async ready(programs: readonly AppsProgram[]): Promise<void> {
    await ensureAvailable(this.driver, programs);
    if (this.recovery.pending().length && Date.now() - this.lastRetry >= RETRY_MS) {
      this.lastRetry = Date.now();
      await this.recovery.retry();
    }
  }

  /** The app, or 404. */
  record(appId: string): AppRecord {
    const r = this.records.get(appId);
    if (!r) throw notFound(`app '${appId}' not found`);
    return r;
  }

  /** The app (404) whose interrupted change, if any, is settled (503 while it cannot be): what a change of it starts from. */
  async settled(appId: string): Promise<AppRecord> {
    this.record(appId);
    await this.recovery.requireSettled(appId, `app '${appId}'`);
    return this.record(appId);
  }

  /** As `settled`, and 409 while the app is still installing. */
  async installed(appId: string): Promise<AppRecord> {
    const r = await this.settled(appId);
    if (r.status === 'installing') throw conflict(`app '${r.app_id}' is still installing`);
    return r;
  }

  /** The pool named, else the configured default, else the first; 404 when unknown. */
  pool(storageId: string | undefined): PoolConfig {
    const id = storageId ?? this.settings.defaultStorageId ?? this.pools[0]?.id;
    const p = this.pools.find((x) => x.id === id);
    if (!p) throw notFound(`storage pool '${id}' not found`);
    return p;
  }

  /** Where the files compose runs for an app are. */
  files(appId: string) {
    const root = path.join(this.composeRoot, appId);
    return { root, file: path.join(root, 'compose.json'), files: path.join(root, 'files'), envFile: path.join(root, 'empty.env') };
  }

  ref(r: AppRecord): ProjectRef {
    const f = this.files(r.app_id);
    return { project: r.project, file: f.file, dir: r.data_dir, envFile: f.envFile };
  }

  /** The variables an app's compose content is interpolated with. */
  env(r: AppRecord): Record<string, string> {
    const e: Record<string, string> = {
      HOSTD_APP_ID: r.app_id,
      HOSTD_APP_NAME: r.name,
      HOSTD_APP_DATA: r.data_dir,
      HOSTD_PUBLISH_ADDRESS: this.settings.publishAddress,
    };
    for (const p of r.ports) e[p.name] = String(p.host_port);
    return e;
  }

  /** How messages name an app's content. */
  contentLabel(r: AppRecord): string {
    return r.template_id === CUSTOM ? 'compose_content' : `template '${r.template_id}'`;
  }
}

/**
 * What the domain asks of its state reports (`AppStates` in states.ts, set
 * by `appsContext`): declared here so that the context imports none of the
 * files that use it.
 */
export interface AppsStates {
  /** Reads the app's state now and reports it when it differs from the last reported. */
  refresh(appId: string, actor: string, data?: Record<string, unknown>): Promise<void>;
  /**
   * Writes a call's commit of the app's record with the event of the state it leaves, in one batch.
   * `settling`: the state once the call lets go of the app (a task's last commit, made while it holds the lock).
   */
  commit(appId: string, actor: string, ops: JournalOp[], settling?: boolean): Promise<void>;
  /** `release`, then a report of the state the app is left in. */
  releasing(appId: string, actor: string, release: Release): Release;
  /** The engine watch saw something of a container. */
  observe(s: ContainerSignal): void;
  /** Compares every app with the engine and reports what differs. */
  checkAll(why: 'open' | 'watch'): Promise<void>;
  /** Resolves when no report is running. */
  idle(): Promise<void>;
}
