/** Creating VMs: POST /vms (a linked clone at once, a full copy as a task) and POST /vms/{id}/clone. */
import fs from 'node:fs/promises';
import path from 'node:path';
import { badRequest, conflict, unavailable } from '../lib/errors.js';
import type { NoteSink } from '../lib/caller.js';
import { actorOf } from '../lib/operator.js';
import type { TaskHandle, TaskRecord } from '../lib/tasks.js';
import { formatSize, GiB } from './sizes.js';
import { checkGateway, withPrefix } from '../../api/registry/schema.js';
import { VmRecords, type ImageRecord, type StoredCloudInit, type VmRecord } from './records.js';
import { belowMinimum, checkSshKey, checkUsername, newUuid, now, vmDir } from './common.js';
import { type CreateInput, isChainEscape, type OwnerOpts, SEED_MAX, SEED_NS, type VmContext, type VmView } from './context.js';

export class VmCreation {
  constructor(private readonly c: VmContext) {}

  // ------------------------------------------------------------ create

  /**
   * POST /vms. A linked clone is ready when this returns; a full copy answers
   * at once with the VM in state `creating` and the copy's task.
   */
  async create(
    a: CreateInput,
    ctx: NoteSink,
    o: OwnerOpts & { labels?: Record<string, string>; catalogHint?: (id: string) => boolean; seedUserData?: string } = {},
  ): Promise<{ vm: VmView; task: TaskRecord | null }> {
    if (this.c.closed) throw unavailable('the VM domain is shutting down');
    await this.c.requirePrograms('qemu-img');
    const name = a.name;
    const img = await this.c.image(a.image_id, o.catalogHint);
    const pool = this.c.pool(a.storage_id ?? this.c.e.settings.defaultStorage);
    const s = this.c.e.settings;
    const pick = (v: number | undefined, min: number, def: number, arg: string): number => {
      if (v === undefined || v === 0) return min > 0 ? min : def;
      if (v < min) throw badRequest(belowMinimum(arg, v, img.image_id, String(min)));
      return v;
    };
    const cpu = pick(a.cpu_cores, img.min_cpu_cores, s.defaultCpuCores, 'cpu_cores');
    const mem = pick(a.memory_mb, img.min_memory_mb, s.defaultMemoryMb, 'memory_mb');
    const imgGb = Math.ceil(img.virtual_size_bytes / GiB);
    const minDisk = Math.max(img.min_disk_gb, imgGb);
    const disk = a.disk_size_gb === undefined || a.disk_size_gb === 0 ? (img.min_disk_gb ? minDisk : Math.max(minDisk, s.defaultDiskGb)) : a.disk_size_gb;
    if (disk < minDisk)
      throw badRequest(
        `${belowMinimum('disk_size_gb', disk, img.image_id, `${minDisk} GiB`)}${imgGb >= img.min_disk_gb ? ' (its disk size; disks cannot shrink)' : ''}`,
      );
    await this.c.hostLimits(cpu, mem);
    const ci = this.initialCloudInit(a, img);
    if (a.seed_data !== undefined && Buffer.byteLength(a.seed_data) > SEED_MAX) throw badRequest(`argument 'seed_data' must be at most ${SEED_MAX} bytes`);
    const linked = a.linked_clone ?? Boolean(o.owner);
    const vmid = await this.c.allocVmid(a.vmid);
    const releaseImage = this.c.useImage(img.image_id);
    let releaseLock: (() => void) | null = null;
    try {
      releaseLock = this.c.lock.hold([`vm:${vmid}`], 'create');
      const t = now();
      const rec: VmRecord = {
        vmid,
        name,
        owner: o.owner ?? null,
        labels: o.labels ?? {},
        storage_id: pool.id,
        dir: vmDir(pool, vmid),
        image_id: img.image_id,
        linked_clone: linked,
        base_image_id: linked ? img.image_id : null,
        base_warm_state_id: null,
        cpu_cores: cpu,
        memory_mb: mem,
        disk_size_gb: disk,
        autostart: a.autostart ?? false,
        state: 'creating',
        root_layers: ['root.qcow2'],
        disks: [],
        cloud_init: ci,
        mac: this.c.driver.macFor(vmid, Date.now() % 9973),
        uuid: newUuid(),
        ssh_port: null,
        identity: { method: null, pending: true, skip_rekey: a.skip_rekey ?? false, seed_written: false },
        seed_generation: null,
        resume_file: null,
        vmgenid: newUuid(),
        task_id: null,
        created_at: t,
        updated_at: t,
      };
      const key = VmRecords.intentKey(`create-${vmid}`);
      if (linked) {
        await this.c.records.journal.begin(key, { op: 'create', vmid, dir: rec.dir });
        try {
          await this.buildDisk(rec, img, a.seed_data ?? null, null, o.seedUserData);
        } catch (err) {
          await this.c.undoCreate(rec);
          await this.c.records.journal.drop(key);
          throw err;
        }
        rec.state = 'stopped';
        rec.updated_at = now();
        await this.c.states.commit(key, [this.c.records.putVm(rec)], vmid, 'stopped', actorOf(ctx as { caller?: { tokenName: string } }), rec);
        ctx.note({
          summary: `VM ${vmid} '${name}' created as a linked clone of '${img.image_id}'`,
          target: `vms/${vmid}`,
          metadata: { vmid, image_id: img.image_id, linked_clone: true },
        });
        return { vm: this.c.view(rec, 'stopped'), task: null };
      }
      // Full copy: the VM shows as `creating` while its task copies the image.
      const release = releaseLock;
      releaseLock = null;
      const releaseImg = releaseImage;
      // biome-ignore lint/style/useConst: the task's own work reads it, so it is declared before start() assigns it
      let task!: TaskRecord;
      await this.c.records.journal.begin(key, { op: 'create', vmid, dir: rec.dir });
      // The task's work waits until the `creating` record is written, so its commit comes after it.
      let recorded!: () => void;
      const written = new Promise<void>((r) => (recorded = r));
      task = this.c.e.tasks.start(
        {
          kind: 'vms.vm.create',
          title: `Create VM ${vmid} '${name}' (full copy of ${img.image_id})`,
          owner: actorOf(ctx as { caller?: { tokenName: string } }),
          resource: `vms/${vmid}`,
        },
        async (th) => {
          await written;
          try {
            th.log(`copying image ${img.image_id} (${formatSize(img.virtual_size_bytes)} virtual)`);
            await this.buildDisk(rec, img, a.seed_data ?? null, th, o.seedUserData);
            rec.state = 'stopped';
            rec.task_id = null;
            rec.updated_at = now();
            await this.c.states.commit(key, [this.c.records.putVm(rec)], vmid, 'stopped', actorOf(ctx as { caller?: { tokenName: string } }), rec);
            th.progress(100);
            return { vmid };
          } catch (err) {
            await this.c.undoCreate(rec);
            await this.c.states.report(vmid, {
              actor: actorOf(ctx as { caller?: { tokenName: string } }),
              state: 'deleted',
              rec,
              ops: [this.c.records.delVm(vmid)],
            });
            await this.c.records.journal.drop(key);
            throw err;
          } finally {
            this.c.reserved.delete(vmid);
            releaseImg();
            release();
          }
        },
      );
      rec.task_id = task.task_id;
      try {
        await this.c.states.report(vmid, {
          actor: actorOf(ctx as { caller?: { tokenName: string } }),
          state: 'creating',
          rec,
          ops: [this.c.records.putVm(structuredClone(rec))],
        });
      } finally {
        recorded();
      }
      ctx.note({
        summary: `VM ${vmid} '${name}' being created (full copy of '${img.image_id}')`,
        target: `vms/${vmid}`,
        metadata: { vmid, image_id: img.image_id, linked_clone: false, task_id: task.task_id },
      });
      return { vm: this.c.view(rec, 'creating'), task };
    } finally {
      if (releaseLock) {
        releaseLock();
        this.c.reserved.delete(vmid);
        releaseImage();
      }
    }
  }

