/** Warm states for sandboxes: saved from a VM booted for the purpose, kept for images labelled for warmth, and the operator commands on them. */
import { conflict, unavailable } from '../lib/errors.js';
import { noNotes } from '../lib/caller.js';
import type { TaskHandle, TaskRecord } from '../lib/tasks.js';
import { OPERATOR } from '../lib/operator.js';
import { O, WARM_BUILD_LABEL, type SandboxImage } from './driver.js';
import type { SandboxContext } from './context.js';

export class SandboxWarmStates {
  constructor(private readonly c: SandboxContext) {}

  /**
   * Saves a warm state of `imageId` for sandboxes (a task): a build VM boots
   * cold from the image, settles (guest agent up, cloud-init done), and its
   * memory and disk are saved at one instant; the build VM is then removed.
   * Sandboxes of the same shape then start by resuming it.
   */
  async saveWarm(a: { image_id: string; cpu_cores?: number; memory_mb?: number; disk_gb?: number }, owner: string): Promise<{ task: TaskRecord }> {
    if (this.c.closed) throw unavailable('the sandboxes domain is shutting down');
    await this.c.vms.requirePrograms('qemu-system-x86_64', 'qemu-img', 'qemu-storage-daemon', 'debugfs', 'genisoimage');
    const img = await this.c.vms.image(a.image_id);
    const res = this.c.resources(img, a, 'resources');
    if (this.c.warming.has(img.image_id)) throw conflict(`a warm state of image '${img.image_id}' is being saved already`);
    this.c.warming.add(img.image_id);
    try {
      const task = this.c.e.tasks.start(
        {
          kind: 'sandboxes.warm-state.save',
          title: `Save a warm state of '${img.image_id}' for sandboxes (${res.cpu_cores} CPU, ${res.memory_mb} MiB)`,
          owner,
          resource: `sandboxes/images/${img.image_id}`,
        },
        async (th) => {
          try {
            return await this.buildWarm(img, res, owner, th);
          } finally {
            this.c.warming.delete(img.image_id);
          }
        },
      );
      return { task };
    } catch (err) {
      this.c.warming.delete(img.image_id);
      throw err;
    }
  }

  private async buildWarm(img: SandboxImage, res: { cpu_cores: number; memory_mb: number; disk_gb: number }, owner: string, th: TaskHandle) {
    th.log(`creating a build VM from '${img.image_id}'`);
    const { vm } = await this.c.vms.create(
      {
        name: `warm-${img.image_id}`.slice(0, 63),
        image_id: img.image_id,
        cpu_cores: res.cpu_cores,
        memory_mb: res.memory_mb,
        disk_size_gb: res.disk_gb,
        linked_clone: true,
      },
      noNotes,
      { ...O, labels: { [WARM_BUILD_LABEL]: img.image_id } },
    );
    try {
      await this.c.vms.start(vm.vmid, noNotes, O);
      th.log(`build VM ${vm.vmid} started; waiting for its guest agent`);
      th.progress(10);
      const t0 = Date.now();
      const end = t0 + this.c.e.settings.bootTimeoutMs;
      for (;;) {
        if (th.signal.aborted) throw new Error('cancelled');
        const w = await this.c.vms.waitReady(vm.vmid, 2, O);
        if (w.ready) break;
        if (w.state === 'stopped') throw new Error('the build VM powered off while booting');
        if (Date.now() > end) throw new Error(`the build VM's guest agent did not answer within ${this.c.e.settings.bootTimeoutMs / 1000} s`);
        th.progress(10 + Math.min(50, Math.floor(((Date.now() - t0) / this.c.e.settings.bootTimeoutMs) * 50)));
      }
      // The save waits for the guest's first boot (systemd's start-up jobs, cloud-init) to finish: nothing of it is left to run in each sandbox.
      th.log(`guest agent answers after ${Math.round((Date.now() - t0) / 1000)} s`);
      th.progress(65);
      if (th.signal.aborted) throw new Error('cancelled');
      th.log('saving memory and disk once cloud-init has finished');
      th.progress(80);
      const saved = await this.c.vms.saveWarmState(vm.vmid, `sandbox ${img.image_id}`, { note() {}, caller: { tokenName: owner } }, { ...O, wait: true });
      th.log(`warm state ${saved.warm_state_id} saved`);
      th.progress(95);
      return {
        warm_state_id: saved.warm_state_id,
        image_id: img.image_id,
        cpu_cores: res.cpu_cores,
        memory_mb: res.memory_mb,
        disk_gb: saved.warm_state?.disk_size_gb ?? null,
      };
    } finally {
      await this.c.removeVm(vm.vmid).catch((err) => this.c.e.log.error({ err, vmid: vm.vmid }, 'sandboxes: removing a warm build VM failed'));
    }
  }

  async warmStates() {
    return { warm_states: await this.c.vms.warmStates(O) };
  }

  async deleteWarm(id: string) {
    return this.c.vms.deleteWarmState(id, noNotes, O);
  }

  /**
   * Images labelled `<warm_label>: "true"` (e.g. by POST /templates) get a
   * warm state of the default shape when they have none; one save at a time,
   * a failed image retried after an hour.
   */
  async keepWarm(): Promise<string[]> {
    if (this.c.closed || this.c.warming.size) return [];
    const label = this.c.e.settings.warmLabel;
    for (const img of await this.c.vms.allImages()) {
      if (img.labels[label] !== 'true') continue;
      const res = this.c.resources(img, null);
      if ((await this.c.warmFor({ image_id: img.image_id, ...res })).id) continue;
      const failed = this.c.warmFailedAt.get(img.image_id);
      if (failed && Date.now() - failed < 3_600_000) continue;
      const { task } = await this.saveWarm({ image_id: img.image_id }, OPERATOR);
      void this.c.e.tasks.settled(task.task_id).then((t) => {
        if (t.state === 'failed') this.c.warmFailedAt.set(img.image_id, Date.now());
      });
      return [task.task_id];
    }
    return [];
  }
}
