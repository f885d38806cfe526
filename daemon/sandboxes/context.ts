/**
 * The sandboxes domain's context: what every part of the sandbox service
 * shares (the environment, the lock, the boots under way and the change
 * signal waiters listen to) and the steps several operations take (look a
 * sandbox up for its owner, read-modify-write its record, its view, the
 * resources and warm state a create gets, the background boot, a destroy's
 * finish). The parts (admission, reads, lifecycle, warm states, upkeep) each
 * hold one concern's operations and reach the rest only through this
 * context; service.ts composes them.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { ApiError, badRequest, conflict, internal, notFound } from '../lib/errors.js';
import { KeyedLock, lockLabels } from '../lib/lock.js';
import { noNotes, type Caller, type NoteSink } from '../lib/caller.js';
import type { Tasks } from '../lib/tasks.js';
import type { SecretStore } from '../lib/secrets.js';
import type { PauseHook } from '../lib/test-pause.js';
import { OPERATOR } from '../lib/operator.js';
import { O, SANDBOX_LABEL, type SandboxVms, type VmView, type SandboxImage } from './driver.js';
import type { SandboxRecords, Phase, SandboxRecord, SandboxState } from './records.js';
import type { SandboxSettings } from './settings.js';
import type { EventsPort } from '../domain.js';
import { SandboxStates } from './state-events.js';
import { nextSignal, type NextSignal } from '../events/wake.js';

export interface SandboxEnv {
  records: SandboxRecords;
  vms: SandboxVms;
  tasks: Tasks;
  secrets: SecretStore;
  settings: SandboxSettings;
  log: Logger;
  env: NodeJS.ProcessEnv;
  /** The crash tests' pause hook (daemon/lib/test-pause.ts); none in tests that build the service by hand. */
  pause?: PauseHook;
  /** Where `sandboxes.state` events go (state-events.ts); none in tests that build the service by hand. */
  events?: EventsPort;
  /** Hears each sandbox's first start once it is stored (the `sandboxStarts` port, index.ts). */
  onStarted?(method: 'warm' | 'cold', ms: number): void;
}

export type { SandboxState } from './records.js';

export interface SandboxView {
  id: string;
  name: string;
  state: SandboxState;
  image_id: string;
  resources: { cpu_cores: number; memory_mb: number; disk_gb: number };
  labels: Record<string, string>;
  autostart: boolean;
  owner: string;
  start: SandboxRecord['start'];
  vmid: number | null;
  error: string | null;
  created_at: string;
  running_at: string | null;
  updated_at: string;
  destroyed_at: string | null;
  destroyed_by: string | null;
}

export interface CreateArgs {
  image_id: string;
  name?: string;
  seed_data?: string;
  resources?: { cpu_cores?: number; memory_mb?: number; disk_gb?: number } | null;
  labels?: Record<string, string>;
  idempotency_key?: string;
  autostart?: boolean;
}

export type Ctx = NoteSink & { caller: Caller };

export const SEED_NS = 'sandboxes-seed';
export const SEED_MAX = 64 * 1024;
export const ID = /^sbx-[0-9a-f]{12}$/;
export const GiB = 1024 ** 3;
export const MAX_WAIT_MS = 2 ** 31 - 1;
export const LIVE: ReadonlySet<Phase> = new Set(['booting', 'ready', 'destroying']);

/** The name prefix of the warm states forks are saved to: internal, never offered to creates or listed as an image's. */
export const FORK_WS_PREFIX = 'sandbox fork of ';
export const isForkState = (w: { name: string }) => w.name.startsWith(FORK_WS_PREFIX);

export const now = () => new Date().toISOString();
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Keeps 409s about the VM in the sandbox's words. */
export function inSandboxTerms(err: unknown, rec: SandboxRecord): unknown {
  if (err instanceof ApiError && rec.vmid !== null) {
    return new ApiError(err.status, err.message.replace(new RegExp(`\\bVM ${rec.vmid}\\b`, 'g'), `sandbox '${rec.id}'`), err.headers);
  }
  return err;
}

