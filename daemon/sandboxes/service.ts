/**
 * The sandbox service: disposable VMs owned by the token that created them,
 * started from a warm state where one fits (a resume on a linked clone, with
 * the sandbox's own identity set right after) and cold-booted otherwise.
 *
 * - Ownership is by token id: another token gets 404, never 403, and never
 *   sees the sandbox in a list (a forwarded call carries the same token id).
 * - A create answers at once with the sandbox `booting`; a background boot
 *   takes it to `running`. Admission (idempotency key, caps, capacity, name)
 *   is one short critical section per host, and the record and its
 *   idempotency key are written in one batch before any VM exists.
 * - The VM service is the truth about processes and files: a ready sandbox's
 *   state (running, suspended, stopped) is its VM's, so its suspend and resume
 *   are crash-safe through the VM service's own journal. Destroys go through
 *   this domain's intent journal; `recover()` finishes them, continues boots,
 *   and removes VMs no sandbox owns.
 *
 * Response shapes and decisions: docs/sandboxes.md.
 */
import crypto from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { GuestInfo } from '../domain.js';
import { ApiError, badRequest, conflict, internal, notFound, unavailable } from '../lib/errors.js';
import { KeyedLock } from '../lib/lock.js';
import { noNotes, type Caller, type NoteSink } from '../lib/caller.js';
import type { TaskHandle, TaskRecord, Tasks } from '../lib/tasks.js';
import type { SecretStore } from '../lib/secrets.js';
import type { PauseHook } from '../lib/test-pause.js';
import { OPERATOR } from '../lib/operator.js';
import type { ImageRecord } from '../vms/records.js';
import { O, SANDBOX_LABEL, WARM_BUILD_LABEL, type SandboxVms, type VmView } from './driver.js';
import { checkSandboxName, friendlyName } from './names.js';
import { SandboxRecords, idemHash, type Phase, type SandboxRecord } from './records.js';
import type { SandboxSettings } from './settings.js';

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
}

export type SandboxState = 'booting' | 'running' | 'paused' | 'suspended' | 'stopped' | 'destroying' | 'destroyed' | 'failed';

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

type Ctx = NoteSink & { caller: Caller };

const SEED_NS = 'sandboxes-seed';
const SEED_MAX = 64 * 1024;
const ID = /^sbx-[0-9a-f]{12}$/;
const GiB = 1024 ** 3;
const MAX_WAIT_MS = 2 ** 31 - 1;
const LIVE: ReadonlySet<Phase> = new Set(['booting', 'ready', 'destroying']);

const now = () => new Date().toISOString();
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Keeps 409s about the VM in the sandbox's words. */
function inSandboxTerms(err: unknown, rec: SandboxRecord): unknown {
  if (err instanceof ApiError && rec.vmid !== null) {
    return new ApiError(err.status, err.message.replace(new RegExp(`\\bVM ${rec.vmid}\\b`, 'g'), `sandbox '${rec.id}'`), err.headers);
  }
  return err;
}

export class SandboxService {
  readonly lock = new KeyedLock();
  private readonly changes = new EventEmitter();
  /** Boots under way in this process, by sandbox id. */
  private readonly boots = new Map<string, { ac: AbortController; done: Promise<void> }>();
  /** Image ids a warm state is being saved for (one at a time per image). */
  private readonly warming = new Set<string>();
  private readonly warmFailedAt = new Map<string, number>();
  private closed = false;

  constructor(readonly e: SandboxEnv) {
    this.changes.setMaxListeners(0);
  }

  private get vms(): SandboxVms {
    return this.e.vms;
  }

  private get records(): SandboxRecords {
    return this.e.records;
  }

  /** The crash tests' pause: with HOSTD_TEST_PAUSE_AT=sandboxes.<step> a change stops for good at that step. */
  private step(name: string): Promise<void> {
    return this.e.pause?.(name) ?? Promise.resolve();
  }

  // ------------------------------------------------------------ records and views

  /** The sandbox if the caller's token owns it; 404 otherwise (never 403: another token's sandbox does not exist for it). */
  private async owned(id: string, caller: Caller): Promise<SandboxRecord> {
    const r = ID.test(id) ? await this.records.get(id) : undefined;
    if (!r || r.token_id !== caller.tokenId) throw notFound(`sandbox '${id}' not found`);
    return r;
  }

  /** Read-modify-write of one record (serialised per sandbox); wakes its waiters. */
  private async update(id: string, fn: (r: SandboxRecord) => void | false): Promise<SandboxRecord | undefined> {
    const out = await this.lock.run([`rec:${id}`], async () => {
      const r = await this.records.get(id);
      if (!r) return undefined;
      if (fn(r) === false) return r;
      r.updated_at = now();
      await this.records.boxes.put(id, r);
      return r;
    });
    this.changes.emit(id);
    return out;
  }

