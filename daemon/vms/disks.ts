/** A VM's additional disks: attach (hot-plugged into a running VM), grow, detach and delete. */
import fs from 'node:fs/promises';
import path from 'node:path';
import { badRequest, conflict, notFound } from '../lib/errors.js';
import type { NoteSink } from '../lib/caller.js';
import { GiB } from './sizes.js';
import { VmRecords, type DiskRecord } from './records.js';
import { now } from './common.js';
import type { OwnerOpts, VmContext } from './context.js';

export class VmDisks {
  constructor(private readonly c: VmContext) {}

  // ------------------------------------------------------------ disks

  async diskAttach(vmid: number, sizeGb: number, ctx: NoteSink, o: OwnerOpts = {}) {
    if (sizeGb < 1) throw badRequest("argument 'size_gb' must be at least 1");
    await this.c.requirePrograms('qemu-img');
    return this.c.lock.exclusiveOn(
      () => this.c.vm(vmid, o),
      [`vm:${vmid}`],
      'disk attach',
      async (rec) => {
        const state = await this.c.state(rec);
        if (state === 'creating' || state === 'suspended' || state === 'paused')
          throw conflict(`VM ${vmid} is ${state}: disks can be added to a running or stopped VM`);
        const used = new Set(rec.disks.map((d) => d.slot));
        const { first: FIRST_DISK_SLOT, last: LAST_DISK_SLOT } = this.c.driver.diskSlots;
        let slot = FIRST_DISK_SLOT;
        while (used.has(slot)) slot++;
        if (slot > LAST_DISK_SLOT) throw conflict(`VM ${vmid} has no free disk slot (at most ${LAST_DISK_SLOT - FIRST_DISK_SLOT + 1} additional disks)`);
        let n = 1;
        while (rec.disks.some((d) => d.disk_id === `d${n}`)) n++;
        const disk: DiskRecord = { disk_id: `d${n}`, file: path.join(rec.dir, `disk-d${n}.qcow2`), size_gb: sizeGb, slot, created_at: now() };
        const key = VmRecords.intentKey(`disk-attach-${vmid}`);
        await this.c.records.journal.run(
          key,
          { op: 'disk-attach', vmid, disk_id: disk.disk_id, file: disk.file },
          async () => {
            await this.c.driver.createDisk(disk.file, sizeGb * GiB);
            if (state === 'running') await this.c.driver.attachDisk(this.c.ref(vmid), { id: disk.disk_id, file: disk.file, slot });
          },
          {
            commit: () => {
              rec.disks.push(disk);
              rec.updated_at = now();
              return [this.c.records.putVm(rec)];
            },
            rollback: async () => {
              await fs.rm(disk.file, { force: true });
            },
          },
        );
        ctx.note({
          summary: `Disk ${disk.disk_id} (${sizeGb} GiB) added to VM ${vmid}${state === 'running' ? ' (hot-plugged)' : ''}`,
          target: `vms/${vmid}/disks/${disk.disk_id}`,
          metadata: { vmid, disk_id: disk.disk_id, size_gb: sizeGb, hotplug: state === 'running' },
        });
        return { vmid, disk: { disk_id: disk.disk_id, size_gb: sizeGb }, hotplugged: state === 'running' };
      },
    );
  }

  async diskGrow(vmid: number, diskId: string, sizeGb: number, ctx: NoteSink, o: OwnerOpts = {}) {
    if (sizeGb < 1) throw badRequest("argument 'size_gb' must be at least 1");
    return this.c.lock.exclusiveOn(
      () => this.c.vm(vmid, o),
      [`vm:${vmid}`],
      'disk grow',
      async (rec) => {
        const disk = rec.disks.find((d) => d.disk_id === diskId);
        if (!disk) throw notFound(`VM ${vmid} has no disk '${diskId}'`);
        if (sizeGb <= disk.size_gb)
          throw badRequest(`argument 'size_gb' (${sizeGb}) must be larger than disk ${diskId}'s current ${disk.size_gb} GiB: disks only grow`);
        const state = await this.c.state(rec);
        if (state === 'creating' || state === 'suspended' || state === 'paused')
          throw conflict(`VM ${vmid} is ${state}: disks grow on a running or stopped VM`);
        const key = VmRecords.intentKey(`disk-grow-${vmid}`);
        const from = disk.size_gb;
        await this.c.records.journal.run(
          key,
          { op: 'disk-grow', vmid, disk_id: diskId, file: disk.file },
          async () => {
            if (state === 'running') await this.c.driver.growDisk(this.c.ref(vmid), diskId, sizeGb * GiB);
            else await this.c.driver.resizeDisk(disk.file, sizeGb * GiB);
          },
          {
            commit: () => {
              disk.size_gb = sizeGb;
              rec.updated_at = now();
              return [this.c.records.putVm(rec)];
            },
          },
        );
        ctx.note({
          summary: `Disk ${diskId} of VM ${vmid} grown from ${from} to ${sizeGb} GiB`,
          target: `vms/${vmid}/disks/${diskId}`,
          metadata: { vmid, disk_id: diskId, from_gb: from, size_gb: sizeGb, live: state === 'running' },
        });
        return { vmid, disk: { disk_id: diskId, size_gb: sizeGb }, live: state === 'running' };
      },
    );
  }

  async diskDelete(vmid: number, diskId: string, ctx: NoteSink, o: OwnerOpts = {}) {
    return this.c.lock.exclusiveOn(
      () => this.c.vm(vmid, o),
      [`vm:${vmid}`],
      'disk delete',
      async (rec) => {
        const disk = rec.disks.find((d) => d.disk_id === diskId);
        if (!disk) throw notFound(`VM ${vmid} has no disk '${diskId}'`);
        const state = await this.c.state(rec);
        if (state === 'creating' || state === 'suspended' || state === 'paused')
          throw conflict(`VM ${vmid} is ${state}: disks are removed from a running or stopped VM`);
        if (state === 'running') {
          try {
            await this.c.driver.detachDisk(this.c.ref(vmid), diskId, 30_000);
          } catch (err) {
            throw conflict(`the guest of VM ${vmid} did not release disk ${diskId} (${(err as Error).message}); stop the VM and delete the disk then`);
          }
        }
        const key = VmRecords.intentKey(`disk-detach-${vmid}`);
        await this.c.records.journal.begin(key, { op: 'disk-detach', vmid, disk_id: diskId, file: disk.file });
        await fs.rm(disk.file, { force: true });
        rec.disks = rec.disks.filter((d) => d.disk_id !== diskId);
        rec.updated_at = now();
        await this.c.records.journal.commit(key, [this.c.records.putVm(rec)]);
        ctx.note({
          summary: `Disk ${diskId} of VM ${vmid} detached and deleted`,
          target: `vms/${vmid}/disks/${diskId}`,
          metadata: { vmid, disk_id: diskId, hot_unplug: state === 'running' },
        });
        return { vmid, deleted: { disk_id: diskId, size_gb: disk.size_gb } };
      },
    );
  }
}
