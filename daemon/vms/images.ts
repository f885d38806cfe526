/**
 * VM images and captured templates (qcow2 files in `<pool>/.vms/images/`,
 * one record each), installer ISOs (files in `<pool>/.vms/isos/`, listed
 * from the disk), the download catalog, and the long work on them (fetch,
 * import, move, capture) as tasks. Image ids are unique across pools.
 */
import fs from 'node:fs/promises';
import { createReadStream, createWriteStream } from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { badRequest, conflict, errnoCode, notFound } from '../lib/errors.js';
import type { NoteSink } from '../lib/caller.js';
import type { TaskHandle, TaskRecord } from '../lib/tasks.js';
import { download, loadCatalog, type CatalogEntry } from './catalog.js';
import { checkImageId, checkName, imagesDir, isIsoFile, isosDir, now, partialDir, slug } from './common.js';
import { formatSize, GiB } from './sizes.js';
import { VmRecords, type ImageRecord } from './records.js';
import type { VmContext } from './context.js';
import { actorOf } from '../lib/operator.js';

type Caller = NoteSink & { caller?: { tokenName: string } };

export interface ImportInput {
  file: string;
  image_id: string;
  storage_id?: string;
  name?: string;
  default_user?: string | null;
  min_cpu_cores?: number;
  min_memory_mb?: number;
  min_disk_gb?: number;
  labels?: Record<string, string>;
}

export class ImageService {
  private catalogCache: CatalogEntry[] | null = null;
  /** Image ids being fetched, imported or built (not yet records). */
  private readonly pending = new Set<string>();

  constructor(private readonly vms: VmContext) {}

  private get e() {
    return this.vms.e;
  }

  async catalog(): Promise<CatalogEntry[]> {
    this.catalogCache ??= await loadCatalog(this.e.settings.catalogFile);
    return this.catalogCache;
  }

  /** Whether `id` can be downloaded (for the 404 hint of a create). Uses the loaded catalog only. */
  inCatalog = (id: string): boolean => Boolean(this.catalogCache?.some((c) => c.id === id));

  async view(img: ImageRecord) {
    const deps = await this.vms.imageDependents(img.image_id);
    return {
      image_id: img.image_id,
      name: img.name,
      kind: img.kind,
      storage_id: img.storage_id,
      format: 'qcow2',
      size_bytes: img.size_bytes,
      virtual_size_bytes: img.virtual_size_bytes,
      min_cpu_cores: img.min_cpu_cores,
      min_memory_mb: img.min_memory_mb,
      min_disk_gb: img.min_disk_gb,
      default_user: img.default_user,
      labels: img.labels,
      linked_clones: deps.vms,
      warm_states: deps.warm_states,
      source: img.source,
      created_at: img.created_at,
    };
  }

  /** GET /vms/images: every image and template, with the pools' totals. */
  async list() {
    const imgs = (await this.vms.records.allImages()).sort((a, b) => a.storage_id.localeCompare(b.storage_id) || a.image_id.localeCompare(b.image_id));
    const images = await Promise.all(imgs.map((i) => this.view(i)));
    const pools = this.e.pools.map((p) => {
      const mine = imgs.filter((i) => i.storage_id === p.id);
      return { storage_id: p.id, images: mine.length, size_bytes: mine.reduce((s, i) => s + i.size_bytes, 0) };
    });
    return { images, pools };
  }

  /** GET /vms/images/catalog */
  async catalogList() {
    const entries = await this.catalog();
    const have = new Map((await this.vms.records.allImages()).map((i) => [i.image_id, i.storage_id]));
    return {
      images: entries.map((c) => ({
        image_id: c.id,
        name: c.name,
        url: c.url,
        format: c.format ?? null,
        min_cpu_cores: c.min_cpu_cores,
        min_memory_mb: c.min_memory_mb,
        min_disk_gb: c.min_disk_gb,
        default_user: c.default_user,
        labels: c.labels ?? {},
        downloaded: have.has(c.id),
        storage_id: have.get(c.id) ?? null,
      })),
      source: this.e.settings.catalogFile ?? 'bundled',
    };
  }