  /** Resolves on the next change of the sandbox's record, or after `ms`. */
  private changed(id: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.changes.off(id, done);
        resolve();
      };
      const t = setTimeout(done, ms);
      this.changes.on(id, done);
    });
  }

  private async vmOf(rec: SandboxRecord): Promise<VmView | null> {
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
      id: rec.id, name: rec.name, state, image_id: rec.image_id,
      resources: { cpu_cores: rec.cpu_cores, memory_mb: rec.memory_mb, disk_gb: rec.disk_gb },
      labels: rec.labels, autostart: rec.autostart, owner: rec.token_name, start: rec.start, vmid: rec.vmid, error,
      created_at: rec.created_at, running_at: rec.running_at, updated_at: rec.updated_at, destroyed_at: rec.destroyed_at, destroyed_by: rec.destroyed_by,
    };
  }

  // ------------------------------------------------------------ resources and warm states

  /** The effective resources: given values, else the host defaults, never below the image's minimums. */
  private resources(img: ImageRecord, r: CreateArgs['resources'], arg = 'resources'): { cpu_cores: number; memory_mb: number; disk_gb: number; diskFloor: number } {
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
    if (given !== 0 && given < floor) throw badRequest(`argument '${arg}.disk_gb' (${given}) is below the minimum of image '${img.image_id}' (${floor} GiB; disks cannot shrink)`);
    if (given > 65536) throw badRequest(`argument '${arg}.disk_gb' must be at most 65536`);
    return { cpu_cores: cpu, memory_mb: mem, disk_gb: Math.max(given || s.defaultDiskGb, floor), diskFloor: floor };
  }

  /**
   * The newest warm state of the image that fits the shape, or why there is
   * none. States the VM service will not resume (saved before VMs had a
   * generation ID device) do not count: such an image boots cold until a new
   * warm state is saved (keepWarm does that for images labelled for it).
   */
  private async warmFor(rec: Pick<SandboxRecord, 'image_id' | 'cpu_cores' | 'memory_mb' | 'disk_gb'>): Promise<{ id: string | null; reason: string | null }> {
    const found = await this.vms.warmStates({ ...O, image_id: rec.image_id });
    const all = found.filter((w) => w.resumable);
    if (!all.length && found.length) {
      return { id: null, reason: `image '${rec.image_id}' has only warm states saved before VMs had a generation ID device (${found.map((w) => w.id).join(', ')}), which are not resumed (hostctl sandbox warm ${rec.image_id} saves a new one)` };
    }
    if (!all.length) return { id: null, reason: `image '${rec.image_id}' has no warm state (hostctl sandbox warm ${rec.image_id})` };
    const fit = all
      .filter((w) => w.cpu_cores === rec.cpu_cores && w.memory_mb === rec.memory_mb && w.disk_size_gb >= rec.disk_gb)
      .sort((a, b) => b.created_at.localeCompare(a.created_at));
    if (!fit.length) {
      const shapes = all.map((w) => `${w.cpu_cores} CPU/${w.memory_mb} MiB/${w.disk_size_gb} GiB`).join(', ');
      return { id: null, reason: `no warm state of image '${rec.image_id}' has ${rec.cpu_cores} CPU, ${rec.memory_mb} MiB and at least ${rec.disk_gb} GiB of disk (there are: ${shapes})` };
    }
    return { id: fit[0].id, reason: null };
  }

  // ------------------------------------------------------------ admission

  /** Memory the host has for another sandbox: 409 saying what is short. */
  private async checkCapacity(memoryMb: number, all: SandboxRecord[]): Promise<void> {
    const cap = await this.vms.capacity();
    const overhead = Math.max(0, cap.next_vm.memory_needed_mb - cap.next_vm.memory_mb);
    const reserve = this.e.settings.hostReserveMb;
    // A booting sandbox with a VM is counted by the VM service once its QEMU runs.
    const booting = all.filter((r) => r.phase === 'booting' && r.vmid === null);
    const bootingMb = booting.reduce((s, r) => s + r.memory_mb + overhead, 0);
    const need = memoryMb + overhead;
    const free = cap.host.memory_available_mb - reserve - bootingMb;
    if (need > free) {
      throw conflict(
        `the host cannot fit this sandbox now: it needs about ${need} MiB (${memoryMb} MiB of memory and ${overhead} MiB of QEMU overhead) and the host has ${Math.max(0, free)} MiB free` +
          ` after ${reserve} MiB kept for itself (sandboxes.host_reserve_mb)${bootingMb ? ` and ${bootingMb} MiB for sandboxes still booting` : ''}`,
      );
    }
    const committed = cap.running.memory_mb + booting.reduce((s, r) => s + r.memory_mb, 0);
    if (committed + memoryMb > cap.host.memory_mb - reserve) {
      throw conflict(`the host cannot fit this sandbox now: running and booting guests hold ${committed} MiB of its ${cap.host.memory_mb} MiB, and ${reserve} MiB are kept for the host (sandboxes.host_reserve_mb)`);
    }
  }

  /** POST /sandboxes: admission, then the boot in the background. */
  async create(a: CreateArgs, ctx: Ctx): Promise<{ sandbox: SandboxView; replayed: boolean }> {
    if (this.closed) throw unavailable('the sandboxes domain is shutting down');
    const caller = ctx.caller;
    if (!a.image_id) throw badRequest("argument 'image_id' must not be empty");
    const name = a.name === undefined ? null : checkSandboxName(a.name);
    if (a.seed_data !== undefined && Buffer.byteLength(a.seed_data) > SEED_MAX) throw badRequest(`argument 'seed_data' must be at most ${SEED_MAX} bytes`);
    const labels = a.labels ?? {};
    checkLabels(labels);
    const key = a.idempotency_key;
    if (key !== undefined && (key.length < 1 || key.length > 256)) throw badRequest("argument 'idempotency_key' must be 1-256 characters");
    await this.vms.requirePrograms('qemu-system-x86_64', 'qemu-img');
    return this.lock.run(['admit'], async () => {
      if (key !== undefined) {
        const prior = await this.records.byIdempotency(caller.tokenId, key);
        const rec = prior ? await this.records.get(prior) : undefined;
        if (rec && rec.token_id === caller.tokenId) {
          ctx.note({ summary: `Sandbox ${rec.id} '${rec.name}': create replayed (same idempotency key)`, target: `sandboxes/${rec.id}`, metadata: { id: rec.id, replayed: true } });
          return { sandbox: await this.view(rec), replayed: true };
        }
      }
      const img = await this.vms.image(a.image_id);
      const res = this.resources(img, a.resources);
      const all = await this.records.all();
      const live = all.filter((r) => LIVE.has(r.phase));
      const mine = live.filter((r) => r.token_id === caller.tokenId);
      const s = this.e.settings;
      if (mine.length >= s.maxPerToken) {
        throw conflict(`token '${caller.tokenName}' already has ${mine.length} live sandboxes, the per-token limit (sandboxes.max_per_token is ${s.maxPerToken}): destroy one first`);
      }
      await this.checkCapacity(res.memory_mb, all);
      const held = mine.reduce((sum, r) => sum + r.memory_mb, 0);
      if (held + res.memory_mb > s.maxMemoryMbPerToken) {
        throw conflict(
          `token '${caller.tokenName}' holds ${held} MiB in live sandboxes; ${res.memory_mb} MiB more would pass the per-token limit of ${s.maxMemoryMbPerToken} MiB (sandboxes.max_memory_mb_per_token): destroy one first`,
        );
      }
      const names = new Set(live.map((r) => r.name));
      if (name !== null && names.has(name)) throw conflict(`a sandbox named '${name}' already exists on this host`);
      const t = now();
      const rec: SandboxRecord = {
        id: `sbx-${crypto.randomBytes(6).toString('hex')}`, name: name ?? friendlyName((n) => names.has(n)),
        token_id: caller.tokenId, token_name: caller.tokenName, image_id: img.image_id,
        cpu_cores: res.cpu_cores, memory_mb: res.memory_mb, disk_gb: res.disk_gb, labels, autostart: a.autostart ?? false,
        phase: 'booting', vmid: null, start: { method: null, warm_state_id: null, reason: null, ms: null, attempts: 0 }, error: null,
        idempotency: key === undefined ? null : idemHash(key), created_at: t, running_at: null, updated_at: t, destroyed_at: null, destroyed_by: null,
      };
      // The seed waits encrypted until the boot hands it to the guest (never in the store or a log).
      if (a.seed_data !== undefined) await this.e.secrets.put(SEED_NS, rec.id, a.seed_data);
      await this.records.write([this.records.put(rec), ...(key === undefined ? [] : [this.records.putIdem(caller.tokenId, key, rec.id)])]);
      await this.step('create:recorded');
      ctx.note({
        summary: `Sandbox ${rec.id} '${rec.name}' created from '${img.image_id}' (${rec.cpu_cores} CPU, ${rec.memory_mb} MiB); booting`,
        target: `sandboxes/${rec.id}`,
        metadata: { id: rec.id, image_id: img.image_id, cpu_cores: rec.cpu_cores, memory_mb: rec.memory_mb, disk_gb: rec.disk_gb, labels, idempotency_key: key !== undefined },
      });
      this.startBoot(rec.id);
      return { sandbox: await this.view(rec), replayed: false };
    });
  }

  // ------------------------------------------------------------ boot

  private startBoot(id: string): void {
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
  private async boot(id: string, signal: AbortSignal): Promise<void> {
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
        { name: rec.name, image_id: rec.image_id, cpu_cores: rec.cpu_cores, memory_mb: rec.memory_mb, disk_size_gb: rec.disk_gb, linked_clone: true, autostart: rec.autostart, seed_data: seed ?? undefined },
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
  private async settleLeftovers(rec: SandboxRecord): Promise<number | null> {
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
  private async tryWarm(rec: SandboxRecord, wsId: string, signal: AbortSignal): Promise<true | string> {
    await this.update(rec.id, (r) => void (r.start = { ...r.start, method: 'warm', warm_state_id: wsId, reason: null }));
    const seed = await this.e.secrets.get(SEED_NS, rec.id);
    await this.step('boot:warm');
    let out;
    const t0 = Date.now();
    try {
      out = await this.vms.restoreWarmState(wsId, { name: rec.name, seed_data: seed ?? undefined, labels: { [SANDBOX_LABEL]: rec.id }, autostart: rec.autostart }, noNotes, O);
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
    this.e.log.info({ id: rec.id, vmid, warm_state_id: wsId, total_ms: t1 - Date.parse(rec.created_at), before_resume_ms: t0 - Date.parse(rec.created_at), resume_ms: out.resume_ms, identity_ms: t1 - t0 - out.resume_ms }, 'sandboxes: warm start');
    return true;
  }

  /** Starts the VM (idempotent) and waits, bounded, until its guest agent answers. */
  private async coldStart(id: string, vmid: number, signal: AbortSignal): Promise<void> {
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

  private async markReady(id: string, vmid: number, restart: boolean): Promise<void> {
    await this.update(id, (r) => {
      if (r.phase !== 'booting') return false;
      r.phase = 'ready';
      r.vmid = vmid;
      r.error = null;
      const t = Date.now();
      if (!restart) r.start.ms = t - Date.parse(r.created_at);
      r.running_at = new Date(t).toISOString();
    });
    await this.e.secrets.delete(SEED_NS, id).catch(() => undefined);
  }

  /**
   * A boot that cannot finish: the sandbox keeps no VM and says why. Its VMs
   * and seed go before it shows `failed`, so that nobody sees a failed
   * sandbox that still holds them (a crash meanwhile leaves it booting, and
   * recovery boots it again).
   */
  private async fail(id: string, err: unknown): Promise<void> {
    this.e.log.warn({ id, err: message(err) }, 'sandboxes: boot failed');
    if ((await this.records.get(id))?.phase !== 'booting') return;
    for (const v of (await this.vms.listOwned(O.owner)).filter((x) => x.labels[SANDBOX_LABEL] === id)) await this.removeVm(v.vmid);
    await this.e.secrets.delete(SEED_NS, id).catch(() => undefined);
    await this.update(id, (r) => {
      if (r.phase !== 'booting') return false;
      r.phase = 'failed';
      r.error = `boot failed: ${message(err)}`;
      r.vmid = null;
    });
  }

  private async removeVm(vmid: number): Promise<void> {
    try {
      await this.vms.remove(vmid, noNotes, O);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return;
      throw err;
    }
  }

  // ------------------------------------------------------------ reads

  async list(a: { labels?: Record<string, string>; include_destroyed?: boolean }, ctx: { caller: Caller }): Promise<{ sandboxes: SandboxView[] }> {
    const want = Object.entries(a.labels ?? {});
    const mine = (await this.records.all())
      .filter((r) => r.token_id === ctx.caller.tokenId)
      .filter((r) => a.include_destroyed || r.phase !== 'destroyed')
      .filter((r) => want.every(([k, v]) => Object.hasOwn(r.labels, k) && r.labels[k] === v))
      .sort((x, y) => x.created_at.localeCompare(y.created_at) || x.id.localeCompare(y.id));
    return { sandboxes: await Promise.all(mine.map((r) => this.view(r))) };
  }

  async get(id: string, ctx: { caller: Caller }): Promise<{ sandbox: SandboxView }> {
    return { sandbox: await this.view(await this.owned(id, ctx.caller)) };
  }

  /** POST /sandboxes/{id}/wait: until running, or the timeout; says which. Ends at once where running cannot come by itself. */
  async wait(id: string, timeoutSeconds: number | undefined, ctx: { caller: Caller }) {
    await this.owned(id, ctx.caller);
    const t0 = Date.now();
    const end = t0 + Math.min((timeoutSeconds ?? 120) * 1000, MAX_WAIT_MS);
    for (;;) {
      const rec = await this.records.get(id);
      const v = await this.view(rec!);
      const out = (running: boolean, timedOut: boolean, reason: string | null) => ({ sandbox: v, running, timed_out: timedOut, waited_ms: Date.now() - t0, reason });
      if (v.state === 'running') return out(true, false, null);
      const busy = this.lock.busy(`sbx:${id}`);
      if (v.state === 'destroyed') return out(false, false, 'the sandbox is destroyed');
      if (v.state === 'destroying') return out(false, false, 'the sandbox is being destroyed');
      if (v.state === 'failed') return out(false, false, `the sandbox did not start: ${v.error}`);
      if ((v.state === 'suspended' || v.state === 'stopped') && !busy) return out(false, false, `the sandbox is ${v.state}: resume it (POST /sandboxes/${id}/resume)`);
      const left = end - Date.now();
      if (left <= 0) return out(false, true, `the sandbox is still ${v.state}`);
      await this.changed(id, Math.min(left, 1000));
    }
  }

  /** GET /sandboxes/images: images and templates, each with its warm states and how a default create would start. */
  async images() {
    const imgs = (await this.vms.records.allImages()).sort((a, b) => a.image_id.localeCompare(b.image_id));
    const warm = await this.vms.warmStates(O);
    const out = [];
    for (const img of imgs) {
      const res = this.resources(img, null);
      const fit = await this.warmFor({ image_id: img.image_id, ...res });
      out.push({
        image_id: img.image_id, name: img.name, kind: img.kind, storage_id: img.storage_id, labels: img.labels,
        min_cpu_cores: img.min_cpu_cores, min_memory_mb: img.min_memory_mb, min_disk_gb: res.diskFloor,
        default_resources: { cpu_cores: res.cpu_cores, memory_mb: res.memory_mb, disk_gb: res.disk_gb },
        default_start: fit.id ? ('warm' as const) : ('cold' as const),
        warm_states: warm.filter((w) => w.image_id === img.image_id).map((w) => ({
          warm_state_id: w.id, cpu_cores: w.cpu_cores, memory_mb: w.memory_mb, disk_gb: w.disk_size_gb, created_at: w.created_at, resumable: w.resumable, reason: w.reason,
        })),
      });
    }
    const s = this.e.settings;
    return { images: out, defaults: { cpu_cores: s.defaultCpuCores, memory_mb: s.defaultMemoryMb, disk_gb: s.defaultDiskGb } };
  }

  // ------------------------------------------------------------ lifecycle

  private refuseUnready(rec: SandboxRecord, what: string): void {
    if (rec.phase === 'booting') throw conflict(`sandbox '${rec.id}' is booting: ${what} it once it runs (POST /sandboxes/${rec.id}/wait)`);
    if (rec.phase === 'destroying' || rec.phase === 'destroyed') throw conflict(`sandbox '${rec.id}' is ${rec.phase}`);
    if (rec.phase === 'failed') throw conflict(`sandbox '${rec.id}' failed to start (${rec.error}): destroy it`);
    if (rec.vmid === null) throw internal(`sandbox '${rec.id}' has no VM`);
  }

  /** POST /sandboxes/{id}/suspend (idempotent): the guest's memory to disk, the process ends. */
  async suspend(id: string, ctx: Ctx) {
    await this.owned(id, ctx.caller);
    return this.lock.exclusive([`sbx:${id}`], 'suspend', async () => {
      const rec = await this.owned(id, ctx.caller);
      this.refuseUnready(rec, 'suspend');
      const v = await this.view(rec);
      if (v.state === 'suspended') return { sandbox: v, already_suspended: true };
      if (v.state !== 'running' && v.state !== 'paused') throw conflict(`sandbox '${id}' is ${v.state}: only a running sandbox can be suspended`);
      let r;
      try {
        r = await this.vms.suspend(rec.vmid!, noNotes, O);
      } catch (err) {
        throw inSandboxTerms(err, rec);
      }
      this.changes.emit(id);
      ctx.note({ summary: `Sandbox ${id} '${rec.name}' suspended (${Math.round(r.saved_bytes / 1024 / 1024)} MiB of memory saved)`, target: `sandboxes/${id}`, metadata: { id, bytes: r.saved_bytes } });
      return { sandbox: await this.view(rec), already_suspended: r.already_suspended };
    }, (k) => `sandbox '${k.slice(4)}'`);
  }

  /**
   * POST /sandboxes/{id}/resume (idempotent): a suspended sandbox runs on from
   * its saved memory. A stopped one (a host reboot without autostart, or a
   * guest that powered off) boots again from its own disk.
   */
  async resume(id: string, ctx: Ctx) {
    await this.owned(id, ctx.caller);
    return this.lock.exclusive([`sbx:${id}`], 'resume', async () => {
      const rec = await this.owned(id, ctx.caller);
      this.refuseUnready(rec, 'resume');
      const v = await this.view(rec);
      if (v.state === 'running') return { sandbox: v, already_running: true };
      if (v.state === 'stopped') {
        await this.update(id, (r) => void (r.phase = 'booting'));
        this.startBoot(id);
        ctx.note({ summary: `Sandbox ${id} '${rec.name}' was stopped: booting it again`, target: `sandboxes/${id}`, metadata: { id, restart: true } });
        return { sandbox: await this.view((await this.records.get(id))!), already_running: false };
      }
      try {
        await this.vms.resume(rec.vmid!, noNotes, O);
      } catch (err) {
        throw inSandboxTerms(err, rec);
      }
      this.changes.emit(id);
      ctx.note({ summary: `Sandbox ${id} '${rec.name}' resumed`, target: `sandboxes/${id}`, metadata: { id } });
      return { sandbox: await this.view(rec), already_running: false };
    }, (k) => `sandbox '${k.slice(4)}'`);
  }

  /**
   * DELETE /sandboxes/{id} (idempotent): a boot under way is stopped, the VM
   * and its files go, the record stays as a tombstone (when, by whom).
   */
  async destroy(id: string, ctx: Ctx, opts: { anyOwner?: boolean } = {}) {
    const find = async () => {
      const r = opts.anyOwner && ID.test(id) ? await this.records.get(id) : undefined;
      if (opts.anyOwner && !r) throw notFound(`sandbox '${id}' not found`);
      return r ?? this.owned(id, ctx.caller);
    };
    await find();
    return this.lock.exclusive([`sbx:${id}`], 'delete', async () => {
      const rec = await find();
      if (rec.phase === 'destroyed') return { sandbox: await this.view(rec), already_destroyed: true };
      const key = SandboxRecords.intentKey(`destroy-${id}`);
      const intent = { op: 'destroy' as const, id, by: ctx.caller.tokenName, at: now() };
      await this.lock.run([`rec:${id}`], async () => {
        const r = (await this.records.get(id))!;
        r.phase = 'destroying';
        r.updated_at = now();
        await this.records.write([this.records.intentPut(key, intent), this.records.put(r)]);
      });
      this.changes.emit(id);
      await this.step('destroy:marked');
      const wasRunning = rec.phase === 'ready' && (await this.view(rec)).state === 'running';
      const tomb = await this.finishDestroy(intent);
      await this.records.journal.commit(key, [this.records.put(tomb)]);
      this.changes.emit(id);
      ctx.note({ summary: `Sandbox ${id} '${rec.name}' destroyed${wasRunning ? ' (it was running)' : ''}`, target: `sandboxes/${id}`, metadata: { id, vmid: rec.vmid } });
      return { sandbox: await this.view(tomb), already_destroyed: false };
    }, (k) => `sandbox '${k.slice(4)}'`);
  }

  /** Stops a boot, removes every VM of the sandbox and its seed; the tombstone to write. */
  private async finishDestroy(i: { id: string; by: string; at: string }): Promise<SandboxRecord> {
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
    await this.step('destroy:removed');
    await this.e.secrets.delete(SEED_NS, i.id).catch(() => undefined);
    return { ...rec, phase: 'destroyed', vmid: null, destroyed_at: i.at, destroyed_by: i.by, updated_at: now() };
  }

  // ------------------------------------------------------------ operator (admin socket)

  /** Every sandbox of every token (hostctl sandbox list). */
  async listAll(includeDestroyed: boolean) {
    const all = (await this.records.all()).filter((r) => includeDestroyed || r.phase !== 'destroyed');
    return { sandboxes: await Promise.all(all.map((r) => this.view(r))) };
  }

  /** A command in a running sandbox through its guest agent (hostctl sandbox exec). */
  async exec(id: string, command: string, timeoutSeconds: number | undefined) {
    const rec = ID.test(id) ? await this.records.get(id) : undefined;
    if (!rec) throw notFound(`sandbox '${id}' not found`);
    this.refuseUnready(rec, 'exec in');
    try {
      const { vmid: _v, ...r } = await this.vms.exec(rec.vmid!, command, timeoutSeconds, noNotes, O);
      void _v;
      return { id, ...r };
    } catch (err) {
      throw inSandboxTerms(err, rec);
    }
  }

  /**
   * Saves a warm state of `imageId` for sandboxes (a task): a build VM boots
   * cold from the image, settles (guest agent up, cloud-init done), and its
   * memory and disk are saved at one instant; the build VM is then removed.
   * Sandboxes of the same shape then start by resuming it.
   */
  async saveWarm(a: { image_id: string; cpu_cores?: number; memory_mb?: number; disk_gb?: number }, owner: string): Promise<{ task: TaskRecord }> {
    if (this.closed) throw unavailable('the sandboxes domain is shutting down');
    await this.vms.requirePrograms('qemu-system-x86_64', 'qemu-img', 'qemu-storage-daemon', 'debugfs', 'genisoimage');
    const img = await this.vms.image(a.image_id);
    const res = this.resources(img, a, 'resources');
    if (this.warming.has(img.image_id)) throw conflict(`a warm state of image '${img.image_id}' is being saved already`);
    this.warming.add(img.image_id);
    try {
      const task = this.e.tasks.start(
        { kind: 'sandboxes.warm-state.save', title: `Save a warm state of '${img.image_id}' for sandboxes (${res.cpu_cores} CPU, ${res.memory_mb} MiB)`, owner, resource: `sandboxes/images/${img.image_id}` },
        async (th) => {
          try {
            return await this.buildWarm(img, res, owner, th);
          } finally {
            this.warming.delete(img.image_id);
          }
        },
      );
      return { task };
    } catch (err) {
      this.warming.delete(img.image_id);
      throw err;
    }
  }

  private async buildWarm(img: ImageRecord, res: { cpu_cores: number; memory_mb: number; disk_gb: number }, owner: string, th: TaskHandle) {
    th.log(`creating a build VM from '${img.image_id}'`);
    const { vm } = await this.vms.create(
      { name: `warm-${img.image_id}`.slice(0, 63), image_id: img.image_id, cpu_cores: res.cpu_cores, memory_mb: res.memory_mb, disk_size_gb: res.disk_gb, linked_clone: true },
      noNotes,
      { ...O, labels: { [WARM_BUILD_LABEL]: img.image_id } },
    );
    try {
      await this.vms.start(vm.vmid, noNotes, O);
      th.log(`build VM ${vm.vmid} started; waiting for its guest agent`);
      th.progress(10);
      const t0 = Date.now();
      const end = t0 + this.e.settings.bootTimeoutMs;
      for (;;) {
        if (th.signal.aborted) throw new Error('cancelled');
        const w = await this.vms.waitReady(vm.vmid, 2, O);
        if (w.ready) break;
        if (w.state === 'stopped') throw new Error('the build VM powered off while booting');
        if (Date.now() > end) throw new Error(`the build VM's guest agent did not answer within ${this.e.settings.bootTimeoutMs / 1000} s`);
        th.progress(10 + Math.min(50, Math.floor(((Date.now() - t0) / this.e.settings.bootTimeoutMs) * 50)));
      }
      th.log(`guest agent answers after ${Math.round((Date.now() - t0) / 1000)} s; letting cloud-init finish`);
      th.progress(65);
      // A warm state of a settled guest: nothing of the first boot left to run in each sandbox.
      const settle = await this.vms.exec(vm.vmid, 'if command -v cloud-init >/dev/null 2>&1; then cloud-init status --wait >/dev/null 2>&1; fi; sync; true', Math.ceil(this.e.settings.bootTimeoutMs / 1000), noNotes, O);
      if (settle.timed_out) throw new Error('cloud-init did not finish in the build VM');
      if (th.signal.aborted) throw new Error('cancelled');
      th.log('saving memory and disk');
      th.progress(80);
      const saved = await this.vms.saveWarmState(vm.vmid, `sandbox ${img.image_id}`, { note() {}, caller: { tokenName: owner } }, { ...O, wait: true });
      th.log(`warm state ${saved.warm_state_id} saved`);
      th.progress(95);
      return { warm_state_id: saved.warm_state_id, image_id: img.image_id, cpu_cores: res.cpu_cores, memory_mb: res.memory_mb, disk_gb: saved.warm_state?.disk_size_gb ?? null };
    } finally {
      await this.removeVm(vm.vmid).catch((err) => this.e.log.error({ err, vmid: vm.vmid }, 'sandboxes: removing a warm build VM failed'));
    }
  }

  async warmStates() {
    return { warm_states: await this.vms.warmStates(O) };
  }

  async deleteWarm(id: string) {
    return this.vms.deleteWarmState(id, noNotes, O);
  }

  /**
   * Images labelled `<warm_label>: "true"` (e.g. by POST /templates) get a
   * warm state of the default shape when they have none; one save at a time,
   * a failed image retried after an hour.
   */
  async keepWarm(): Promise<string[]> {
    if (this.closed || this.warming.size) return [];
    const label = this.e.settings.warmLabel;
    for (const img of await this.vms.records.allImages()) {
      if (img.labels[label] !== 'true') continue;
      const res = this.resources(img, null);
      if ((await this.warmFor({ image_id: img.image_id, ...res })).id) continue;
      const failed = this.warmFailedAt.get(img.image_id);
      if (failed && Date.now() - failed < 3_600_000) continue;
      const { task } = await this.saveWarm({ image_id: img.image_id }, OPERATOR);
      void this.e.tasks.settled(task.task_id).then((t) => {
        if (t.state === 'failed') this.warmFailedAt.set(img.image_id, Date.now());
      });
      return [task.task_id];
    }
    return [];
  }

  // ------------------------------------------------------------ ports

  /** The guests port: live sandboxes (and a warm build VM) with what they hold. */
  async guests(): Promise<GuestInfo[]> {
    const out: GuestInfo[] = [];
    for (const r of await this.records.all()) {
      if (!LIVE.has(r.phase)) continue;
      const g = r.vmid !== null ? await this.vms.guestInfo(r.vmid).catch(() => null) : null;
      out.push({
        kind: 'sandbox', id: r.id, name: r.name, state: r.phase === 'ready' ? g?.state ?? 'failed' : r.phase, running: g?.running ?? false,
        cpu_cores: r.cpu_cores, memory_mb: r.memory_mb, addresses: g?.addresses ?? [],
      });
    }
    for (const v of await this.vms.listOwned(O.owner)) {
      if (v.labels[WARM_BUILD_LABEL] === undefined) continue;
      out.push({ kind: 'sandbox', id: `warm-build-${v.vmid}`, name: v.name, state: v.state, running: v.state === 'running' || v.state === 'paused', cpu_cores: v.cpu_cores, memory_mb: v.memory_mb, addresses: [] });
    }
    return out;
  }

  // ------------------------------------------------------------ start-up and shutdown

  /**
   * At open (after the VM domain's own recovery): finishes interrupted
   * destroys, continues interrupted boots, marks sandboxes whose VM vanished,
   * and removes VMs and seeds no sandbox owns. Returns what it did.
   */
  async recover(): Promise<{ destroys: number; boots: number; orphans: number; lost: number }> {
    const log = this.e.log;
    const destroys = await this.records.journal.recover(async (_key, i) => {
      log.warn({ intent: i }, 'sandboxes: finishing an interrupted destroy');
      if (!(await this.records.get(i.id))) return [];
      return [this.records.put(await this.finishDestroy(i))];
    });
    let boots = 0;
    let lost = 0;
    const all = await this.records.all();
    const byId = new Map(all.map((r) => [r.id, r]));
    for (const r of all) {
      if (r.phase === 'destroying') {
        // Not reachable (the phase and the intent are one batch); finish it all the same.
        await this.records.write([this.records.put(await this.finishDestroy({ id: r.id, by: r.token_name, at: now() }))]);
      } else if (r.phase === 'ready' && !(await this.vmOf(r))) {
        lost++;
        await this.update(r.id, (x) => {
          x.phase = 'failed';
          x.error = `its VM ${x.vmid} was gone when hostd started`;
          x.vmid = null;
        });
      }
    }
    let orphans = 0;
    for (const v of await this.vms.listOwned(O.owner)) {
      const sid = v.labels[SANDBOX_LABEL];
      const r = sid === undefined ? undefined : byId.get(sid);
      const keep = r !== undefined && (r.phase === 'booting' || (r.phase === 'ready' && r.vmid === v.vmid));
      if (keep) continue;
      log.warn({ vmid: v.vmid, sandbox: sid ?? null, build: v.labels[WARM_BUILD_LABEL] ?? null }, 'sandboxes: removing a VM no sandbox owns');
      orphans++;
      await this.removeVm(v.vmid).catch((err) => log.error({ err, vmid: v.vmid }, 'sandboxes: removing an orphan VM failed'));
    }
    for (const name of await this.e.secrets.list(SEED_NS)) {
      if (byId.get(name)?.phase !== 'booting') await this.e.secrets.delete(SEED_NS, name);
    }
    for (const r of await this.records.all()) {
      if (r.phase === 'booting') {
        boots++;
        this.startBoot(r.id);
      }
    }
    return { destroys, boots, orphans, lost };
  }

  /** Tombstones older than `tombstone_days` go, with their idempotency keys. */
  async prune(): Promise<number> {
    const cutoff = Date.now() - this.e.settings.tombstoneMs;
    const old = (await this.records.all()).filter((r) => r.phase === 'destroyed' && r.destroyed_at && Date.parse(r.destroyed_at) < cutoff);
    for (const r of old) await this.records.write([this.records.del(r.id), ...(r.idempotency ? [this.records.delIdem(r.token_id, r.idempotency)] : [])]);
    return old.length;
  }

  /** Boots under way stop (their VMs stay); the next start continues them. */
  async close(): Promise<void> {
    this.closed = true;
    const pending = [...this.boots.values()];
    for (const b of pending) b.ac.abort();
    await Promise.race([Promise.all(pending.map((b) => b.done)), sleep(10_000)]);
  }
}

function checkLabels(labels: Record<string, string>): void {
  const entries = Object.entries(labels);
  if (entries.length > 64) throw badRequest("argument 'labels' takes at most 64 pairs");
  for (const [k, v] of entries) {
    if (!k || k.length > 128) throw badRequest("argument 'labels' keys must be 1-128 characters");
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(k)) throw badRequest("argument 'labels' keys must not contain control characters");
    if (v.length > 1024) throw badRequest(`argument 'labels.${k}' must be at most 1024 characters`);
  }
}
