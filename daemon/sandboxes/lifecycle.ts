/** A sandbox's life after its boot: suspend, resume (a stopped one boots again), destroy (a tombstone stays). */
import { conflict, notFound } from '../lib/errors.js';
import { noNotes } from '../lib/caller.js';
import { O } from './driver.js';
import { SandboxRecords } from './records.js';
import { type Ctx, ID, inSandboxTerms, now, type SandboxContext } from './context.js';

export class SandboxLifecycle {
  constructor(private readonly c: SandboxContext) {}

  /** POST /sandboxes/{id}/suspend (idempotent): the guest's memory to disk, the process ends. */
  async suspend(id: string, ctx: Ctx) {
    return this.c.lock.exclusiveOn(
      () => this.c.owned(id, ctx.caller),
      [`sbx:${id}`],
      'suspend',
      async (rec) => {
        this.c.refuseUnready(rec, 'suspend');
        const v = await this.c.view(rec);
        if (v.state === 'suspended') return { sandbox: v, already_suspended: true };
        if (v.state !== 'running' && v.state !== 'paused') throw conflict(`sandbox '${id}' is ${v.state}: only a running sandbox can be suspended`);
        let r;
        try {
          r = await this.c.vms.suspend(rec.vmid!, noNotes, O);
        } catch (err) {
          throw inSandboxTerms(err, rec);
        }
        await this.c.states.report(id, { actor: ctx.caller.tokenName, state: 'suspended' });
        ctx.note({
          summary: `Sandbox ${id} '${rec.name}' suspended (${Math.round(r.saved_bytes / 1024 / 1024)} MiB of memory saved)`,
          target: `sandboxes/${id}`,
          metadata: { id, bytes: r.saved_bytes },
        });
        return { sandbox: await this.c.view(rec), already_suspended: r.already_suspended };
      },
    );
  }

  /**
   * POST /sandboxes/{id}/resume (idempotent): a suspended sandbox runs on from
   * its saved memory. A stopped one (a host reboot without autostart, or a
   * guest that powered off) boots again from its own disk.
   */
  async resume(id: string, ctx: Ctx) {
    return this.c.lock.exclusiveOn(
      () => this.c.owned(id, ctx.caller),
      [`sbx:${id}`],
      'resume',
      async (rec) => {
        this.c.refuseUnready(rec, 'resume');
        const v = await this.c.view(rec);
        if (v.state === 'running') return { sandbox: v, already_running: true };
        if (v.state === 'stopped') {
          await this.c.update(id, (r) => void (r.phase = 'booting'));
          this.c.startBoot(id);
          ctx.note({ summary: `Sandbox ${id} '${rec.name}' was stopped: booting it again`, target: `sandboxes/${id}`, metadata: { id, restart: true } });
          return { sandbox: await this.c.view((await this.c.records.get(id))!), already_running: false };
        }
        try {
          await this.c.vms.resume(rec.vmid!, noNotes, O);
        } catch (err) {
          throw inSandboxTerms(err, rec);
        }
        await this.c.states.report(id, { actor: ctx.caller.tokenName, state: 'running' });
        ctx.note({ summary: `Sandbox ${id} '${rec.name}' resumed`, target: `sandboxes/${id}`, metadata: { id } });
        return { sandbox: await this.c.view(rec), already_running: false };
      },
    );
  }

  /**
   * DELETE /sandboxes/{id} (idempotent): a boot under way is stopped, the VM
   * and its files go, the record stays as a tombstone (when, by whom).
   */
  async destroy(id: string, ctx: Ctx, opts: { anyOwner?: boolean } = {}) {
    const find = async () => {
      const r = opts.anyOwner && ID.test(id) ? await this.c.records.get(id) : undefined;
      if (opts.anyOwner && !r) throw notFound(`sandbox '${id}' not found`);
      return r ?? this.c.owned(id, ctx.caller);
    };
    return this.c.lock.exclusiveOn(find, [`sbx:${id}`], 'delete', async (rec) => {
      if (rec.phase === 'destroyed') return { sandbox: await this.c.view(rec), already_destroyed: true };
      const key = SandboxRecords.intentKey(`destroy-${id}`);
      const intent = { op: 'destroy' as const, id, by: ctx.caller.tokenName, at: now() };
      await this.c.lock.run([`rec:${id}`], async () => {
        const r = (await this.c.records.get(id))!;
        r.phase = 'destroying';
        r.updated_at = now();
        await this.c.states.report(id, { rec: r, ops: [this.c.records.intentPut(key, intent), this.c.records.put(r)], actor: ctx.caller.tokenName });
      });
      await this.c.step('destroy:marked');
      const wasRunning = rec.phase === 'ready' && (await this.c.view(rec)).state === 'running';
      const tomb = await this.c.finishDestroy(intent);
      await this.c.states.report(id, {
        rec: tomb,
        ops: [this.c.records.put(tomb), { type: 'del', sub: this.c.records.intents, key }],
        actor: ctx.caller.tokenName,
      });
      this.c.changes.emit(id);
      ctx.note({
        summary: `Sandbox ${id} '${rec.name}' destroyed${wasRunning ? ' (it was running)' : ''}`,
        target: `sandboxes/${id}`,
        metadata: { id, vmid: rec.vmid },
      });
      return { sandbox: await this.c.view(tomb), already_destroyed: false };
    });
  }
}