  private async freeId(id: string): Promise<void> {
    if (this.pending.has(id) || (await this.vms.records.image(id))) throw conflict(`image '${id}' already exists`);
  }

  /** Records a new image file (moved into place from `tmp`) in one journalled step. */
  private async addImage(rec: Omit<ImageRecord, 'size_bytes' | 'virtual_size_bytes'>, tmp: string, th: TaskHandle): Promise<ImageRecord> {
    const key = VmRecords.intentKey(`image-add-${rec.image_id}`);
    await this.vms.records.journal.begin(key, { op: 'image-add', image_id: rec.image_id, file: rec.file });
    try {
      await fs.rename(tmp, rec.file);
      const info = await this.vms.driver.imageInfo(rec.file);
      const st = await fs.stat(rec.file);
      const full: ImageRecord = { ...rec, size_bytes: st.blocks * 512, virtual_size_bytes: info.virtualSize };
      if (!full.min_disk_gb) full.min_disk_gb = Math.ceil(info.virtualSize / GiB);
      await this.vms.step('image:placed');
      await this.vms.records.journal.commit(key, [this.vms.records.putImage(full)]);
      th.log(`image ${rec.image_id} ready in pool ${rec.storage_id} (${formatSize(info.virtualSize)} virtual)`);
      return full;
    } catch (err) {
      await fs.rm(rec.file, { force: true });
      await this.vms.records.journal.drop(key);
      throw err;
    }
  }

  /**
   * Downloads catalog image `id` into a pool (a task); resumable. With
   * `inTask`, runs inside an existing task (POST /templates) instead.
   */
  async fetch(id: string, storageId: string | undefined, ctx: Caller): Promise<{ task: TaskRecord }> {
    const entry = (await this.catalog()).find((c) => c.id === id);
    if (!entry) throw notFound(`image '${id}' is not in the download catalog`);
    await this.freeId(id);
    const pool = this.vms.pool(storageId ?? this.e.settings.defaultStorage);
    this.pending.add(id);
    let task: TaskRecord;
    try {
      const release = this.vms.lock.hold([`image:${id}`], 'download');
      task = this.e.tasks.start(
        { kind: 'vms.image.download', title: `Download image ${id}`, owner: actorOf(ctx), resource: `vms/images/${id}` },
        async (th) => {
          try {
            return { image_id: (await this.fetchInto(entry, pool.id, th, 0, 100)).image_id };
          } finally {
            this.pending.delete(id);
            release();
          }
        },
      );
    } catch (err) {
      this.pending.delete(id);
      throw err;
    }
    ctx.note({
      summary: `Download of image ${id} started`,
      target: `vms/images/${id}`,
      metadata: { image_id: id, storage_id: pool.id, task_id: task.task_id },
    });
    return { task };
  }

  /** The download itself (progress from `p0` to `p1` of the task). */
  async fetchInto(entry: CatalogEntry, storageId: string, th: TaskHandle, p0: number, p1: number): Promise<ImageRecord> {
    await this.vms.requirePrograms('qemu-img');
    const pool = this.vms.pool(storageId);
    const part = path.join(partialDir(pool), `${entry.id}.part`);
    await fs.mkdir(imagesDir(pool), { recursive: true });
    th.log(`downloading ${entry.url}`);
    const span = p1 - p0;
    const checksum = await download(entry, part, { signal: th.signal, log: (l) => th.log(l), onProgress: (f) => th.progress(Math.floor(p0 + f * span * 0.8)) });
    th.progress(Math.floor(p0 + span * 0.8));
    const info = await this.vms.driver.imageInfo(part);
    const fmt = entry.format ?? info.format;
    if (fmt !== 'qcow2' && fmt !== 'raw') throw badRequest(`downloaded image ${entry.id} is ${fmt}, not qcow2 or raw`);
    const tmp = path.join(partialDir(pool), `${entry.id}.qcow2`);
    if (fmt === 'qcow2' && !info.backingFile) {
      await fs.rename(part, tmp);
    } else {
      th.log(`converting ${fmt} to qcow2`);
      await this.vms.driver.copyDisk(part, tmp, { signal: th.signal, sourceFormat: fmt });
      await fs.rm(part, { force: true });
    }
    th.progress(Math.floor(p0 + span * 0.95));
    return this.addImage(
      {
        image_id: entry.id,
        storage_id: pool.id,
        name: entry.name,
        kind: 'image',
        file: path.join(imagesDir(pool), `${entry.id}.qcow2`),
        min_cpu_cores: entry.min_cpu_cores,
        min_memory_mb: entry.min_memory_mb,
        min_disk_gb: entry.min_disk_gb,
        default_user: entry.default_user,
        labels: entry.labels ?? {},
        source: { type: 'catalog', catalog_id: entry.id, url: entry.url, checksum },
        created_at: now(),
      },
      tmp,
      th,
    );
  }

