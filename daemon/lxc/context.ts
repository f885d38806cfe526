/**
 * What every part of the LXC service shares: its dependencies, the one lock
 * (labels given once), the test hooks, and the few lookups every operation
 * makes (a pool, a record and its 404, where its rootfs is, its state and
 * view, its config, the rules it breaks now, the runtime it needs). The
 * operation files (containers, create, lifecycle, disk, move, exec, stats,
 * docs, images, templates, host-status, recovery) each hold a context and
 * nothing of each other.
 */
import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { PoolConfig } from '../config.js';
import type { EventsPort, FolderRef } from '../domain.js';
import type { NoteSink } from '../lib/caller.js';
import { ensureAvailable } from '../lib/availability.js';
import { conflict, notFound } from '../lib/errors.js';
import type { JournalDb, JournalOp } from '../lib/journal.js';
import { KeyedLock, lockLabels } from '../lib/lock.js';
import type { Tasks } from '../lib/tasks.js';
import { testPause, type PauseHook } from '../lib/test-pause.js';
import { mountPolicy, violations, type Violation } from './containment.js';
import { CGROUPS, type ContainerPaths, type LxcDriver, type RootfsPlacement, type StateSignal } from './driver.js';
import type { ContainerRecord, NetworkSettings } from './model.js';
import { lxcNameOf } from './naming.js';
import type { Intent, LxcRecords } from './records.js';
import type { LxcSettings } from './settings.js';
import { testHold } from './test-hold.js';
import { containerView, stateName, type ContainerView, type StateName } from './views.js';

export interface LxcDeps {
  records: LxcRecords;
  driver: LxcDriver;
  settings: LxcSettings;
  pools: PoolConfig[];
  tasks: Tasks;
  log: Logger;
  /** Managed folders (for mount point roots); empty when no folders domain runs. */
  folders: () => FolderRef[];
  /** hostd's data dir: never mounted into a container (it holds the store, secrets, certificates). */
  dataDir: string;
  /** The daemon's environment (the test hooks read it). */
  env: NodeJS.ProcessEnv;
  /** Where `lxc.state` events go. */
  events: EventsPort;
}

/** Programs by what a call does with them (names `availability()` reports). */
export const NEEDS = {
  lifecycle: ['lxc-start', 'lxc-stop', 'lxc-info', 'lxc-attach', 'lxc-freeze', 'lxc-unfreeze', 'lxc-cgroup', CGROUPS],
  build: ['tar', 'bash', 'lxc-usernsexec', 'newuidmap', 'newgidmap', 'setfacl'],
  disk: ['mkfs.ext4', 'e2fsck', 'resize2fs', 'dumpe2fs'],
} as const;

const now = () => new Date().toISOString();

export class LxcContext {
  readonly records: LxcRecords;
  readonly driver: LxcDriver;
  readonly settings: LxcSettings;
  readonly pools: PoolConfig[];
  readonly tasks: Tasks;
  readonly log: Logger;
  /**
   * Keys: `ct:<lxcid>` (one change at a time per container), `img:<pool>:<id>`
   * (an image's delete, move, download, capture), `name:<lowercase name>` (a
   * name being taken), `docs:<lxcid>`, `lxcid-alloc`.
   */
  readonly lock = new KeyedLock(
    lockLabels({
      ct: (id) => `container ${id}`,
      img: (rest) => {
        const i = rest.indexOf(':');
        return `image '${rest.slice(i + 1)}' on storage '${rest.slice(0, i)}'`;
      },
      name: (n) => `the name '${n}'`,
    }),
  );
  /** The crash tests' pause (`HOSTD_TEST_PAUSE_AT=lxc.<step>`). */
  readonly pause: PauseHook;
  /** The race tests' hold (`HOSTD_TEST_HOLD_AT=lxc.<step>`). */
  readonly hold: PauseHook;
  /** `lxc.state` events: each settled change once, from a call or from the runtime watch. */
  states!: LxcStates;
  private readonly folders: () => FolderRef[];
  private readonly dataDir: string;
  /** Images read by creates in progress, by lock key (a delete or move of one is 409 meanwhile). */
  private readonly imageReaders = new Map<string, number>();

