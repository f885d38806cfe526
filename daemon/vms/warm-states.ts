/** Warm states: a running VM's memory and root disk saved at one instant, and new VMs resumed from them with their own identity. */
import fs from 'node:fs/promises';
import path from 'node:path';
import { badRequest, conflict, internal } from '../lib/errors.js';
import type { NoteSink } from '../lib/caller.js';
import { actorOf, OPERATOR } from '../lib/operator.js';
import type { TaskHandle, TaskRecord } from '../lib/tasks.js';
import { formatSize } from './sizes.js';
import { VmRecords, vmKey, WARM_FORMAT, type VmRecord, type WarmStateRecord } from './records.js';
import { hostnameOf, newUuid, now, randomHex, sleep, vmDir, warmDir } from './common.js';
import type { MachineRef } from './driver.js';
import { agentFailure, type OwnerOpts, SEED_MAX, type VmContext, warmRefusal } from './context.js';

/** How often the identity shell's status is asked (each ask is one agent round trip). */
const IDENTITY_POLL_MS = 20;

const q = (v: string) => `'${v.replace(/'/g, `'\\''`)}'`;

/** `ms` milliseconds as seconds with three decimals and a sign (`+12.345`, `-0.500`), exactly. */
function signedSeconds(ms: number): string {
  const a = Math.abs(Math.round(ms));
  return `${ms < 0 ? '-' : '+'}${Math.floor(a / 1000)}.${String(a % 1000).padStart(3, '0')}`;
}

/**
 * The one guest shell that gives a VM resumed from a warm state its own
 * identity. Under TCG every agent round trip and every program started in
 * a just-resumed guest costs tens to hundreds of milliseconds (its code is
 * translated anew), so it starts as few as it can:
 *
 * - the clock by `date -s` (settimeofday), the resumed guest's being as old
 *   as the save. Not the agent's `guest-set-time`: it also runs `hwclock
 *   -w`, which waits for the RTC's next second (0.7 to 4.9 s of a warm
 *   create measured here); the RTC needs no write, QEMU's follows the host.
 *   With `clockOffsetMs` (host minus guest clock, measured through the
 *   agent) the shift is relative (`date -s '+N seconds'`, GNU), so that the
 *   time it takes the shell to start does not make the clock late; else,
 *   and where `date` takes no relative time (busybox), the host's time when
 *   the script was made. `LC_ALL=C`: no locale files to load.
 * - the hostname by writing /proc/sys/kernel/hostname (a builtin, not the
 *   `hostname` program), /etc/hostname and /etc/machine-id by printf;
 * - the seed, from stdin, into a file only root can read (`cat`: any bytes);
 * - the saved guest's SSH host private keys emptied by redirections (no
 *   program), then new keys made in the background at the lowest CPU
 *   priority (seconds of guest CPU; the agent and the guest's first commands
 *   come first), sshd restarted after.
 *
 * `machineId` null: the saved guest's machine-id and SSH host keys stay (`skip_rekey`).
 */
export function identityScript(p: { hostname: string; machineId: string | null; seed: boolean; nowMs: number; clockOffsetMs: number | null }): string {
  const abs = `@${signedSeconds(p.nowMs).slice(1)}`;
  const setClock = [`LC_ALL=C date -u -s ${abs} >/dev/null 2>&1`, `date -u -s @${Math.floor(p.nowMs / 1000)} >/dev/null 2>&1`, 'true'];
  if (p.clockOffsetMs !== null) setClock.unshift(`LC_ALL=C date -u -s '${signedSeconds(p.clockOffsetMs)} seconds' >/dev/null 2>&1`);
  const steps = [
    'set -e',
    // A guest that cannot set its clock still gets its identity.
    setClock.join(' || '),
    `printf '%s' ${q(p.hostname)} > /proc/sys/kernel/hostname`,
    `printf '%s\\n' ${q(p.hostname)} > /etc/hostname`,
  ];
  if (p.machineId !== null) steps.push(`printf '%s\\n' ${p.machineId} > /etc/machine-id`);
  if (p.seed) {
    steps.push('[ -d /etc/svc ] || mkdir -p /etc/svc', '( umask 077; [ ! -e /etc/svc/seed ] || chmod 600 /etc/svc/seed; exec cat > /etc/svc/seed )');
  }
  if (p.machineId !== null) {
    steps.push(
      // The saved guest's host keys are emptied here (sshd cannot load them), so that no copy serves
      // them after its identity step, while the new ones are still being made.
      'for k in /etc/ssh/ssh_host_*_key; do [ -L "$k" ] || [ ! -f "$k" ] || : > "$k"; done',
      "n=; if command -v nice >/dev/null 2>&1; then n='nice -n 19'; fi",
      `$n sh -c 'rm -f /etc/ssh/ssh_host_*_key /etc/ssh/ssh_host_*_key.pub; ssh-keygen -A; systemctl try-restart ssh' >/dev/null 2>&1 </dev/null &`,
    );
  }
  return steps.join('\n');
}

/** Waits in the guest until its first boot is over (settle()): systemd's start-up jobs, then cloud-init; cheap when it is. */
const SETTLE_SCRIPT = [
  // One D-Bus call once the boot is over; waits while start-up jobs still run (hostd's SSH host key unit among them).
  'if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then systemctl is-system-running --wait >/dev/null 2>&1; fi',
  'if [ -e /run/cloud-init/result.json ] || [ -e /etc/cloud/cloud-init.disabled ] || [ -e /run/cloud-init/disabled ]; then exit 0; fi',
  'if command -v cloud-init >/dev/null 2>&1; then cloud-init status --wait >/dev/null 2>&1; fi',
  'true',
].join('; ');

export class VmWarmStates {
  constructor(private readonly c: VmContext) {}

  /** Warm states (of `owner`), each with the VMs resting on it; `image_id` narrows to one image. */
  async warmStates(f: OwnerOpts & { image_id?: string } = {}) {
    const vms = await this.c.records.allVms();
    return (await this.c.records.allWarm())
      .filter((w) => (w.owner ?? null) === (f.owner ?? null) && (!f.image_id || w.image_id === f.image_id))
      .map((w) =>
        this.c.warmView(
          w,
          vms.filter((v) => v.base_warm_state_id === w.id).map((v) => v.vmid),
        ),
      );
  }

  /**
   * POST /vms/{id}/warm-states: memory and the root disk at the same instant;
   * the VM keeps running. A task; `wait` (service callers) resolves when saved.
   */
  async saveWarmState(
    vmid: number,
    name: string | undefined,
    ctx: NoteSink & { caller?: { tokenName: string } },
    o: OwnerOpts & { wait?: boolean } = {},
  ): Promise<{ task: TaskRecord; warm_state_id: string; warm_state?: ReturnType<VmContext['warmView']> }> {
    const rec0 = await this.c.vm(vmid, o);
    const wsName = name ?? rec0.name;
    const release = this.c.lock.hold([`vm:${vmid}`], 'warm-state save');
    let started = false;
    try {
      const rec = await this.c.vm(vmid, o);
      const state = await this.c.state(rec);
      if (state !== 'running') throw conflict(`VM ${vmid} is ${state}: only a running VM can be saved as a warm state`);
      if (rec.disks.length)
        throw conflict(`VM ${vmid} has additional disks (${rec.disks.map((d) => d.disk_id).join(', ')}): warm states cover VMs with only a root disk`);
      // QEMU's answer, not the record's: the machine that runs is what the memory will need.
      const generationId = await this.c.driver.generationId(this.c.ref(vmid));
      if (generationId === null) {
        throw conflict(
          `VM ${vmid} runs on a machine without a VM generation ID device (started before hostd added one): VMs resumed from its warm state could not be told to renew their randomness; stop and start it, then save the warm state`,
        );
      }
      const id = `ws-${randomHex(6)}`;
      const pool = this.c.pool(rec.storage_id);
      const dir = warmDir(pool, id);
      const newLayer = `root.${randomHex(4)}.qcow2`;
      const w: WarmStateRecord = {
        id,
        name: wsName,
        vmid,
        owner: rec.owner,
        image_id: rec.image_id,
        storage_id: pool.id,
        dir,
        memory_file: path.join(dir, 'memory.state'),
        disk_file: path.join(dir, 'disk.qcow2'),
        base_image_id: rec.base_image_id,
        base_warm_state_id: rec.base_warm_state_id,
        cpu_cores: rec.cpu_cores,
        memory_mb: rec.memory_mb,
        disk_size_gb: rec.disk_size_gb,
        network_type: rec.cloud_init.network_type,
        cloud_init: { ...rec.cloud_init },
        size_bytes: 0,
        created_at: now(),
        format: WARM_FORMAT,
        vmgenid: generationId,
      };
      const task = this.c.e.tasks.start(
        { kind: 'vms.warm-state.save', title: `Save VM ${vmid} '${rec.name}' as warm state ${id}`, owner: actorOf(ctx), resource: `vms/${vmid}` },
        async (th) => {
          try {
            return await this.doWarmSave(rec, w, newLayer, th);
          } finally {
            release();
          }
        },
      );
      started = true;
      ctx.note({
        summary: `VM ${vmid} '${rec.name}' being saved as warm state ${id}`,
        target: `vms/${vmid}`,
        metadata: { vmid, warm_state_id: id, task_id: task.task_id },
      });
      if (o.wait) {
        const done = await this.c.e.tasks.settled(task.task_id);
        if (done.state !== 'succeeded') throw internal(`saving the warm state failed: ${done.error}`);
        const saved = await this.c.records.warmState(id);
        return { task: done, warm_state_id: id, warm_state: saved ? this.c.warmView(saved, []) : undefined };
      }
      return { task, warm_state_id: id };
    } finally {
      if (!started) release();
    }
  }

  /** The save pauses and continues the guest: a call under way for the VM's state events (state-events.ts), so no `paused` is reported. */
  private async doWarmSave(rec: VmRecord, w: WarmStateRecord, newLayer: string, th: TaskHandle) {
    await this.settle(rec, th);
    return this.c.states.during(rec.vmid, OPERATOR, () => this.doWarmSaveNow(rec, w, newLayer, th));
  }

  /**
   * Waits for the guest's first boot to finish before its memory is saved. A
   * guest saved while its boot still runs carries that run on in every VM
   * resumed from it, where it races the identity step: cloud-init makes SSH
   * host keys anew and rewrites the hostname and sshd's settings from the
   * saved guest's seed, and the one-shot unit hostd gives a new clone to make
   * its SSH host keys (qemu/identity.ts) went on making them beside the
   * identity step's own (a fork's copies were seen with private host keys and
   * no public ones). So it waits for systemd's start-up jobs to end
   * (`systemctl is-system-running --wait`), then for cloud-init. Asked through
   * the agent; a guest without an agent is saved at once, one without systemd
   * or cloud-init skips that wait. The shell looks for cloud-init's own marks
   * first (its result file, written when its last stage ends; its disabled
   * marks): `cloud-init status` is a Python program whose start alone took
   * seconds under TCG, on every fork.
   */
  private async settle(rec: VmRecord, th: TaskHandle): Promise<void> {
    const ref = this.c.ref(rec.vmid);
    if (!(await this.c.driver.ping(ref, this.c.e.settings.agentTimeoutMs))) {
      th.log('the guest agent does not answer: the guest is saved as it is');
      return;
    }
    th.log("waiting for the guest's first boot to finish (systemd's start-up jobs, cloud-init)");
    const limit = this.c.e.settings.warmSettleTimeoutMs;
    const r = await this.c.driver.exec(ref, SETTLE_SCRIPT, limit, { cut: false });
    if (r.timed_out) {
      throw conflict(
        `VM ${rec.vmid}'s first boot (systemd's start-up jobs, cloud-init) did not finish within ${limit / 1000} s (vms.warm_settle_timeout_seconds): a warm state saved now would carry it on in every VM resumed from it; save it once the guest has settled`,
      );
    }
  }

  private async doWarmSaveNow(rec: VmRecord, w: WarmStateRecord, newLayer: string, th: TaskHandle) {
    const ref = this.c.ref(rec.vmid);
    const key = VmRecords.intentKey(`warm-save-${w.id}`);
    await this.c.records.journal.begin(key, { op: 'warm-save', vmid: rec.vmid, id: w.id, name: w.name, dir: w.dir, new_layer: newLayer, vmgenid: w.vmgenid });
    let snapped = false;
    try {
      await fs.mkdir(w.dir, { recursive: true, mode: 0o700 });
      th.log('saving guest memory');
      th.progress(5);
      const saved = await this.c.driver.saveMemory(ref, `${w.memory_file}.part`);
      th.log(`memory saved (${formatSize(saved.bytes)} in ${saved.ms} ms); freezing the disk`);
      th.progress(70);
      await this.c.step('warm:saved');
      const frozen = await this.c.driver.snapshotRoot(ref, path.join(rec.dir, newLayer), `root-${newLayer.split('.')[1]}`);
      snapped = true;
      rec.root_layers.push(newLayer);
      rec.updated_at = now();
      await this.c.records.vms.put(vmKey(rec.vmid), rec);
      await this.c.step('warm:snapshot');
      await this.c.driver.cont(ref);
      th.progress(85);
      // The frozen layer is never written again: a second name for it belongs to the warm state.
      await fs.link(frozen, w.disk_file);
      await fs.rename(`${w.memory_file}.part`, w.memory_file);
      await this.c.step('warm:linked');
      w.size_bytes = (await fs.stat(w.memory_file)).size + (await fs.stat(w.disk_file)).size;
      await this.c.records.journal.commit(key, [this.c.records.putWarm(w), this.c.records.putVm(rec)]);
      th.progress(100);
      return { warm_state_id: w.id, vmid: rec.vmid, memory_ms: saved.ms, size_bytes: w.size_bytes };
    } catch (err) {
      const st = await this.c.driver.status(ref);
      if (st.running && st.status !== 'running') await this.c.driver.cont(ref).catch(() => undefined);
      await fs.rm(w.dir, { recursive: true, force: true });
      if (snapped) await this.c.records.vms.put(vmKey(rec.vmid), rec);
      await this.c.records.journal.drop(key);
      throw err;
    }
  }

  /**
   * POST /vms/warm-states/{id}: a new VM on a linked clone of the warm state's
   * disk, resumed from its memory. It runs when this returns; its own
   * hostname, machine-id, seed and SSH host keys are set through the agent.
   */
  async restoreWarmState(
    id: string,
    a: { name: string; vmid?: number; seed_data?: string; skip_rekey?: boolean; labels?: Record<string, string>; autostart?: boolean },
    ctx: NoteSink,
    o: OwnerOpts = {},
  ) {
    await this.c.requirePrograms('qemu-system-x86_64', 'qemu-img', 'genisoimage');
    const nm = a.name;
    if (a.seed_data !== undefined && Buffer.byteLength(a.seed_data) > SEED_MAX) throw badRequest(`argument 'seed_data' must be at most ${SEED_MAX} bytes`);
    // Restores of one warm state run side by side (sandboxes start many); a use count, registered
    // under the warm state's lock, keeps a delete from removing its files meanwhile.
    const w = await this.c.lock.run(
      [`ws:${id}`],
      async () => {
        const found = await this.c.warmState(id, o);
        const refused = warmRefusal(found);
        if (refused) throw conflict(refused);
        this.c.warmUsers.set(id, (this.c.warmUsers.get(id) ?? 0) + 1);
        return found;
      },
      'warm-state restore',
    );
    const unuse = () => {
      const n = (this.c.warmUsers.get(id) ?? 1) - 1;
      if (n <= 0) this.c.warmUsers.delete(id);
      else this.c.warmUsers.set(id, n);
    };
    let vmid: number;
    try {
      vmid = await this.c.allocVmid(a.vmid);
    } catch (err) {
      unuse();
      throw err;
    }
    let release: (() => void) | null = null;
    try {
      release = this.c.lock.hold([`vm:${vmid}`], 'warm-state restore');
      const pool = this.c.pool(w.storage_id);
      const t = now();
      const rec: VmRecord = {
        vmid,
        name: nm,
        owner: o.owner ?? null,
        labels: a.labels ?? {},
        storage_id: pool.id,
        dir: vmDir(pool, vmid),
        image_id: w.image_id,
        linked_clone: true,
        base_image_id: w.base_image_id,
        base_warm_state_id: w.id,
        cpu_cores: w.cpu_cores,
        memory_mb: w.memory_mb,
        disk_size_gb: w.disk_size_gb,
        autostart: a.autostart ?? false,
        state: 'stopped',
        root_layers: ['root.qcow2'],
        disks: [],
        cloud_init: { ...w.cloud_init, password_set: false, generation: w.cloud_init.generation + 1 },
        mac: this.c.driver.macFor(vmid, Date.now() % 9973),
        uuid: newUuid(),
        ssh_port: null,
        identity: { method: 'agent', pending: false, skip_rekey: a.skip_rekey ?? false, seed_written: false },
        seed_generation: null,
        // Its own generation ID: QEMU writes it into the resumed memory, and the guest kernel reseeds.
        resume_file: null,
        vmgenid: newUuid(),
        task_id: null,
        created_at: t,
        updated_at: t,
      };
      const key = VmRecords.intentKey(`warm-restore-${vmid}`);
      await this.c.records.journal.begin(key, { op: 'warm-restore', vmid, id, dir: rec.dir });
      const t0 = Date.now();
      try {
        await fs.mkdir(rec.dir, { recursive: true, mode: 0o700 });
        // Two programs that need nothing of each other (qemu-img, genisoimage): side by side, both
        // ended before a failure of either removes the directory.
        const made = await Promise.allSettled([this.c.driver.createDisk(path.join(rec.dir, 'root.qcow2'), null, w.disk_file), this.c.writeSeed(rec)]);
        for (const m of made) if (m.status === 'rejected') throw m.reason;
        await this.c.step('restore:disk');
        await this.c.launch(rec, w.memory_file);
        await this.c.step('restore:started');
      } catch (err) {
        await this.c.undoCreate(rec);
        await this.c.records.journal.drop(key);
        throw err;
      }
      const resumeMs = Date.now() - t0;
      // From the commit on the VM is visible and runs, with the saved guest's identity until the agent
      // sets its own: wait-ready, exec and guest files wait for this step's end (context.ts).
      const identityDone = this.c.identityStep(vmid);
      let identity: { applied: boolean; reason: string | null };
      try {
        await this.c.states.commit(key, [this.c.records.putVm(rec)], vmid, 'running', actorOf(ctx as { caller?: { tokenName: string } }), rec);
        this.heardResume(resumeMs);
        identity = await this.agentIdentity(rec, a.seed_data ?? null, !(a.skip_rekey ?? false));
      } finally {
        identityDone();
      }
      if (identity.applied && a.seed_data !== undefined) {
        rec.identity.seed_written = true;
        await this.c.save(rec);
      }
      ctx.note({
        summary: `VM ${vmid} '${nm}' created from warm state ${id} (resumed in ${resumeMs} ms)`,
        target: `vms/${vmid}`,
        metadata: { vmid, warm_state_id: id, resume_ms: resumeMs, identity: identity.applied },
      });
      return { vm: this.c.view(rec, 'running'), resume_ms: resumeMs, identity };
    } finally {
      this.c.reserved.delete(vmid);
      release?.();
      unuse();
    }
  }

  /** The resume is stored: its time to whoever watches (the metrics); a watcher's failure is not the resume's. */
  private heardResume(ms: number): void {
    try {
      this.c.e.onWarmResume?.(ms);
    } catch (err) {
      this.c.e.log.error({ err }, 'vms: a warm-resume watcher failed');
    }
  }

  /**
   * The clock, hostname, machine-id, seed and (in the background) SSH host
   * keys of a resumed clone, through the agent: its first answer, its clock
   * (one more round trip, for the shift), then one guest shell
   * (identityScript) whose end is asked for every IDENTITY_POLL_MS.
   */
  private async agentIdentity(rec: VmRecord, seed: string | null, rekey: boolean): Promise<{ applied: boolean; reason: string | null }> {
    const ref = this.c.ref(rec.vmid);
    const end = Date.now() + 15_000;
    while (!(await this.c.driver.ping(ref, 1000))) {
      if (Date.now() > end) return { applied: false, reason: 'the guest agent did not answer within 15 s after the resume' };
      await sleep(100);
    }
    try {
      const script = identityScript({
        hostname: hostnameOf(rec.name, rec.vmid),
        machineId: rekey ? randomHex(16) : null,
        seed: seed !== null,
        nowMs: Date.now(),
        clockOffsetMs: await this.clockOffset(ref),
      });
      // The seed arrives on stdin, never in an argument list.
      const r = await this.c.driver.exec(ref, script, 20_000, { input: seed ?? undefined, cut: false, pollMs: IDENTITY_POLL_MS });
      if (r.exit_code !== 0)
        return { applied: false, reason: `setting the identity failed in the guest: ${(r.stderr.trim() || `exit ${r.exit_code}`).slice(0, 200)}` };
      return { applied: true, reason: null };
    } catch (err) {
      return { applied: false, reason: agentFailure(rec.vmid, err).message };
    }
  }

  /** Host clock minus guest clock in ms, from the agent's `guest-get-time` (the host's at the middle of the round trip); null when it does not say. */
  private async clockOffset(ref: MachineRef): Promise<number | null> {
    const t1 = Date.now();
    const ns = await this.c.driver.agent<number>(ref, 'guest-get-time', undefined, 5000).catch(() => null);
    const t2 = Date.now();
    return typeof ns === 'number' && Number.isFinite(ns) ? (t1 + t2) / 2 - ns / 1e6 : null;
  }

  async deleteWarmState(id: string, ctx: NoteSink, o: OwnerOpts = {}) {
    return this.c.lock.exclusiveOn(
      () => this.c.warmState(id, o),
      [`ws:${id}`],
      'warm-state delete',
      async (w) => {
        const deps = (await this.c.records.allVms()).filter((v) => v.base_warm_state_id === id);
        if (deps.length) throw conflict(`warm state '${id}' is the base of VMs ${deps.map((v) => v.vmid).join(', ')}: delete them first`);
        // A warm state saved from a VM that rests on this one has its disk on this one's (a sandbox fork's).
        const wsDeps = (await this.c.records.allWarm()).filter((x) => x.base_warm_state_id === id);
        if (wsDeps.length) throw conflict(`warm state '${id}' is the base of warm states ${wsDeps.map((x) => x.id).join(', ')}: delete them first`);
        if (this.c.warmUsers.get(id)) throw conflict(`warm state '${id}' is busy: warm-state restore in progress`);
        const key = VmRecords.intentKey(`warm-delete-${id}`);
        await this.c.records.journal.begin(key, { op: 'warm-delete', id, dir: w.dir });
        await fs.rm(w.dir, { recursive: true, force: true });
        await this.c.records.journal.commit(key, [this.c.records.delWarm(id)]);
        ctx.note({ summary: `Warm state ${id} '${w.name}' deleted`, target: `vms/warm-states/${id}`, metadata: { warm_state_id: id, vmid: w.vmid } });
        return { deleted: this.c.warmView(w, []) };
      },
    );
  }
}