  /** `hostctl vm image import`: a local qcow2 or raw file, converted into a pool (a task). */
  async import(a: ImportInput, ctx: Caller): Promise<{ task: TaskRecord }> {
    await this.vms.requirePrograms('qemu-img');
    const id = checkImageId(a.image_id);
    if (typeof a.file !== 'string' || !path.isAbsolute(a.file)) throw badRequest("argument 'file' must be an absolute path");
    let st;
    try {
      st = await fs.stat(a.file);
    } catch {
      throw notFound(`file '${a.file}' not found`);
    }
    if (!st.isFile()) throw badRequest(`'${a.file}' is not a regular file`);
    const info = await this.vms.driver.imageInfo(a.file).catch((err) => {
      throw badRequest(`'${a.file}' is not a disk image qemu-img can read: ${(err as Error).message}`);
    });
    if (info.format !== 'qcow2' && info.format !== 'raw') throw badRequest(`'${a.file}' is ${info.format}: only qcow2 and raw images are imported`);
    await this.freeId(id);
    const pool = this.vms.pool(a.storage_id ?? this.e.settings.defaultStorage);
    const name = a.name ? checkName(a.name) : id;
    this.pending.add(id);
    let task: TaskRecord;
    try {
      const release = this.vms.lock.hold([`image:${id}`], 'import');
      task = this.e.tasks.start(
        { kind: 'vms.image.import', title: `Import ${path.basename(a.file)} as image ${id}`, owner: actorOf(ctx), resource: `vms/images/${id}` },
        async (th) => {
          const tmp = path.join(partialDir(pool), `${id}.import.qcow2`);
          try {
            await fs.mkdir(partialDir(pool), { recursive: true });
            th.log(`converting ${a.file} (${info.format}, ${formatSize(info.virtualSize)} virtual) to qcow2 in pool ${pool.id}`);
            await this.vms.driver.copyDisk(a.file, tmp, { signal: th.signal, sourceFormat: info.format, onProgress: (p) => th.progress(Math.floor(p * 0.95)) });
            const img = await this.addImage(
              {
                image_id: id,
                storage_id: pool.id,
                name,
                kind: 'image',
                file: path.join(imagesDir(pool), `${id}.qcow2`),
                min_cpu_cores: a.min_cpu_cores ?? 1,
                min_memory_mb: a.min_memory_mb ?? 512,
                min_disk_gb: a.min_disk_gb ?? 0,
                default_user: a.default_user ?? null,
                labels: a.labels ?? {},
                source: { type: 'import', file: a.file },
                created_at: now(),
              },
              tmp,
              th,
            );
            th.progress(100);
            return { image_id: img.image_id, storage_id: img.storage_id };
          } catch (err) {
            await fs.rm(tmp, { force: true });
            throw err;
          } finally {
            this.pending.delete(id);
            release();
          }
        },
      );
    } catch (err) {
      this.pending.delete(id);
      throw err;
    }
    ctx.note({
      summary: `Import of ${a.file} as image ${id} started`,
      target: `vms/images/${id}`,
      metadata: { image_id: id, storage_id: pool.id, task_id: task.task_id },
    });
    return { task };
  }