export function checkLabels(labels: Record<string, string>): void {
  const entries = Object.entries(labels);
  if (entries.length > 64) throw badRequest("argument 'labels' takes at most 64 pairs");
  for (const [k, v] of entries) {
    if (!k || k.length > 128) throw badRequest("argument 'labels' keys must be 1-128 characters");
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(k)) throw badRequest("argument 'labels' keys must not contain control characters");
    if (v.length > 1024) throw badRequest(`argument 'labels.${k}' must be at most 1024 characters`);
  }
}

export class SandboxContext {
  readonly lock = new KeyedLock(lockLabels({ sbx: (id) => `sandbox '${id}'` }));

  /** Wakes the waiters of a sandbox (by id) at each change of its record and each state event. */
  readonly changes = new EventEmitter();

  /** Reports each change of a sandbox's state once, to its owner (`sandboxes.state` events). */
  readonly states: SandboxStates;

  /** Boots under way in this process, by sandbox id. */
  readonly boots = new Map<string, { ac: AbortController; done: Promise<void> }>();

  /** Image ids a warm state is being saved for (one at a time per image). */
  readonly warming = new Set<string>();

  readonly warmFailedAt = new Map<string, number>();

  closed = false;

  /** Stops hearing the VM service's changes (at close). */
  readonly unhearVms: () => void;

  constructor(readonly e: SandboxEnv) {
    this.changes.setMaxListeners(0);
    this.states = new SandboxStates(this, e.events);
    // A change of a sandbox's VM nobody asked for (its guest powered off, QEMU died): the sandbox's state changed with it.
    this.unhearVms =
      e.vms.onStateChange?.((ch) => {
        const id = ch.labels[SANDBOX_LABEL];
        if (ch.owner === O.owner && id && ch.actor === 'runtime') this.states.soon(id, { actor: 'runtime', reason: ch.reason });
      }) ?? (() => undefined);
  }

  get vms(): SandboxVms {
    return this.e.vms;
  }

  get records(): SandboxRecords {
    return this.e.records;
  }

  /** The crash tests' pause: with HOSTD_TEST_PAUSE_AT=sandboxes.<step> a change stops for good at that step. */
  step(name: string): Promise<void> {
    return this.e.pause?.(name) ?? Promise.resolve();
  }

  // ------------------------------------------------------------ records and views

  /** The sandbox if the caller's token owns it; 404 otherwise (never 403: another token's sandbox does not exist for it). */
  async owned(id: string, caller: Caller): Promise<SandboxRecord> {
    const r = ID.test(id) ? await this.records.get(id) : undefined;
    if (!r || r.token_id !== caller.tokenId) throw notFound(`sandbox '${id}' not found`);
    return r;
  }

  /**
   * The caller's sandbox (any sandbox for the operator, who reaches every
   * token's), running: 404 for another token's, 409 naming the state otherwise.
   */
  async runningFor(id: string, caller: Caller, what: string): Promise<SandboxRecord & { vmid: number }> {
    let rec: SandboxRecord | undefined;
    if (caller.tokenId === OPERATOR) {
      rec = ID.test(id) ? await this.records.get(id) : undefined;
      if (!rec) throw notFound(`sandbox '${id}' not found`);
    } else rec = await this.owned(id, caller);
    if (rec.phase === 'booting') throw conflict(`sandbox '${id}' is booting: ${what} needs a running sandbox (POST /sandboxes/${id}/wait)`);
    this.refuseUnready(rec, what);
    const v = await this.view(rec);
    if (v.state !== 'running') {
      const hint = v.state === 'suspended' || v.state === 'stopped' ? ` (POST /sandboxes/${id}/resume)` : '';
      throw conflict(`sandbox '${id}' is ${v.state}: ${what} needs a running sandbox${hint}`);
    }
    return rec as SandboxRecord & { vmid: number };
  }

  /** Read-modify-write of one record (serialised per sandbox); wakes its waiters. */
  async update(id: string, fn: (r: SandboxRecord) => void | false): Promise<SandboxRecord | undefined> {
    const out = await this.lock.run([`rec:${id}`], async () => {
      const r = await this.records.get(id);
      if (!r) return undefined;
      if (fn(r) === false) return r;
      r.updated_at = now();
      await this.states.report(id, { rec: r, ops: [this.records.put(r)] });
      return r;
    });
    this.changes.emit(id);
    return out;
  }

