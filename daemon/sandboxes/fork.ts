/**
 * POST /sandboxes/{id}/fork: copies of a running sandbox. The caller's caps
 * and the host's capacity are checked for all of them and their records
 * written (booting, in one batch with the idempotency key) before anything
 * is made; then the parent's memory and disk are saved once, as an internal
 * warm state (the parent pauses for the save and runs on), and each copy
 * resumes it in the background on a linked clone with its own name,
 * hostname, machine-id, SSH host keys and VM generation ID (the VM service's
 * warm restore). A copy that cannot resume fails with its reason; the others
 * go on. The saved state goes when no live sandbox rests on it
 * (context.releaseForkState; recovery at start for a crash in between).
 *
 * Copies resume through the host's one queue (fork-resumes.ts): at most
 * `sandboxes.fork_resume_concurrency` at once across all forks, and only
 * while the host runs fewer sandbox guests than `sandboxes.fork_max_guests`
 * when that is set; a later copy waits `booting` meanwhile.
 */
import crypto from 'node:crypto';
import { badRequest, conflict, unavailable } from '../lib/errors.js';
import { O } from './driver.js';
import { friendlyName } from './names.js';
import { idemHash, type SandboxRecord } from './records.js';
import type { SandboxAdmission } from './admission.js';
import type { ForkResumes } from './fork-resumes.js';
import { checkLabels, type Ctx, FORK_WS_PREFIX, inSandboxTerms, LIVE, message, now, type SandboxContext, type SandboxView } from './context.js';

export interface ForkArgs {
  count?: number;
  labels?: Record<string, string>;
  idempotency_key?: string;
}

/** The idempotency store's value for a fork: its sandboxes (a create's is one sandbox id). */
const FORK_IDEM = 'fork:';

export class SandboxFork {
  constructor(
    private readonly c: SandboxContext,
    private readonly admission: SandboxAdmission,
    private readonly resumes: ForkResumes,
  ) {}

  private async replay(ctx: Ctx, key: string | undefined): Promise<{ parent_id: string; sandboxes: SandboxView[]; replayed: true; save_ms: null } | null> {
    if (key === undefined) return null;
    const prior = await this.c.records.byIdempotency(ctx.caller.tokenId, key);
    if (prior === undefined) return null;
    if (!prior.startsWith(FORK_IDEM)) throw conflict('the idempotency key was used by a create, not a fork');
    const recs = (
      await Promise.all(
        prior
          .slice(FORK_IDEM.length)
          .split(',')
          .map((id) => this.c.records.get(id)),
      )
    ).filter((r): r is SandboxRecord => r !== undefined);
    if (!recs.length || recs.some((r) => r.token_id !== ctx.caller.tokenId)) return null;
    return { parent_id: recs[0].fork?.parent ?? '', sandboxes: await Promise.all(recs.map((r) => this.c.view(r))), replayed: true, save_ms: null };
  }

  async fork(id: string, a: ForkArgs, ctx: Ctx) {
    if (this.c.closed) throw unavailable('the sandboxes domain is shutting down');
    const count = a.count ?? 1;
    if (!Number.isInteger(count) || count < 1 || count > 16) throw badRequest("argument 'count' must be 1-16");
    checkLabels(a.labels ?? {});
    const key = a.idempotency_key;
    const early = await this.replay(ctx, key);
    if (early) return early;
    await this.c.runningFor(id, ctx.caller, 'fork');
    return this.c.lock.exclusive([`sbx:${id}`], 'fork', async () => {
      const parent = await this.c.runningFor(id, ctx.caller, 'fork');
      const labels = { ...parent.labels, ...(a.labels ?? {}) };
      checkLabels(labels);
      const admitted = await this.c.lock.run(['admit'], async () => {
        const again = await this.replay(ctx, key);
        if (again) return again;
        const all = await this.c.records.all();
        await this.admission.checkLimits(ctx.caller, parent.memory_mb, all, count);
        const names = new Set(all.filter((r) => LIVE.has(r.phase)).map((r) => r.name));
        const t = now();
        const recs: SandboxRecord[] = [];
        for (let i = 0; i < count; i++) {
          const name = friendlyName((n) => names.has(n));
          names.add(name);
          recs.push({
            id: `sbx-${crypto.randomBytes(6).toString('hex')}`,
            name,
            token_id: ctx.caller.tokenId,
            token_name: ctx.caller.tokenName,
            image_id: parent.image_id,
            cpu_cores: parent.cpu_cores,
            memory_mb: parent.memory_mb,
            disk_gb: parent.disk_gb,
            labels,
            autostart: false,
            phase: 'booting',
            vmid: null,
            start: { method: 'warm', warm_state_id: null, reason: null, ms: null, attempts: 0 },
            error: null,
            idempotency: key === undefined ? null : idemHash(key),
            created_at: t,
            running_at: null,
            updated_at: t,
            destroyed_at: null,
            destroyed_by: null,
            fork: { parent: id, warm_state_id: null },
          });
        }
        const idem = key === undefined ? [] : [this.c.records.putIdem(ctx.caller.tokenId, key, FORK_IDEM + recs.map((r) => r.id).join(','))];
        await this.c.records.write([...recs.map((r) => this.c.records.put(r)), ...idem]);
        return recs;
      });
      if (!Array.isArray(admitted)) return admitted;
      await this.c.step('fork:recorded');
      const t0 = Date.now();
      let wsId: string;
      try {
        const saved = await this.c.vms.saveWarmState(parent.vmid, `${FORK_WS_PREFIX}${id}`, { note() {}, caller: ctx.caller }, { ...O, wait: true });
        wsId = saved.warm_state_id;
      } catch (err) {
        // Nothing was made: the records and the key go (a crash before this line fails them at the next start).
        const idemDel = key === undefined ? [] : [this.c.records.delIdem(ctx.caller.tokenId, idemHash(key))];
        await this.c.records.write([...admitted.map((r) => this.c.records.del(r.id)), ...idemDel]);
        this.c.e.log.warn({ id, err: message(err) }, 'sandboxes: saving a fork parent failed');
        throw inSandboxTerms(err, parent);
      }
      const saveMs = Date.now() - t0;
      await this.c.step('fork:saved');
      const ready = admitted.map((r) => ({ ...r, fork: { parent: id, warm_state_id: wsId }, updated_at: now() }));
      await this.c.records.write(ready.map((r) => this.c.records.put(r)));
      this.resumes.add(ready.map((r) => r.id));
      ctx.note({
        summary: `Sandbox ${id} '${parent.name}' forked into ${ready.map((r) => `${r.id} '${r.name}'`).join(', ')} (saved in ${saveMs} ms)`,
        target: `sandboxes/${id}`,
        metadata: { id, forks: ready.map((r) => r.id), warm_state_id: wsId, save_ms: saveMs, idempotency_key: key !== undefined },
      });
      return { parent_id: id, sandboxes: await Promise.all(ready.map((r) => this.c.view(r))), replayed: false, save_ms: saveMs };
    });
  }
}