  private async image(id: string, storageId: string | undefined | null, arg = 'storage_id'): Promise<ImageRecord> {
    const img = await this.vms.records.image(id);
    if (!img) throw notFound(`image '${id}' not found`);
    if (storageId && img.storage_id !== storageId)
      throw notFound(`image '${id}' is not in pool '${storageId}' (it is in '${img.storage_id}'; argument '${arg}')`);
    return img;
  }

  private async refuseDependents(img: ImageRecord, what: string): Promise<void> {
    const deps = await this.vms.imageDependents(img.image_id);
    const parts: string[] = [];
    if (deps.vms.length) parts.push(`linked clones VM ${deps.vms.join(', ')}`);
    if (deps.warm_states.length) parts.push(`warm states ${deps.warm_states.join(', ')}`);
    if (parts.length) throw conflict(`image '${img.image_id}' cannot be ${what}: ${parts.join(' and ')} depend on it`);
    if (this.vms.imageUsers.get(img.image_id)) throw conflict(`image '${img.image_id}' cannot be ${what}: a VM is being created from it`);
  }

  /** DELETE /vms/images/{image_id} (409 while anything rests on it). */
  async remove(id: string, storageId: string | undefined, ctx: NoteSink) {
    return this.vms.lock.exclusiveOn(
      () => this.image(id, storageId),
      [`image:${id}`],
      'delete',
      async (img) => {
        await this.refuseDependents(img, 'deleted');
        const key = VmRecords.intentKey(`image-delete-${id}`);
        await this.vms.records.journal.begin(key, { op: 'image-delete', image_id: id, file: img.file });
        await fs.rm(img.file, { force: true });
        await this.vms.records.journal.commit(key, [this.vms.records.delImage(id)]);
        ctx.note({
          summary: `${img.kind === 'template' ? 'Template' : 'Image'} ${id} deleted from pool ${img.storage_id}`,
          target: `vms/images/${id}`,
          metadata: { image_id: id, storage_id: img.storage_id },
        });
        return { deleted: await this.view(img) };
      },
    );
  }

  /** Copies a file with progress (a rename within one filesystem). */
  private async moveFile(from: string, to: string, th: TaskHandle): Promise<void> {
    await fs.mkdir(path.dirname(to), { recursive: true });
    try {
      await fs.link(from, to);
      return;
    } catch (err) {
      if (errnoCode(err) !== 'EXDEV') throw err;
    }
    const total = (await fs.stat(from)).size || 1;
    let done = 0;
    const rs = createReadStream(from);
    rs.on('data', (c) => {
      done += c.length;
      th.progress(Math.min(95, Math.floor((done / total) * 95)));
    });
    const part = `${to}.part`;
    await pipeline(rs, createWriteStream(part), { signal: th.signal });
    const fh = await fs.open(part, 'r');
    await fh.sync();
    await fh.close();
    await fs.rename(part, to);
  }

  /** POST /vms/images/{image_id}/move (a task; 409 while anything rests on it). */
  async move(id: string, sourceStorageId: string, targetStorageId: string, ctx: Caller) {
    const img = await this.image(id, sourceStorageId, 'source_storage_id');
    const target = this.vms.pool(targetStorageId, 'target_storage_id');
    if (target.id === img.storage_id) throw badRequest(`image '${id}' is already in pool '${target.id}'`);
    const release = this.vms.lock.hold([`image:${id}`], 'move');
    let task: TaskRecord;
    try {
      await this.refuseDependents(img, 'moved');
      const to = path.join(imagesDir(target), path.basename(img.file));
      task = this.e.tasks.start(
        { kind: 'vms.image.move', title: `Move image ${id} from ${img.storage_id} to ${target.id}`, owner: actorOf(ctx), resource: `vms/images/${id}` },
        async (th) => {
          try {
            const key = VmRecords.intentKey(`image-move-${id}`);
            await this.vms.records.journal.run(
              key,
              { op: 'image-move', image_id: id, from: img.file, to, storage_id: target.id },
              async () => {
                await this.moveFile(img.file, to, th);
                await this.vms.step('image-move:copied');
              },
              {
                commit: () => [this.vms.records.putImage({ ...img, storage_id: target.id, file: to })],
                rollback: async () => {
                  await fs.rm(`${to}.part`, { force: true });
                  await fs.rm(to, { force: true });
                },
              },
            );
            await fs.rm(img.file, { force: true });
            th.progress(100);
            return { image_id: id, storage_id: target.id };
          } finally {
            release();
          }
        },
      );
    } catch (err) {
      release();
      throw err;
    }
    ctx.note({
      summary: `Image ${id} moving from pool ${img.storage_id} to ${target.id}`,
      target: `vms/images/${id}`,
      metadata: { image_id: id, from: img.storage_id, to: target.id, task_id: task.task_id },
    });
    return { task, image_id: id, source_storage_id: img.storage_id, target_storage_id: target.id };
  }