  private initialCloudInit(a: CreateInput, img: ImageRecord): StoredCloudInit {
    const s = this.c.e.settings;
    return {
      enabled: true,
      username: checkUsername(a.username ?? img.default_user ?? s.defaultUsername),
      ssh_public_key: a.ssh_public_key ? checkSshKey(a.ssh_public_key) : null,
      ssh_enabled: true,
      ssh_password_auth: a.ssh_password_auth ?? false,
      dns_servers: a.dns_servers ?? [],
      ip_address: a.ip_address ? withPrefix(a.ip_address) : null,
      gateway: a.gateway ? (a.ip_address ? checkGateway(a.gateway, a.ip_address) : a.gateway) : null,
      package_upgrade: a.package_upgrade ?? false,
      network_type: s.network,
      network_bridge: null,
      password_set: false,
      generation: 1,
    };
  }

  /**
   * Root disk (overlay or copy, grown to size). The identity and the seed ISO
   * are written by the first start (prepare), which keeps a linked-clone
   * create to a qcow2 overlay and a record; seed_data waits in the secret
   * store until then. A build VM's verbatim user-data is written now.
   */
  private async buildDisk(rec: VmRecord, img: ImageRecord, seed: string | null, th: TaskHandle | null, seedUserData?: string): Promise<void> {
    await fs.mkdir(rec.dir, { recursive: true, mode: 0o700 });
    await this.c.step('create:dir');
    const root = path.join(rec.dir, rec.root_layers[0]);
    const size = rec.disk_size_gb * GiB;
    if (rec.linked_clone) {
      await this.c.driver.createDisk(root, Math.max(size, img.virtual_size_bytes), img.file).catch((err) => {
        throw isChainEscape(err) ? conflict(`image '${img.image_id}' cannot be used: ${(err as Error).message}`) : err;
      });
    } else {
      await this.c.driver.copyDisk(img.file, root, { signal: th?.signal, onProgress: (p) => th?.progress(Math.floor(p * 0.95)) });
      if (size > img.virtual_size_bytes) await this.c.driver.resizeDisk(root, size);
    }
    await this.c.step('create:disk');
    if (seed !== null) await this.c.e.secrets.put(SEED_NS, `seed-${rec.vmid}`, seed);
    if (seedUserData !== undefined) await this.c.writeSeed(rec, seedUserData);
    await this.c.step('create:seed');
  }