  /**
   * The next change of the sandbox (a record change, or a state event): take
   * it before reading the sandbox, then `wait` for it (or `ms`), then `cancel`.
   */
  nextChange(id: string): NextSignal {
    return nextSignal(this.changes, id);
  }

  async vmOf(rec: SandboxRecord): Promise<VmView | null> {
    if (rec.vmid === null) return null;
    try {
      return await this.vms.get(rec.vmid, O);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return null;
      throw err;
    }
  }

  async view(rec: SandboxRecord): Promise<SandboxView> {
    let state: SandboxState;
    let error = rec.error;
    switch (rec.phase) {
      case 'ready': {
        const vm = await this.vmOf(rec);
        if (!vm) {
          state = 'failed';
          error = `its VM ${rec.vmid} is gone`;
        } else state = vm.state === 'creating' ? 'booting' : vm.state;
        break;
      }
      default:
        state = rec.phase;
    }
    return {
      id: rec.id,
      name: rec.name,
      state,
      image_id: rec.image_id,
      resources: { cpu_cores: rec.cpu_cores, memory_mb: rec.memory_mb, disk_gb: rec.disk_gb },
      labels: rec.labels,
      autostart: rec.autostart,
      owner: rec.token_name,
      start: rec.start,
      vmid: rec.vmid,
      error,
      created_at: rec.created_at,
      running_at: rec.running_at,
      updated_at: rec.updated_at,
      destroyed_at: rec.destroyed_at,
      destroyed_by: rec.destroyed_by,
    };
  }

  // ------------------------------------------------------------ resources and warm states

  /** The effective resources: given values, else the host defaults, never below the image's minimums. */
  resources(img: SandboxImage, r: CreateArgs['resources'], arg = 'resources'): { cpu_cores: number; memory_mb: number; disk_gb: number; diskFloor: number } {
    const s = this.e.settings;
    const pick = (v: number | undefined, min: number, def: number, name: string): number => {
      if (v === undefined || v === 0) return Math.max(min, def);
      if (v < min) throw badRequest(`argument '${arg}.${name}' (${v}) is below the minimum of image '${img.image_id}' (${min})`);
      return v;
    };
    const cpu = pick(r?.cpu_cores, img.min_cpu_cores, s.defaultCpuCores, 'cpu_cores');
    const mem = pick(r?.memory_mb, img.min_memory_mb, s.defaultMemoryMb, 'memory_mb');
    if (cpu > 255) throw badRequest(`argument '${arg}.cpu_cores' must be at most 255`);
    if (mem < 64) throw badRequest(`argument '${arg}.memory_mb' must be at least 64`);
    const floor = Math.max(img.min_disk_gb, Math.ceil(img.virtual_size_bytes / GiB));
    const given = r?.disk_gb ?? 0;
    if (given !== 0 && given < floor)
      throw badRequest(`argument '${arg}.disk_gb' (${given}) is below the minimum of image '${img.image_id}' (${floor} GiB; disks cannot shrink)`);
    if (given > 65536) throw badRequest(`argument '${arg}.disk_gb' must be at most 65536`);
    return { cpu_cores: cpu, memory_mb: mem, disk_gb: Math.max(given || s.defaultDiskGb, floor), diskFloor: floor };
  }

