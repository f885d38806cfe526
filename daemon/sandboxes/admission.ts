/** POST /sandboxes: admission (idempotency key, per-token caps, host capacity, name) in one short critical section, then the boot in the background. */
import crypto from 'node:crypto';
import { badRequest, conflict, unavailable } from '../lib/errors.js';
import { checkSandboxName, friendlyName } from './names.js';
import { idemHash, type SandboxRecord } from './records.js';
import { checkLabels, type CreateArgs, type Ctx, LIVE, now, type SandboxContext, type SandboxView, SEED_MAX, SEED_NS } from './context.js';

export class SandboxAdmission {
  constructor(private readonly c: SandboxContext) {}

  // ------------------------------------------------------------ admission

  /** Memory the host has for `n` more sandboxes of `memoryMb` each: 409 saying what is short. */
  async checkCapacity(memoryMb: number, all: SandboxRecord[], n = 1): Promise<void> {
    const cap = await this.c.vms.capacity();
    const overhead = Math.max(0, cap.next_vm.memory_needed_mb - cap.next_vm.memory_mb);
    const reserve = this.c.e.settings.hostReserveMb;
    // A booting sandbox with a VM is counted by the VM service once its QEMU runs.
    const booting = all.filter((r) => r.phase === 'booting' && r.vmid === null);
    const bootingMb = booting.reduce((s, r) => s + r.memory_mb + overhead, 0);
    const need = n * (memoryMb + overhead);
    const what = n === 1 ? 'this sandbox' : `these ${n} sandboxes`;
    const free = cap.host.memory_available_mb - reserve - bootingMb;
    if (need > free) {
      throw conflict(
        `the host cannot fit ${what} now: ${n === 1 ? 'it needs' : 'they need'} about ${need} MiB (${n === 1 ? '' : `${n} × `}${memoryMb} MiB of memory and ${overhead} MiB of QEMU overhead) and the host has ${Math.max(0, free)} MiB free` +
          ` after ${reserve} MiB kept for itself (sandboxes.host_reserve_mb)${bootingMb ? ` and ${bootingMb} MiB for sandboxes still booting` : ''}`,
      );
    }
    const committed = cap.running.memory_mb + booting.reduce((s, r) => s + r.memory_mb, 0);
    if (committed + n * memoryMb > cap.host.memory_mb - reserve) {
      throw conflict(
        `the host cannot fit ${what} now: running and booting guests hold ${committed} MiB of its ${cap.host.memory_mb} MiB, and ${reserve} MiB are kept for the host (sandboxes.host_reserve_mb)`,
      );
    }
  }

  /**
   * The caller's caps and the host's capacity for `n` more sandboxes of
   * `memoryMb` each (409 saying which); inside the admission lock.
   */
  async checkLimits(caller: Ctx['caller'], memoryMb: number, all: SandboxRecord[], n = 1): Promise<void> {
    const mine = all.filter((r) => LIVE.has(r.phase) && r.token_id === caller.tokenId);
    const s = this.c.e.settings;
    if (mine.length + n > s.maxPerToken) {
      if (n === 1)
        throw conflict(
          `token '${caller.tokenName}' already has ${mine.length} live sandboxes, the per-token limit (sandboxes.max_per_token is ${s.maxPerToken}): destroy one first`,
        );
      throw conflict(
        `token '${caller.tokenName}' has ${mine.length} live sandboxes; ${n} more would pass the per-token limit (sandboxes.max_per_token is ${s.maxPerToken}): destroy some first`,
      );
    }
    await this.checkCapacity(memoryMb, all, n);
    const held = mine.reduce((sum, r) => sum + r.memory_mb, 0);
    if (held + n * memoryMb > s.maxMemoryMbPerToken) {
      throw conflict(
        `token '${caller.tokenName}' holds ${held} MiB in live sandboxes; ${n * memoryMb} MiB more would pass the per-token limit of ${s.maxMemoryMbPerToken} MiB (sandboxes.max_memory_mb_per_token): destroy one first`,
      );
    }
  }

