/** A VM's power states: start, stop (ACPI, then a hard stop; or force), suspend, resume, delete, PATCH of a stopped VM, and autostart after a host boot. */
import fs from 'node:fs/promises';
import path from 'node:path';
import { ApiError, badRequest, conflict, internal } from '../lib/errors.js';
import type { NoteSink } from '../lib/caller.js';
import { formatSize } from './sizes.js';
import { VmRecords } from './records.js';
import { belowMinimum, now } from './common.js';
import { actorOf } from '../lib/operator.js';
import type { OwnerOpts, VmContext, VmView } from './context.js';

export class VmLifecycle {
  constructor(private readonly c: VmContext) {}

  /** POST /vms/{id}/start (idempotent). Starting a suspended VM resumes it. */
  async start(vmid: number, ctx: NoteSink, o: OwnerOpts = {}): Promise<{ vm: VmView; already_running: boolean }> {
    const rec0 = await this.c.vm(vmid, o);
    if (rec0.state === 'suspended' && !(await this.c.driver.status(this.c.ref(vmid))).running) {
      const r = await this.resume(vmid, ctx, o);
      return { vm: r.vm, already_running: false };
    }
    return this.c.lock.exclusiveOn(
      () => this.c.vm(vmid, o),
      [`vm:${vmid}`],
      'start',
      async (rec) => {
        if (rec.state === 'creating') throw conflict(`VM ${vmid} is still being created (task ${rec.task_id})`);
        const st = await this.c.driver.status(this.c.ref(vmid));
        if (st.running) {
          if (st.status !== 'running' && st.status !== 'unknown' && st.status !== 'inmigrate')
            await this.c.driver.cont(this.c.ref(vmid)).catch(() => undefined);
          return { vm: await this.c.viewOf(rec), already_running: true };
        }
        await this.c.prepare(rec);
        await this.c.save(rec);
        await this.c.launch(rec);
        await this.c.save(rec);
        ctx.note({ summary: `VM ${vmid} '${rec.name}' started`, target: `vms/${vmid}`, metadata: { vmid } });
        return { vm: this.c.view(rec, 'running'), already_running: false };
      },
    );
  }

  /**
   * POST /vms/{id}/stop (idempotent): ACPI power-down, hard stop after
   * `timeoutSeconds` (default the setting vms.stop_grace_seconds); `force`
   * powers off at once without asking the guest. A suspended VM's saved memory is dropped.
   */
  async stop(
    vmid: number,
    ctx: NoteSink,
    o: OwnerOpts & { force?: boolean; timeoutSeconds?: number } = {},
  ): Promise<{ vm: VmView; stopped_by: 'acpi' | 'forced' | 'already-stopped' | 'discarded-suspend' }> {
    return this.c.lock.exclusiveOn(
      () => this.c.vm(vmid, o),
      [`vm:${vmid}`],
      'stop',
      async (rec) => {
        if (rec.state === 'creating') throw conflict(`VM ${vmid} is still being created (task ${rec.task_id})`);
        const grace = o.timeoutSeconds === undefined ? this.c.e.settings.stopGraceMs : o.timeoutSeconds * 1000;
        const how = o.force ? await this.powerOff(vmid) : await this.c.driver.stop(this.c.ref(vmid), grace);
        if (how === 'not-running') {
          if (rec.state === 'suspended') {
            const file = rec.resume_file;
            rec.state = 'stopped';
            rec.resume_file = null;
            rec.updated_at = now();
            await this.c.states.report(vmid, {
              actor: actorOf(ctx as { caller?: { tokenName: string } }),
              state: 'stopped',
              rec,
              ops: [this.c.records.putVm(rec)],
            });
            if (file) await fs.rm(file, { force: true });
            ctx.note({ summary: `VM ${vmid} '${rec.name}' stopped (its suspended memory was dropped)`, target: `vms/${vmid}`, metadata: { vmid } });
            return { vm: this.c.view(rec, 'stopped'), stopped_by: 'discarded-suspend' as const };
          }
          return { vm: this.c.view(rec, 'stopped'), stopped_by: 'already-stopped' as const };
        }
        await this.c.save(rec);
        const words =
          how === 'acpi' ? 'ACPI power-down' : o.force ? 'force: powered off at once' : `hard stop after ${grace / 1000} s without an ACPI power-down`;
        ctx.note({
          summary: `VM ${vmid} '${rec.name}' stopped (${words})`,
          target: `vms/${vmid}`,
          metadata: { vmid, stopped_by: how, force: o.force ?? false },
        });
        return { vm: this.c.view(rec, 'stopped'), stopped_by: how };
      },
    );
  }