  // ---------------------------------------------------------- ISOs

  /** GET /vms/isos: `*.iso` files in each pool's `.vms/isos/` (where operators put them). */
  async isos() {
    const out: Array<{ iso_id: string; storage_id: string; size_bytes: number; modified: string }> = [];
    for (const p of this.e.pools) {
      let names: string[] = [];
      try {
        names = await fs.readdir(isosDir(p));
      } catch {
        continue;
      }
      for (const n of names.sort()) {
        if (!isIsoFile(n)) continue;
        const st = await fs.stat(path.join(isosDir(p), n)).catch(() => null);
        if (st?.isFile()) out.push({ iso_id: n, storage_id: p.id, size_bytes: st.size, modified: st.mtime.toISOString() });
      }
    }
    return { isos: out };
  }

  /** POST /vms/isos/{iso_id}/move (a task). */
  async moveIso(isoId: string, sourceStorageId: string, targetStorageId: string, ctx: Caller) {
    if (!isoId.toLowerCase().endsWith('.iso')) throw badRequest("argument 'iso_id' must be an ISO file name, ending in .iso");
    const src = this.vms.pool(sourceStorageId, 'source_storage_id');
    const dst = this.vms.pool(targetStorageId, 'target_storage_id');
    const from = path.join(isosDir(src), isoId);
    const to = path.join(isosDir(dst), isoId);
    const st = await fs.stat(from).catch(() => null);
    if (!st?.isFile()) throw notFound(`ISO '${isoId}' not found in pool '${src.id}'`);
    if (src.id === dst.id) throw badRequest(`ISO '${isoId}' is already in pool '${dst.id}'`);
    if (await fs.stat(to).catch(() => null)) throw conflict(`pool '${dst.id}' already has an ISO '${isoId}'`);
    const release = this.vms.lock.hold([`iso:${isoId}`], 'move');
    let task: TaskRecord;
    try {
      task = this.e.tasks.start(
        { kind: 'vms.iso.move', title: `Move ISO ${isoId} from ${src.id} to ${dst.id}`, owner: actorOf(ctx), resource: `vms/isos/${isoId}` },
        async (th) => {
          try {
            const key = VmRecords.intentKey(`iso-move`);
            await this.vms.records.journal.run(key, { op: 'iso-move', from, to }, () => this.moveFile(from, to, th), {
              commit: () => [],
              rollback: async () => {
                await fs.rm(`${to}.part`, { force: true });
              },
            });
            await fs.rm(from, { force: true });
            th.progress(100);
            return { iso_id: isoId, storage_id: dst.id };
          } finally {
            release();
          }
        },
      );
    } catch (err) {
      release();
      throw err;
    }
    ctx.note({
      summary: `ISO ${isoId} moving from pool ${src.id} to ${dst.id}`,
      target: `vms/isos/${isoId}`,
      metadata: { iso_id: isoId, from: src.id, to: dst.id, task_id: task.task_id },
    });
    return { task, iso_id: isoId, source_storage_id: src.id, target_storage_id: dst.id };
  }