  constructor(d: LxcDeps) {
    this.records = d.records;
    this.driver = d.driver;
    this.settings = d.settings;
    this.pools = d.pools;
    this.tasks = d.tasks;
    this.log = d.log;
    this.folders = d.folders;
    this.dataDir = d.dataDir;
    this.pause = testPause(d.env, 'lxc', d.log);
    this.hold = testHold(d.env, 'lxc', d.log);
  }

  now(): string {
    return now();
  }

  /** 503 naming the first of `names` that is missing (asking the host again before refusing). */
  async require(names: readonly string[]): Promise<void> {
    await ensureAvailable(this.driver, names);
  }

  pool(storageId: string, arg = 'storage_id'): PoolConfig {
    const p = this.pools.find((x) => x.id === storageId);
    if (!p) throw notFound(`storage '${storageId}' not found (argument '${arg}')`);
    return p;
  }

  async record(lxcid: number): Promise<ContainerRecord> {
    const r = await this.records.get(lxcid);
    if (!r) throw notFound(`container ${lxcid} not found`);
    return r;
  }

  /** 409 when another container has this name (names are unique without regard to case). */
  async ensureNameFree(name: string, except?: number): Promise<void> {
    const lower = name.toLowerCase();
    for (const r of await this.records.all()) {
      if (r.lxcid !== except && r.name.toLowerCase() === lower) throw conflict(`a container named '${name}' exists already (lxcid ${r.lxcid})`);
    }
  }

  /** One change at a time per container; an unknown id is its 404 before any lock (never a 409 about nothing). */
  onContainer<T>(lxcid: number, what: string, fn: (rec: ContainerRecord) => Promise<T>): Promise<T> {
    return this.lock.exclusiveOn(() => this.record(lxcid), [`ct:${lxcid}`], what, fn).finally(() => this.states.afterCall(lxcid));
  }

  paths(rec: ContainerRecord): ContainerPaths {
    return this.driver.storage.containerPaths(this.pool(rec.storage_id).path, rec.lxcid);
  }

  placement(rec: ContainerRecord): RootfsPlacement {
    const p = this.paths(rec);
    return { kind: rec.rootfs_kind, path: rec.rootfs_kind === 'loop' ? p.img : p.rootfs };
  }

  effectiveBridge(net: NetworkSettings): string | null {
    return net.type === 'bridged' ? (net.bridge ?? this.settings.defaultBridge) : null;
  }

  /** Fast state for lists: cgroup files, and 'stopped' when they say nothing. */
  quickState(rec: ContainerRecord): StateName {
    const s = this.driver.cgroups.fastState(lxcNameOf(rec.lxcid));
    return s ? stateName(s) : 'stopped';
  }

  /** Exact state: cgroup files, else lxc-info. */
  async state(rec: ContainerRecord): Promise<StateName> {
    return stateName(await this.driver.tools.state(lxcNameOf(rec.lxcid)));
  }

  view(rec: ContainerRecord, state: StateName): ContainerView {
    const pool = this.pools.find((x) => x.id === rec.storage_id);
    return containerView(rec, state, pool ? this.placement(rec) : null, this.effectiveBridge(rec.network));
  }

  /** Renders the container's LXC config from its record (the record is the truth). */
  async writeConfig(rec: ContainerRecord): Promise<void> {
    await this.driver.tools.writeConfig(rec, { rootfs: this.placement(rec), bridge: this.effectiveBridge(rec.network) });
  }

  /** Runs `fn` on the rootfs of a stopped container. */
  withRootfs<T>(rec: ContainerRecord, readOnly: boolean, fn: (root: string) => Promise<T>): Promise<T> {
    return this.driver.storage.withRootfs(this.pool(rec.storage_id).path, this.placement(rec), readOnly, fn);
  }

  // ---- the rules a container must keep to be used