  /** Power off now, as `qm stop` does: the guest is not asked. */
  private async powerOff(vmid: number): Promise<'forced' | 'not-running'> {
    if (!(await this.c.driver.status(this.c.ref(vmid))).running) return 'not-running';
    await this.c.driver.kill(this.c.ref(vmid));
    return 'forced';
  }

  /** POST /vms/{id}/suspend (idempotent): memory to `<dir>/suspend.state`, the process ends. */
  async suspend(vmid: number, ctx: NoteSink, o: OwnerOpts = {}): Promise<{ vm: VmView; already_suspended: boolean; saved_bytes: number }> {
    return this.c.lock.exclusiveOn(
      () => this.c.vm(vmid, o),
      [`vm:${vmid}`],
      'suspend',
      async (rec) => {
        const st = await this.c.driver.status(this.c.ref(vmid));
        if (!st.running) {
          if (rec.state === 'suspended') return { vm: this.c.view(rec, 'suspended'), already_suspended: true, saved_bytes: 0 };
          throw conflict(`VM ${vmid} is ${rec.state}: only a running VM can be suspended`);
        }
        const file = path.join(rec.dir, 'suspend.state');
        const part = `${file}.part`;
        const key = VmRecords.intentKey(`suspend-${vmid}`);
        await this.c.records.journal.begin(key, { op: 'suspend', vmid, file });
        let saved: { bytes: number };
        try {
          saved = await this.c.driver.saveMemory(this.c.ref(vmid), part);
          await this.c.step('suspend:saved');
          await this.c.driver.kill(this.c.ref(vmid));
          await fs.rename(part, file);
        } catch (err) {
          await fs.rm(part, { force: true });
          const now2 = await this.c.driver.status(this.c.ref(vmid));
          if (now2.running && now2.status !== 'running') await this.c.driver.cont(this.c.ref(vmid)).catch(() => undefined);
          await this.c.records.journal.drop(key);
          throw err instanceof ApiError ? err : internal(`suspending VM ${vmid} failed: ${(err as Error).message}`);
        }
        rec.state = 'suspended';
        rec.resume_file = file;
        rec.updated_at = now();
        await this.c.states.commit(key, [this.c.records.putVm(rec)], vmid, 'suspended', actorOf(ctx as { caller?: { tokenName: string } }), rec);
        ctx.note({
          summary: `VM ${vmid} '${rec.name}' suspended (${formatSize(saved.bytes)} of memory saved)`,
          target: `vms/${vmid}`,
          metadata: { vmid, bytes: saved.bytes },
        });
        return { vm: this.c.view(rec, 'suspended'), already_suspended: false, saved_bytes: saved.bytes };
      },
    );
  }

  /** POST /vms/{id}/resume: from the suspend file (idempotent for a running VM; 409 for a stopped one). */
  async resume(vmid: number, ctx: NoteSink, o: OwnerOpts = {}): Promise<{ vm: VmView; already_running: boolean }> {
    return this.c.lock.exclusiveOn(
      () => this.c.vm(vmid, o),
      [`vm:${vmid}`],
      'resume',
      async (rec) => {
        const st = await this.c.driver.status(this.c.ref(vmid));
        if (st.running) {
          if (st.status === 'paused') await this.c.driver.cont(this.c.ref(vmid));
          return { vm: await this.c.viewOf(rec), already_running: true };
        }
        if (rec.state !== 'suspended') throw conflict(`VM ${vmid} is ${rec.state}, not suspended: start it instead`);
        if (!rec.resume_file || !(await fs.stat(rec.resume_file).catch(() => null))) {
          throw conflict(`VM ${vmid} is suspended but its saved memory is gone: stop it to drop the suspend, then start it`);
        }
        const file = rec.resume_file;
        const key = VmRecords.intentKey(`resume-${vmid}`);
        await this.c.records.journal.begin(key, { op: 'resume', vmid, file });
        try {
          await this.c.launch(rec, file);
        } catch (err) {
          await this.c.records.journal.drop(key);
          throw err;
        }
        await this.c.step('resume:started');
        rec.state = 'stopped';
        rec.resume_file = null;
        rec.updated_at = now();
        await this.c.states.commit(key, [this.c.records.putVm(rec)], vmid, 'running', actorOf(ctx as { caller?: { tokenName: string } }), rec);
        await fs.rm(file, { force: true });
        void this.c.syncClock(vmid);
        ctx.note({ summary: `VM ${vmid} '${rec.name}' resumed`, target: `vms/${vmid}`, metadata: { vmid } });
        return { vm: this.c.view(rec, 'running'), already_running: false };
      },
    );
  }