  // ---------------------------------------------------------- capture

  /** POST /vms/{id}/template: the stopped VM's disk chain flattened into a new template image (a task). */
  async capture(vmid: number, templateName: string | undefined, ctx: Caller) {
    await this.vms.requirePrograms('qemu-img');
    const rec0 = await this.vms.vm(vmid);
    const name = templateName ?? rec0.name;
    const id = slug(name);
    if (!id) throw badRequest(`argument 'template_name' gives no usable image id (letters, digits, '.', '_' or '-')`);
    await this.freeId(id);
    const release = this.vms.lock.hold([`vm:${vmid}`, `image:${id}`], 'template capture');
    let task: TaskRecord;
    try {
      const rec = await this.vms.vm(vmid);
      const state = await this.vms.state(rec);
      if (state !== 'stopped')
        throw conflict(`VM ${vmid} is ${state}: stop it before capturing a template (a running or suspended guest's disk is not consistent)`);
      const pool = this.vms.pool(rec.storage_id);
      const src = await this.vms.records.image(rec.image_id);
      this.pending.add(id);
      task = this.e.tasks.start(
        { kind: 'vms.template.capture', title: `Capture VM ${vmid} '${rec.name}' as template ${id}`, owner: actorOf(ctx), resource: `vms/${vmid}` },
        async (th) => {
          const file = path.join(imagesDir(pool), `${id}.qcow2`);
          const tmp = path.join(partialDir(pool), `${id}.template.qcow2`);
          const key = VmRecords.intentKey(`template-${id}`);
          await this.vms.records.journal.begin(key, { op: 'template', image_id: id, file });
          try {
            await fs.mkdir(partialDir(pool), { recursive: true });
            th.log(`flattening the disk of VM ${vmid} into template ${id}`);
            await this.vms.driver.copyDisk(path.join(rec.dir, rec.root_layers[rec.root_layers.length - 1]), tmp, {
              signal: th.signal,
              onProgress: (p) => th.progress(Math.floor(p * 0.95)),
            });
            await this.vms.step('template:copied');
            await fs.rename(tmp, file);
            const info = await this.vms.driver.imageInfo(file);
            const st = await fs.stat(file);
            const img: ImageRecord = {
              image_id: id,
              storage_id: pool.id,
              name,
              kind: 'template',
              file,
              size_bytes: st.blocks * 512,
              virtual_size_bytes: info.virtualSize,
              min_cpu_cores: src?.min_cpu_cores ?? 1,
              min_memory_mb: src?.min_memory_mb ?? 512,
              min_disk_gb: Math.ceil(info.virtualSize / GiB),
              default_user: src?.default_user ?? null,
              labels: { ...(src?.labels ?? {}) },
              source: { type: 'vm', vmid },
              created_at: now(),
            };
            await this.vms.step('template:placed');
            await this.vms.records.journal.commit(key, [this.vms.records.putImage(img)]);
            th.progress(100);
            return { image_id: id, storage_id: pool.id };
          } catch (err) {
            await fs.rm(tmp, { force: true });
            await fs.rm(file, { force: true });
            await this.vms.records.journal.drop(key);
            throw err;
          } finally {
            this.pending.delete(id);
            release();
          }
        },
      );
    } catch (err) {
      release();
      throw err;
    }
    ctx.note({ summary: `VM ${vmid} being captured as template ${id}`, target: `vms/${vmid}`, metadata: { vmid, image_id: id, task_id: task.task_id } });
    return { task, image_id: id };
  }

  /** Used by POST /templates: an id is free and reserved until `done` is called. */
  async reserve(id: string): Promise<() => void> {
    await this.freeId(id);
    this.pending.add(id);
    return () => this.pending.delete(id);
  }

  /** Records a finished template build's file (see templates.ts). */
  async addBuilt(rec: Omit<ImageRecord, 'size_bytes' | 'virtual_size_bytes'>, tmp: string, th: TaskHandle): Promise<ImageRecord> {
    return this.addImage(rec, tmp, th);
  }
}