  /**
   * The newest warm state of the image that fits the shape, or why there is
   * none. States the VM service will not resume (saved before VMs had a
   * generation ID device) do not count: such an image boots cold until a new
   * warm state is saved (keepWarm does that for images labelled for it).
   */
  async warmFor(rec: Pick<SandboxRecord, 'image_id' | 'cpu_cores' | 'memory_mb' | 'disk_gb'>): Promise<{ id: string | null; reason: string | null }> {
    const found = (await this.vms.warmStates({ ...O, image_id: rec.image_id })).filter((w) => !isForkState(w));
    const all = found.filter((w) => w.resumable);
    if (!all.length && found.length) {
      return {
        id: null,
        reason: `image '${rec.image_id}' has only warm states saved before VMs had a generation ID device (${found.map((w) => w.id).join(', ')}), which are not resumed (hostctl sandbox warm ${rec.image_id} saves a new one)`,
      };
    }
    if (!all.length) return { id: null, reason: `image '${rec.image_id}' has no warm state (hostctl sandbox warm ${rec.image_id})` };
    const fit = all
      .filter((w) => w.cpu_cores === rec.cpu_cores && w.memory_mb === rec.memory_mb && w.disk_size_gb >= rec.disk_gb)
      .sort((a, b) => b.created_at.localeCompare(a.created_at));
    if (!fit.length) {
      const shapes = all.map((w) => `${w.cpu_cores} CPU/${w.memory_mb} MiB/${w.disk_size_gb} GiB`).join(', ');
      return {
        id: null,
        reason: `no warm state of image '${rec.image_id}' has ${rec.cpu_cores} CPU, ${rec.memory_mb} MiB and at least ${rec.disk_gb} GiB of disk (there are: ${shapes})`,
      };
    }
    return { id: fit[0].id, reason: null };
  }

  // ------------------------------------------------------------ boot

  startBoot(id: string): void {
    if (this.closed || this.boots.has(id)) return;
    const ac = new AbortController();
    const done = this.boot(id, ac.signal)
      .catch((err) => this.e.log.error({ err, id }, 'sandboxes: boot failed unexpectedly'))
      .finally(() => this.boots.delete(id));
    this.boots.set(id, { ac, done });
  }

  /**
   * Takes a `booting` sandbox to running. VMs left by an earlier attempt
   * (hostd died during a boot) are adopted when their identity is already
   * theirs (a cold boot writes it to the disk before the first start; a
   * sandbox that ran before), else removed and the boot begins again.
   */
  async boot(id: string, signal: AbortSignal): Promise<void> {
    const rec = await this.update(id, (r) => {
      if (r.phase !== 'booting') return false;
      r.start.attempts += 1;
    });
    if (!rec || rec.phase !== 'booting') return;
    try {
      const adopted = await this.settleLeftovers(rec);
      if (adopted !== null) {
        await this.update(id, (r) => void (r.vmid = adopted));
        await this.coldStart(id, adopted, signal);
        return;
      }
      if (rec.fork) {
        // A fork resumes its parent's saved state or fails: a cold boot would not be the parent's copy.
        if (!rec.fork.warm_state_id) throw new Error(`hostd stopped before the memory and disk of sandbox '${rec.fork.parent}' were saved`);
        const r = await this.tryWarm(rec, rec.fork.warm_state_id, signal);
        if (r === true || signal.aborted) return;
        throw new Error(r);
      }
      let reason: string | null;
      const warm = await this.warmFor(rec);
      reason = warm.reason;
      if (warm.id) {
        const r = await this.tryWarm(rec, warm.id, signal);
        if (r === true || signal.aborted) return;
        reason = r;
      }
      await this.update(id, (r) => void (r.start = { ...r.start, method: 'cold', warm_state_id: null, reason }));
      const seed = await this.e.secrets.get(SEED_NS, id);
      const { vm } = await this.vms.create(
        {
          name: rec.name,
          image_id: rec.image_id,
          cpu_cores: rec.cpu_cores,
          memory_mb: rec.memory_mb,
          disk_size_gb: rec.disk_gb,
          linked_clone: true,
          autostart: rec.autostart,
          seed_data: seed ?? undefined,
        },
        noNotes,
        { ...O, labels: { [SANDBOX_LABEL]: id } },
      );
      await this.update(id, (r) => void (r.vmid = vm.vmid));
      await this.step('boot:cold-created');
      await this.coldStart(id, vm.vmid, signal);
    } catch (err) {
      if (signal.aborted) return;
      await this.fail(id, err);
    }
  }

