/**
 * POST /templates: build a template image from a base image and cloud-init
 * user-data. A task: download the base when the host lacks it, boot a build
 * VM (a linked clone, owned by `template-build`, hidden from /vms) whose seed
 * carries the user-data verbatim, wait until the guest powers itself off,
 * flatten its disk into the new template (labels stored on it), and delete
 * the build VM. GET /templates/{task_id} reports the task and, once done, the
 * template.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { badRequest, conflict, notFound } from '../lib/errors.js';
import { noNotes, type NoteSink } from '../lib/caller.js';
import type { TaskHandle } from '../lib/tasks.js';
import { imagesDir, now, partialDir, slug, sleep } from './common.js';
import type { ImageService } from './images.js';
import { VmService } from './service.js';
import { actorOf } from '../lib/operator.js';
import { GiB } from './sizes.js';

type Caller = NoteSink & { caller?: { tokenName: string } };

const DEFAULT_USER_DATA = '#cloud-config\npower_state:\n  mode: poweroff\n  condition: true\n';

export class TemplateBuilder {
  constructor(
    private readonly vms: VmService,
    private readonly images: ImageService,
  ) {}

  async create(a: { base_image_id: string; name: string; user_data?: string; labels?: Record<string, string> }, ctx: Caller) {
    const name = a.name;
    const id = slug(name);
    if (!id) throw badRequest("argument 'name' gives no usable image id (letters, digits, '.', '_' or '-')");
    const labels = a.labels ?? {};
    if (Object.keys(labels).length > 64) throw badRequest("argument 'labels' takes at most 64 pairs");
    for (const [k, v] of Object.entries(labels)) {
      if (!k || k.length > 128 || v.length > 1024) throw badRequest("argument 'labels' keys must be 1-128 characters and values at most 1024");
    }
    const userData = a.user_data ?? DEFAULT_USER_DATA;
    if (Buffer.byteLength(userData) > 512 * 1024) throw badRequest("argument 'user_data' must be at most 512 KiB");
    const base = await this.vms.records.image(a.base_image_id);
    const entry = base ? undefined : (await this.images.catalog()).find((c) => c.id === a.base_image_id);
    if (!base && !entry) throw notFound(`image '${a.base_image_id}' not found (not on this host and not in the download catalog)`);
    await this.vms.requirePrograms('qemu-system-x86_64', 'qemu-img', 'genisoimage');
    const unreserve = await this.images.reserve(id);
    let releaseBase: (() => void) | null = null;
    try {
      if (!base) releaseBase = this.vms.lock.hold([`image:${a.base_image_id}`], 'download');
    } catch (err) {
      unreserve();
      if ((err as { status?: number }).status === 409)
        throw conflict(`image '${a.base_image_id}' is being downloaded by another task: try again when it is done`);
      throw err;
    }
    const task = this.vms.e.tasks.start(
      { kind: 'templates.template.build', title: `Build template ${id} from ${a.base_image_id}`, owner: actorOf(ctx), resource: `vms/images/${id}` },
      async (th) => {
        try {
          let img = base;
          if (!img) {
            th.log(`base image ${a.base_image_id} is not on this host: downloading it first`);
            img = await this.images.fetchInto(entry!, this.vms.e.settings.defaultStorage, th, 0, 30);
            releaseBase?.();
            releaseBase = null;
          }
          return await this.build(id, name, img.image_id, userData, labels, th);
        } finally {
          releaseBase?.();
          unreserve();
        }
      },
    );
    ctx.note({
      summary: `Template build ${id} from ${a.base_image_id} started`,
      target: `vms/images/${id}`,
      metadata: { image_id: id, base_image_id: a.base_image_id, task_id: task.task_id, labels: Object.keys(labels) },
    });
    return { task, image_id: id };
  }

  private async build(id: string, name: string, baseId: string, userData: string, labels: Record<string, string>, th: TaskHandle) {
    const owner = VmService.TEMPLATE_BUILD_OWNER;
    const o = { owner };
    const { vm } = await this.vms.create({ name: `template-build-${id}`, image_id: baseId, linked_clone: true }, noNotes, { owner, seedUserData: userData });
    th.log(`build VM ${vm.vmid} created on a linked clone of ${baseId}`);
    th.progress(35);
    const vmid = vm.vmid;
    try {
      await this.vms.start(vmid, noNotes, o);
      th.log('build VM started: waiting for the guest to power itself off');
      const t0 = Date.now();
      const limit = this.vms.e.settings.templateBuildTimeoutMs;
      for (;;) {
        if (th.signal.aborted) throw new Error('template build cancelled');
        const rec = await this.vms.vm(vmid, o);
        const state = await this.vms.state(rec);
        if (state === 'stopped') break;
        const el = Date.now() - t0;
        if (el > limit) throw new Error(`the build VM did not power off within ${Math.round(limit / 1000)} s (the user_data must end by powering off)`);
        th.progress(Math.min(80, 35 + Math.floor((el / limit) * 45)));
        await sleep(1000);
      }
      th.log(`the build VM powered off after ${Math.round((Date.now() - t0) / 1000)} s; capturing its disk`);
      th.progress(82);
      const rec = await this.vms.vm(vmid, o);
      const pool = this.vms.pool(rec.storage_id);
      const tmp = path.join(partialDir(pool), `${id}.build.qcow2`);
      await fs.mkdir(partialDir(pool), { recursive: true });
      try {
        await this.vms.driver.copyDisk(path.join(rec.dir, rec.root_layers[rec.root_layers.length - 1]), tmp, {
          signal: th.signal,
          onProgress: (p) => th.progress(82 + Math.floor(p * 0.15)),
        });
        const base = await this.vms.records.image(baseId);
        const img = await this.images.addBuilt(
          {
            image_id: id,
            storage_id: pool.id,
            name,
            kind: 'template',
            file: path.join(imagesDir(pool), `${id}.qcow2`),
            min_cpu_cores: base?.min_cpu_cores ?? 1,
            min_memory_mb: base?.min_memory_mb ?? 512,
            min_disk_gb: Math.ceil((base?.virtual_size_bytes ?? GiB) / GiB),
            default_user: base?.default_user ?? null,
            labels,
            source: { type: 'build', base_image_id: baseId, task_id: th.id },
            created_at: now(),
          },
          tmp,
          th,
        );
        th.progress(100);
        return { image_id: img.image_id, storage_id: img.storage_id, build_vmid: vmid };
      } finally {
        await fs.rm(tmp, { force: true });
      }
    } finally {
      await this.vms.remove(vmid, noNotes, o).catch((err) => th.log(`removing build VM ${vmid} failed: ${(err as Error).message}`));
    }
  }

  async get(taskId: string) {
    let task;
    try {
      task = await this.vms.e.tasks.get(taskId);
    } catch {
      throw notFound(`template build '${taskId}' not found`);
    }
    if (task.kind !== 'templates.template.build' && task.kind !== 'templates.build') throw notFound(`task '${taskId}' is not a template build`);
    const id = (task.result as { image_id?: string } | null)?.image_id;
    const img = id ? await this.vms.records.image(id) : undefined;
    return { task, template: img ? await this.images.view(img) : null };
  }
}