  /** The host-path policy for mount points as it is now (folders come and go). */
  mountPolicy() {
    return mountPolicy({
      folders: this.folders(),
      mountRoots: this.settings.mountRoots,
      pools: this.pools,
      dataDir: this.dataDir,
      lxcPath: this.settings.lxcPath,
    });
  }

  /** The rules the record breaks now (privileged while off, mounts outside the allowed roots). */
  async violationsOf(rec: ContainerRecord): Promise<Violation[]> {
    if (!rec.privileged && rec.mount_points.length === 0) return [];
    return violations(rec, rec.mount_points.length ? await this.mountPolicy() : null, this.settings.allowPrivileged);
  }

  /** 409 naming every rule in `v`, for a call (`start`, `exec`, ...) that would use the container. */
  refusal(rec: ContainerRecord, what: string, v: Violation[]) {
    return conflict(`container ${rec.lxcid} cannot ${what}: ${v.map((x) => x.message).join('; ')}`);
  }

  async refuseViolations(rec: ContainerRecord, what: string): Promise<void> {
    const v = await this.violationsOf(rec);
    if (v.length) throw this.refusal(rec, what, v);
  }

  // ---- images read by creates

  /** Marks the image of lock key `key` read until the returned function is called. */
  readingImage(key: string): () => void {
    this.imageReaders.set(key, (this.imageReaders.get(key) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const n = (this.imageReaders.get(key) ?? 1) - 1;
      if (n <= 0) this.imageReaders.delete(key);
      else this.imageReaders.set(key, n);
    };
  }

  isImageRead(key: string): boolean {
    return (this.imageReaders.get(key) ?? 0) > 0;
  }

  // ---- files of containers, and their clean-up

  /** Removes a container's rootfs, its ZFS dataset and its directory under the lxc path. */
  async removeContainerFiles(dir: string, lxcid: number, zfsDataset?: string): Promise<void> {
    if (zfsDataset) await this.driver.zfs.destroy(zfsDataset);
    await this.driver.storage.remove(dir);
    await this.driver.tools.removeConfig(lxcNameOf(lxcid));
  }

  private cleanupKey(paths: string[]): string {
    return `cleanup:${crypto.createHash('sha256').update(paths.join('\n')).digest('hex').slice(0, 16)}`;
  }

  /** A clean-up intent written in a change's commit batch: recovery finishes it if the removal below is cut short. */
  cleanupOp(paths: string[]): JournalOp {
    return { type: 'put', sub: this.records.intents, key: this.cleanupKey(paths), value: { op: 'cleanup', paths } satisfies Intent };
  }

  async finishCleanup(paths: string[]): Promise<void> {
    for (const p of paths) await this.driver.storage.remove(p);
    await this.records.journal.drop(this.cleanupKey(paths));
  }
}

/** The states an `lxc.state` event names: the settled ones, and the two ends. */
export type ReportedState = 'STOPPED' | 'RUNNING' | 'FROZEN' | 'created' | 'deleted';

/** The call a change is reported for: who made it, and whether its activity row syncs the report. */
export type ChangeSink = Pick<NoteSink, 'rowSyncs'> & { caller?: { tokenName: string } };

/**
 * What the domain asks of its state reports (`StateReports` in states.ts,
 * set by index.ts): declared here so that the context imports none of the
 * files that use it.
 */
export interface LxcStates {
  /** A call changed the container (under its lock): report it, as the call's actor (lazily when the call's row syncs it). */
  changed(lxcid: number, state: ReportedState, by: ChangeSink): Promise<void>;
  /** Where a journal commits a create or delete: the record's ops with their event, in one batch. */
  committing(lxcid: number, state: 'created' | 'deleted', actor: string): JournalDb;
  /** The runtime watch saw something of a container. */
  observe(s: StateSignal): void;
  /** Compares every container with the runtime and reports what differs. */
  checkAll(why: 'open' | 'watch'): Promise<void>;
  /** A call on the container ended: check what a signal set aside meanwhile. */
  afterCall(lxcid: number): void;
  /** Resolves when no report is running. */
  idle(): Promise<void>;
}