  /** Removes VMs of an earlier attempt that cannot be adopted; the vmid of one that can, or null. */
  async settleLeftovers(rec: SandboxRecord): Promise<number | null> {
    const mine = (await this.vms.listOwned(O.owner)).filter((v) => v.labels[SANDBOX_LABEL] === rec.id);
    let keep: number | null = null;
    for (const v of mine) {
      const identityHeld = v.warm_state_id === null || rec.running_at !== null;
      if (keep === null && v.state !== 'creating' && identityHeld && (rec.vmid === null || rec.vmid === v.vmid)) keep = v.vmid;
      else await this.removeVm(v.vmid);
    }
    if (keep === null && rec.vmid !== null) await this.update(rec.id, (r) => void (r.vmid = null));
    return keep;
  }

  /** A resume from the warm state; true when running, else why not (the caller boots cold). */
  async tryWarm(rec: SandboxRecord, wsId: string, signal: AbortSignal): Promise<true | string> {
    await this.update(rec.id, (r) => void (r.start = { ...r.start, method: 'warm', warm_state_id: wsId, reason: null }));
    const seed = await this.e.secrets.get(SEED_NS, rec.id);
    await this.step('boot:warm');
    let out;
    const t0 = Date.now();
    try {
      out = await this.vms.restoreWarmState(
        wsId,
        { name: rec.name, seed_data: seed ?? undefined, labels: { [SANDBOX_LABEL]: rec.id }, autostart: rec.autostart },
        noNotes,
        O,
      );
    } catch (err) {
      return `resuming warm state ${wsId} failed (${message(err)})`;
    }
    const vmid = out.vm.vmid;
    await this.update(rec.id, (r) => void (r.vmid = vmid));
    await this.step('boot:warm-resumed');
    if (signal.aborted) return 'aborted';
    if (!out.identity.applied) {
      await this.removeVm(vmid);
      await this.update(rec.id, (r) => void (r.vmid = null));
      return `the VM resumed from warm state ${wsId} did not take the sandbox's identity (${out.identity.reason})`;
    }
    await this.markReady(rec.id, vmid, false);
    // Where a warm start's time goes (docs/sandboxes.md): admission to boot, the resume (clone, seed, QEMU
    // loading the memory), then the guest agent setting the sandbox's identity.
    const t1 = Date.now();
    this.e.log.info(
      {
        id: rec.id,
        vmid,
        warm_state_id: wsId,
        total_ms: t1 - Date.parse(rec.created_at),
        before_resume_ms: t0 - Date.parse(rec.created_at),
        resume_ms: out.resume_ms,
        identity_ms: t1 - t0 - out.resume_ms,
      },
      'sandboxes: warm start',
    );
    return true;
  }

  /** Starts the VM (idempotent) and waits, bounded, until its guest agent answers. */
  async coldStart(id: string, vmid: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    const rec = await this.records.get(id);
    const restart = rec?.running_at != null;
    await this.vms.start(vmid, noNotes, O);
    await this.step('boot:cold-started');
    const end = Date.now() + this.e.settings.bootTimeoutMs;
    for (;;) {
      if (signal.aborted) return;
      const w = await this.vms.waitReady(vmid, 2, O);
      if (w.ready) break;
      if (w.state === 'stopped') throw new Error('the guest powered off while booting');
      if (Date.now() > end) throw new Error(`the guest agent did not answer within ${this.e.settings.bootTimeoutMs / 1000} s (sandboxes.boot_timeout_seconds)`);
    }
    if (signal.aborted) return;
    await this.markReady(id, vmid, restart);
  }

  async markReady(id: string, vmid: number, restart: boolean): Promise<void> {
    let first: SandboxRecord['start'] | null = null;
    await this.update(id, (r) => {
      if (r.phase !== 'booting') return false;
      r.phase = 'ready';
      r.vmid = vmid;
      r.error = null;
      const t = Date.now();
      if (!restart) {
        r.start.ms = t - Date.parse(r.created_at);
        first = r.start;
      }
      r.running_at = new Date(t).toISOString();
    });
    const s = first as SandboxRecord['start'] | null;
    if (s?.method && s.ms !== null) this.heardStart(s.method, s.ms);
    await this.e.secrets.delete(SEED_NS, id).catch(() => undefined);
  }