  /** DELETE /vms/{id}: a running VM is hard-stopped first (no graceful shutdown), then its files go. */
  async remove(vmid: number, ctx: NoteSink, o: OwnerOpts = {}): Promise<{ deleted: VmView; was_running: boolean }> {
    return this.c.lock.exclusiveOn(
      () => this.c.vm(vmid, o),
      [`vm:${vmid}`],
      'delete',
      async (rec) => {
        if (rec.state === 'creating') throw conflict(`VM ${vmid} is still being created (task ${rec.task_id})`);
        const state = await this.c.state(rec);
        const key = VmRecords.intentKey(`delete-${vmid}`);
        await this.c.records.journal.begin(key, { op: 'delete', vmid, dir: rec.dir });
        await this.c.driver.kill(this.c.ref(vmid));
        await this.c.step('delete:stopped');
        await this.c.undoCreate(rec);
        await this.c.states.commit(
          key,
          [this.c.records.delVm(vmid), this.c.records.delDocs(vmid)],
          vmid,
          'deleted',
          actorOf(ctx as { caller?: { tokenName: string } }),
          rec,
        );
        this.c.addrCache.delete(vmid);
        ctx.note({
          summary: `VM ${vmid} '${rec.name}' deleted${state === 'running' || state === 'paused' ? ' (it was running: hard-stopped)' : ''}`,
          target: `vms/${vmid}`,
          metadata: { vmid },
        });
        return { deleted: this.c.view(rec, 'stopped'), was_running: state === 'running' || state === 'paused' };
      },
    );
  }

  /** PATCH /vms/{id}: CPU, memory, autostart of a stopped VM. */
  async update(
    vmid: number,
    a: { cpu_cores?: number | null; memory_mb?: number | null; autostart?: boolean | null },
    ctx: NoteSink,
    o: OwnerOpts = {},
  ): Promise<{ vm: VmView }> {
    return this.c.lock.exclusiveOn(
      () => this.c.vm(vmid, o),
      [`vm:${vmid}`],
      'update',
      async (rec) => {
        const state = await this.c.state(rec);
        if (state !== 'stopped') throw conflict(`VM ${vmid} is ${state}: stop it before changing CPU, memory or autostart`);
        const img = await this.c.records.image(rec.image_id);
        const changed: string[] = [];
        if (a.cpu_cores != null) {
          if (a.cpu_cores < 1) throw badRequest("argument 'cpu_cores' must be at least 1");
          if (img && a.cpu_cores < img.min_cpu_cores) throw badRequest(belowMinimum('cpu_cores', a.cpu_cores, img.image_id, String(img.min_cpu_cores)));
          rec.cpu_cores = a.cpu_cores;
          changed.push('cpu_cores');
        }
        if (a.memory_mb != null) {
          if (a.memory_mb < 64) throw badRequest("argument 'memory_mb' must be at least 64");
          if (img && a.memory_mb < img.min_memory_mb) throw badRequest(belowMinimum('memory_mb', a.memory_mb, img.image_id, String(img.min_memory_mb)));
          rec.memory_mb = a.memory_mb;
          changed.push('memory_mb');
        }
        await this.c.hostLimits(rec.cpu_cores, rec.memory_mb);
        if (a.autostart != null) {
          rec.autostart = a.autostart;
          changed.push('autostart');
        }
        await this.c.save(rec);
        ctx.note({
          summary: `VM ${vmid} '${rec.name}' updated${changed.length ? ': ' + changed.join(', ') : ' (no change)'}`,
          target: `vms/${vmid}`,
          metadata: { vmid, changed, cpu_cores: rec.cpu_cores, memory_mb: rec.memory_mb, autostart: rec.autostart },
        });
        return { vm: this.c.view(rec, 'stopped') };
      },
    );
  }

  /** At start: autostart VMs after a host boot (the boot id changed since hostd last ran). */
  async autostart(bootIdFile?: string): Promise<number[]> {
    const id = await this.c.driver.bootId(bootIdFile);
    const last = (await this.c.records.meta.get('boot_id')) as string | undefined;
    await this.c.records.meta.put('boot_id', id);
    if (last === undefined || last === id) return [];
    const started: number[] = [];
    for (const v of await this.c.records.allVms()) {
      if (!v.autostart || v.state === 'creating') continue;
      try {
        if (v.state === 'suspended') await this.resume(v.vmid, { note() {} }, { owner: v.owner });
        else await this.start(v.vmid, { note() {} }, { owner: v.owner });
        started.push(v.vmid);
      } catch (err) {
        this.c.e.log.error({ err, vmid: v.vmid }, 'autostart failed');
      }
      await this.c.states
        .report(v.vmid, { actor: 'runtime', reason: 'autostart' })
        .catch((err) => this.c.e.log.error({ err, vmid: v.vmid }, 'vms: reporting an autostart failed'));
    }
    return started;
  }
}