  // ------------------------------------------------------------ clone

  /** POST /vms/{id}/clone: `id` is the new VM's id; the stopped source's root disk is copied (flattened) by a task. */
  async clone(
    newId: number,
    sourceId: number,
    name: string,
    ctx: NoteSink & { caller?: { tokenName: string } },
    o: OwnerOpts = {},
  ): Promise<{ vm: VmView; task: TaskRecord }> {
    await this.c.requirePrograms('qemu-img', 'genisoimage');
    const nm = name;
    const src = await this.c.vm(sourceId, o);
    if (newId === sourceId) throw conflict(`vmid ${newId} is taken (by the source VM itself); the path id names the new VM`);
    const vmid = await this.c.allocVmid(newId);
    let releaseAll: (() => void) | null = null;
    try {
      releaseAll = this.c.lock.hold([`vm:${sourceId}`, `vm:${vmid}`], `clone to VM ${vmid}`);
      const state = await this.c.state(src);
      if (state !== 'stopped') throw conflict(`source VM ${sourceId} is ${state}: clone needs a stopped VM`);
      const pool = this.c.pool(src.storage_id);
      const t = now();
      const rec: VmRecord = {
        ...structuredClone(src),
        vmid,
        name: nm,
        dir: vmDir(pool, vmid),
        linked_clone: false,
        base_image_id: null,
        base_warm_state_id: null,
        state: 'creating',
        root_layers: ['root.qcow2'],
        disks: [],
        mac: this.c.driver.macFor(vmid, Date.now() % 9973),
        uuid: newUuid(),
        ssh_port: null,
        identity: { method: null, pending: true, skip_rekey: false, seed_written: false },
        seed_generation: null,
        resume_file: null,
        vmgenid: newUuid(),
        task_id: null,
        created_at: t,
        updated_at: t,
        cloud_init: { ...src.cloud_init, password_set: false, generation: 1 },
      };
      const srcRoot = path.join(src.dir, src.root_layers[src.root_layers.length - 1]);
      const key = VmRecords.intentKey(`create-${vmid}`);
      await this.c.records.journal.begin(key, { op: 'create', vmid, dir: rec.dir });
      const release = releaseAll;
      releaseAll = null;
      let recorded!: () => void;
      const written = new Promise<void>((r) => (recorded = r));
      const task = this.c.e.tasks.start(
        { kind: 'vms.vm.clone', title: `Clone VM ${sourceId} to VM ${vmid} '${nm}'`, owner: actorOf(ctx), resource: `vms/${vmid}` },
        async (th) => {
          await written;
          try {
            await fs.mkdir(rec.dir, { recursive: true, mode: 0o700 });
            await this.c.step('clone:dir');
            th.log(`copying the root disk of VM ${sourceId}`);
            await this.c.driver.copyDisk(srcRoot, path.join(rec.dir, 'root.qcow2'), { signal: th.signal, onProgress: (p) => th.progress(Math.floor(p * 0.9)) });
            await this.c.step('clone:copied');
            rec.state = 'stopped';
            rec.task_id = null;
            rec.updated_at = now();
            await this.c.states.commit(key, [this.c.records.putVm(rec)], vmid, 'stopped', actorOf(ctx), rec);
            th.progress(100);
            return { vmid, source_vmid: sourceId };
          } catch (err) {
            await this.c.undoCreate(rec);
            await this.c.states.report(vmid, { actor: actorOf(ctx), state: 'deleted', rec, ops: [this.c.records.delVm(vmid)] });
            await this.c.records.journal.drop(key);
            throw err;
          } finally {
            this.c.reserved.delete(vmid);
            release();
          }
        },
      );
      rec.task_id = task.task_id;
      try {
        await this.c.states.report(vmid, {
          actor: actorOf(ctx as { caller?: { tokenName: string } }),
          state: 'creating',
          rec,
          ops: [this.c.records.putVm(structuredClone(rec))],
        });
      } finally {
        recorded();
      }
      ctx.note({
        summary: `VM ${sourceId} being cloned to VM ${vmid} '${nm}'`,
        target: `vms/${vmid}`,
        metadata: { vmid, source_vmid: sourceId, task_id: task.task_id },
      });
      return { vm: this.c.view(rec, 'creating'), task };
    } finally {
      if (releaseAll) {
        releaseAll();
        this.c.reserved.delete(vmid);
      }
    }
  }
}