  /** A first start is stored: its method and time to whoever watches (the metrics); a watcher's failure is not the start's. */
  private heardStart(method: 'warm' | 'cold', ms: number): void {
    try {
      this.e.onStarted?.(method, ms);
    } catch (err) {
      this.e.log.error({ err }, 'sandboxes: a start watcher failed');
    }
  }

  /**
   * A boot that cannot finish: the sandbox keeps no VM and says why. Its VMs
   * and seed go before it shows `failed`, so that nobody sees a failed
   * sandbox that still holds them (a crash meanwhile leaves it booting, and
   * recovery boots it again).
   */
  async fail(id: string, err: unknown): Promise<void> {
    this.e.log.warn({ id, err: message(err) }, 'sandboxes: boot failed');
    if ((await this.records.get(id))?.phase !== 'booting') return;
    for (const v of (await this.vms.listOwned(O.owner)).filter((x) => x.labels[SANDBOX_LABEL] === id)) await this.removeVm(v.vmid);
    await this.e.secrets.delete(SEED_NS, id).catch(() => undefined);
    const failed = await this.update(id, (r) => {
      if (r.phase !== 'booting') return false;
      r.phase = 'failed';
      r.error = `boot failed: ${message(err)}`;
      r.vmid = null;
    });
    await this.releaseForkState(failed?.fork?.warm_state_id);
  }

  /**
   * Deletes a fork's saved state once no live sandbox rests on it (`except`:
   * the one being destroyed). The VM service refuses while a VM still rests
   * on it or a resume of it runs; the last one to go deletes it, and
   * recovery at start catches any left.
   */
  async releaseForkState(wsId: string | null | undefined, except?: string): Promise<void> {
    if (!wsId) return;
    await this.lock.run([`forkws:${wsId}`], async () => {
      const users = (await this.records.all()).filter((r) => r.id !== except && r.fork?.warm_state_id === wsId && LIVE.has(r.phase));
      if (users.length) return;
      try {
        await this.vms.deleteWarmState(wsId, noNotes, O);
        this.e.log.info({ warm_state_id: wsId }, 'sandboxes: deleted the saved state of a fork no sandbox rests on');
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return;
        this.e.log.warn({ err: message(err), warm_state_id: wsId }, 'sandboxes: the saved state of a fork could not be deleted yet');
      }
    });
  }

  async removeVm(vmid: number): Promise<void> {
    try {
      await this.vms.remove(vmid, noNotes, O);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return;
      throw err;
    }
  }

  // ------------------------------------------------------------ lifecycle

  refuseUnready(rec: SandboxRecord, what: string): void {
    if (rec.phase === 'booting') throw conflict(`sandbox '${rec.id}' is booting: ${what} it once it runs (POST /sandboxes/${rec.id}/wait)`);
    if (rec.phase === 'destroying' || rec.phase === 'destroyed') throw conflict(`sandbox '${rec.id}' is ${rec.phase}`);
    if (rec.phase === 'failed') throw conflict(`sandbox '${rec.id}' failed to start (${rec.error}): destroy it`);
    if (rec.vmid === null) throw internal(`sandbox '${rec.id}' has no VM`);
  }

  /** Stops a boot, removes every VM of the sandbox and its seed; the tombstone to write. */
  async finishDestroy(i: { id: string; by: string; at: string }): Promise<SandboxRecord> {
    const boot = this.boots.get(i.id);
    if (boot) {
      boot.ac.abort();
      // A warm resume or a VM start cannot be cut short; they take seconds, not minutes.
      await Promise.race([boot.done, sleep(120_000)]);
    }
    const rec = (await this.records.get(i.id))!;
    const vmids = new Set((await this.vms.listOwned(O.owner)).filter((v) => v.labels[SANDBOX_LABEL] === i.id).map((v) => v.vmid));
    if (rec.vmid !== null) vmids.add(rec.vmid);
    for (const vmid of vmids) await this.removeVm(vmid);
    await this.releaseForkState(rec.fork?.warm_state_id, rec.id);
    await this.step('destroy:removed');
    await this.e.secrets.delete(SEED_NS, i.id).catch(() => undefined);
    return { ...rec, phase: 'destroyed', vmid: null, destroyed_at: i.at, destroyed_by: i.by, updated_at: now() };
  }
}