  /** POST /sandboxes: admission, then the boot in the background. */
  async create(a: CreateArgs, ctx: Ctx): Promise<{ sandbox: SandboxView; replayed: boolean }> {
    if (this.c.closed) throw unavailable('the sandboxes domain is shutting down');
    const caller = ctx.caller;
    if (!a.image_id) throw badRequest("argument 'image_id' must not be empty");
    const name = a.name === undefined ? null : checkSandboxName(a.name);
    if (a.seed_data !== undefined && Buffer.byteLength(a.seed_data) > SEED_MAX) throw badRequest(`argument 'seed_data' must be at most ${SEED_MAX} bytes`);
    const labels = a.labels ?? {};
    checkLabels(labels);
    const key = a.idempotency_key;
    if (key !== undefined && (key.length < 1 || key.length > 256)) throw badRequest("argument 'idempotency_key' must be 1-256 characters");
    await this.c.vms.requirePrograms('qemu-system-x86_64', 'qemu-img');
    return this.c.lock.run(['admit'], async () => {
      if (key !== undefined) {
        const prior = await this.c.records.byIdempotency(caller.tokenId, key);
        if (prior?.startsWith('fork:')) throw conflict('the idempotency key was used by a fork, not a create');
        const rec = prior ? await this.c.records.get(prior) : undefined;
        if (rec && rec.token_id === caller.tokenId) {
          ctx.note({
            summary: `Sandbox ${rec.id} '${rec.name}': create replayed (same idempotency key)`,
            target: `sandboxes/${rec.id}`,
            metadata: { id: rec.id, replayed: true },
          });
          return { sandbox: await this.c.view(rec), replayed: true };
        }
      }
      const img = await this.c.vms.image(a.image_id);
      const res = this.c.resources(img, a.resources);
      const all = await this.c.records.all();
      const live = all.filter((r) => LIVE.has(r.phase));
      await this.checkLimits(caller, res.memory_mb, all);
      const names = new Set(live.map((r) => r.name));
      if (name !== null && names.has(name)) throw conflict(`a sandbox named '${name}' already exists on this host`);
      const t = now();
      const rec: SandboxRecord = {
        id: `sbx-${crypto.randomBytes(6).toString('hex')}`,
        name: name ?? friendlyName((n) => names.has(n)),
        token_id: caller.tokenId,
        token_name: caller.tokenName,
        image_id: img.image_id,
        cpu_cores: res.cpu_cores,
        memory_mb: res.memory_mb,
        disk_gb: res.disk_gb,
        labels,
        autostart: a.autostart ?? false,
        phase: 'booting',
        vmid: null,
        start: { method: null, warm_state_id: null, reason: null, ms: null, attempts: 0 },
        error: null,
        idempotency: key === undefined ? null : idemHash(key),
        created_at: t,
        running_at: null,
        updated_at: t,
        destroyed_at: null,
        destroyed_by: null,
      };
      // The seed waits encrypted until the boot hands it to the guest (never in the store or a log).
      if (a.seed_data !== undefined) await this.c.e.secrets.put(SEED_NS, rec.id, a.seed_data);
      await this.c.states.report(rec.id, {
        rec,
        ops: [this.c.records.put(rec), ...(key === undefined ? [] : [this.c.records.putIdem(caller.tokenId, key, rec.id)])],
        actor: caller.tokenName,
      });
      await this.c.step('create:recorded');
      ctx.note({
        summary: `Sandbox ${rec.id} '${rec.name}' created from '${img.image_id}' (${rec.cpu_cores} CPU, ${rec.memory_mb} MiB); booting`,
        target: `sandboxes/${rec.id}`,
        metadata: {
          id: rec.id,
          image_id: img.image_id,
          cpu_cores: rec.cpu_cores,
          memory_mb: rec.memory_mb,
          disk_gb: rec.disk_gb,
          labels,
          idempotency_key: key !== undefined,
        },
      });
      this.c.startBoot(rec.id);
      return { sandbox: await this.c.view(rec), replayed: false };
    });
  }
}
