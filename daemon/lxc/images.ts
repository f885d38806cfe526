/**
 * Template images on the pools: the list, the image server's catalog,
 * downloads and imports (tasks), deletes and moves between pools (a task).
 * An image appears only by an atomic rename of a finished work dir
 * (`stageImage`, which template captures use too), and it cannot be deleted
 * or moved while a create reads it, another change of it runs, or linked
 * clones depend on it.
 */
import path from 'node:path';
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { PoolConfig } from '../config.js';
import { adminArgs } from '../lib/admin-args.js';
import type { CallContext, NoteSink } from '../lib/caller.js';
import { badRequest, conflict, errnoCode, notFound } from '../lib/errors.js';
import { lockedTask } from '../lib/locked-task.js';
import { actorOf, OPERATOR } from '../lib/operator.js';
import type { TaskHandle, TaskRecord } from '../lib/tasks.js';
import type { LxcContext } from './context.js';
import type { ImageMeta, ImageRef } from './driver.js';
import { isImageId } from './naming.js';

type ImageView = ResultOf<'lxc_images_list'>['images'][number];

const NO_SERVER = 'no image server is configured (set lxc.image_server to a simplestreams URL)';

/** `img:<pool>:<id>`: the lock key of an image, one per pool. */
export const imageKey = (storageId: string, imageId: string) => `img:${storageId}:${imageId}`;

/**
 * Fills a work dir in the pool (through `fill`), writes image.json and
 * renames it into place; the intent lets recovery remove a half-filled one.
 */
export async function stageImage(
  c: LxcContext,
  pool: PoolConfig,
  id: string,
  t: TaskHandle,
  fill: (work: string) => Promise<ImageMeta>,
  pauseStep: string,
): Promise<{ image_id: string; storage_id: string }> {
  const s = c.driver.storage;
  await s.preparePool(pool.path);
  const work = await s.makeTmp(pool.path);
  const final = c.driver.images.dirOf(pool, id);
  await c.records.journal.run(
    `image:${pool.id}:${id}`,
    { op: 'image', tmp: work, final },
    async () => {
      const meta = await fill(work);
      await c.driver.images.writeMeta(work, meta);
      await c.pause(pauseStep);
      try {
        await c.driver.images.install(work, pool, id);
      } catch (err) {
        if (errnoCode(err) === 'EEXIST' || errnoCode(err) === 'ENOTEMPTY') throw conflict(`image '${id}' appeared on storage '${pool.id}' meanwhile`);
        throw err;
      }
    },
    { commit: () => [], rollback: async () => s.remove(work) },
  );
  t.progress(100);
  t.log(`image ${id} is on storage ${pool.id}`);
  return { image_id: id, storage_id: pool.id };
}

/** Progress of a copy or download as whole percents up to 95, reported once each. */
function percentOf(t: TaskHandle): (bytes: number, total: number) => void {
  let last = -1;
  return (n, total) => {
    const pct = Math.floor((n / Math.max(1, total)) * 95);
    if (pct !== last) {
      last = pct;
      t.progress(pct);
    }
  };
}

export class Images {
  constructor(private readonly ctx: LxcContext) {}

  async list(): Promise<ResultOf<'lxc_images_list'>> {
    const refs = await this.ctx.driver.images.list();
    return { images: await Promise.all(refs.map((r) => this.view(r))) };
  }

  async catalog(): Promise<ResultOf<'lxc_images_catalog'>> {
    const server = this.ctx.settings.imageServer;
    if (!server) return { server: null, images: [], reason: NO_SERVER };
    const entries = await this.ctx.driver.images.catalog(server);
    const cached = await this.ctx.driver.images.list();
    return {
      server,
      images: entries.map((e) => ({
        image_id: e.image_id,
        product: e.product,
        os: e.os,
        release: e.release,
        arch: e.arch,
        variant: e.variant,
        version: e.version,
        aliases: e.aliases,
        size_bytes: e.size_bytes,
        sha256: e.sha256,
        cached_on: cached.filter((c) => c.meta.image_id === e.image_id).map((c) => c.storage_id),
      })),
    };
  }

  async download(a: ArgsOf<'lxc_images_download'>, ctx: CallContext): Promise<ResultOf<'lxc_images_download'>> {
    const { ctx: c } = this;
    const id = a.image_id;
    const pool = c.pool(a.storage_id ?? c.settings.imageStorage);
    const server = c.settings.imageServer;
    if (!server) throw notFound(`image '${id}' is not in the catalog: ${NO_SERVER}`);
    const entry = (await c.driver.images.catalog(server)).find((e) => e.image_id === id);
    if (!entry) throw notFound(`image '${id}' is not in the catalog of ${server}`);
    if (await c.driver.images.get(pool, id)) throw conflict(`image '${id}' is on storage '${pool.id}' already`);
    const url = c.driver.images.fileUrl(server, entry);
    const task = lockedTask(
      c.lock,
      c.tasks,
      [imageKey(pool.id, id)],
      'download',
      {
        kind: 'lxc.image.download',
        title: `Download LXC image ${id} to ${pool.id}`,
        owner: actorOf(ctx),
        resource: `lxc/images/${id}`,
      },
      async (t) =>
        stageImage(
          c,
          pool,
          id,
          t,
          async (work) => {
            const file = path.join(work, 'rootfs' + (entry.file.ftype.match(/\.tar(\.\w+)?$/)?.[0] ?? '.tar.xz'));
            t.log(`downloading ${new URL(url).pathname} (${entry.size_bytes} bytes, SHA-256 ${entry.sha256})`);
            const compression = await c.driver.images.download(url, file, { sha256: entry.sha256, size: entry.size_bytes }, t.signal, percentOf(t));
            t.log('checksum verified');
            return {
              image_id: id,
              source: 'download',
              file: path.basename(file),
              compression,
              size_bytes: entry.size_bytes,
              sha256: entry.sha256,
              created_at: c.now(),
              os: entry.os,
              release: entry.release,
              arch: entry.arch,
              variant: entry.variant,
              version: entry.version,
              product: entry.product,
            };
          },
          'download.fetched',
        ),
    );
    ctx.note({
      summary: `Downloading LXC image '${id}' to storage '${pool.id}'`,
      target: `lxc/images/${id}`,
      metadata: { task_id: task.task_id, storage_id: pool.id },
    });
    return { task };
  }

  /** hostctl lxc image import (the admin socket): a local rootfs tarball into a pool, as a task the operator owns. */
  async import(body: Record<string, unknown>): Promise<{ task: TaskRecord }> {
    const { ctx: c } = this;
    const args = adminArgs(body);
    const src = args.str('path', true);
    if (!path.isAbsolute(src)) throw badRequest("argument 'path' must be an absolute path to a rootfs tarball");
    const id = args.str('image_id', true);
    if (!isImageId(id)) throw badRequest("argument 'image_id' must be 1-64 of [A-Za-z0-9_.-], starting with a letter or digit, without '..'");
    const pool = c.pool(args.str('storage_id') ?? c.settings.imageStorage);
    await c.driver.images.checkSource(src);
    if (await c.driver.images.get(pool, id)) throw conflict(`image '${id}' is on storage '${pool.id}' already`);
    const task = lockedTask(
      c.lock,
      c.tasks,
      [imageKey(pool.id, id)],
      'import',
      {
        kind: 'lxc.image.import',
        title: `Import LXC image ${id} to ${pool.id}`,
        owner: OPERATOR,
        resource: `lxc/images/${id}`,
      },
      async (t) =>
        stageImage(
          c,
          pool,
          id,
          t,
          async (work) => {
            t.log(`copying ${src}`);
            const b = await c.driver.images.importFile(src, work, t.signal, percentOf(t));
            t.log(`${b.size_bytes} bytes, SHA-256 ${b.sha256}`);
            return { image_id: id, source: 'import', ...b, created_at: c.now() };
          },
          'import.copied',
        ),
    );
    return { task };
  }

  async delete(a: ArgsOf<'lxc_images_delete'>, ctx: NoteSink): Promise<ResultOf<'lxc_images_delete'>> {
    const { ctx: c } = this;
    const id = a.image_id;
    const pool = c.pool(a.storage_id);
    const ref = await c.driver.images.get(pool, id);
    if (!ref) throw notFound(`image '${id}' not found on storage '${pool.id}'`);
    await this.refuseInUse(pool.id, id);
    return c.lock.exclusive([imageKey(pool.id, id)], 'delete', async () => {
      await c.driver.images.remove(ref, pool);
      ctx.note({ summary: `Deleted LXC image '${id}' from storage '${pool.id}'`, target: `lxc/images/${id}` });
      return { deleted: { image_id: id, storage_id: pool.id } };
    });
  }

  async move(a: ArgsOf<'lxc_images_move'>, ctx: CallContext): Promise<ResultOf<'lxc_images_move'>> {
    const { ctx: c } = this;
    const id = a.image_id;
    const from = c.pool(a.source_storage_id, 'source_storage_id');
    const to = c.pool(a.target_storage_id, 'target_storage_id');
    if (from.id === to.id) throw badRequest("arguments 'source_storage_id' and 'target_storage_id' name the same storage");
    const ref = await c.driver.images.get(from, id);
    if (!ref) throw notFound(`image '${id}' not found on storage '${from.id}'`);
    if (await c.driver.images.get(to, id)) throw conflict(`image '${id}' exists on storage '${to.id}' already`);
    await this.refuseInUse(from.id, id);
    const task = lockedTask(
      c.lock,
      c.tasks,
      [imageKey(from.id, id), imageKey(to.id, id)],
      'move',
      {
        kind: 'lxc.image.move',
        title: `Move LXC image ${id} from ${from.id} to ${to.id}`,
        owner: actorOf(ctx),
        resource: `lxc/images/${id}`,
      },
      async (t) => {
        const s = c.driver.storage;
        await s.preparePool(to.path);
        const work = await s.makeTmp(to.path);
        const final = c.driver.images.dirOf(to, id);
        const total = ref.meta.size_bytes || 1;
        await c.records.journal.run(
          `image:${to.id}:${id}`,
          { op: 'image', tmp: work, final, remove_after: ref.dir },
          async () => {
            await s.copy(ref.dir, path.join(work, 'img'), t.signal, (n) => t.progress(Math.min(90, (n / total) * 90)));
            await c.pause('image-move.copied');
            await c.driver.images.install(path.join(work, 'img'), to, id);
            await s.remove(ref.dir);
            await s.remove(work);
          },
          { commit: () => [], rollback: async () => s.remove(work) },
        );
        t.log(`moved image ${id} to ${to.id}`);
        return { image_id: id, storage_id: to.id };
      },
    );
    ctx.note({ summary: `Moving LXC image '${id}' from '${from.id}' to '${to.id}'`, target: `lxc/images/${id}`, metadata: { task_id: task.task_id } });
    return { task };
  }

  /** Linked clones that depend on the image (it cannot be deleted or moved while they exist). */
  private async dependents(storageId: string, imageId: string): Promise<number[]> {
    return (await this.ctx.records.all()).filter((r) => r.linked_clone && r.template === imageId && r.template_storage_id === storageId).map((r) => r.lxcid);
  }

  private async refuseInUse(storageId: string, id: string): Promise<void> {
    const key = imageKey(storageId, id);
    const busy = this.ctx.lock.busy(key);
    if (busy) throw conflict(`image '${id}' on storage '${storageId}' is busy: ${busy} in progress`);
    if (this.ctx.isImageRead(key)) throw conflict(`image '${id}' on storage '${storageId}' is in use by a container create in progress`);
    const deps = await this.dependents(storageId, id);
    if (deps.length) throw conflict(`image '${id}' on storage '${storageId}' is the base of linked clone(s) ${deps.join(', ')}; delete them first`);
  }

  private async view(ref: ImageRef): Promise<ImageView> {
    const m = ref.meta;
    return {
      image_id: m.image_id,
      storage_id: ref.storage_id,
      source: m.source,
      size_bytes: m.size_bytes,
      sha256: m.sha256,
      compression: m.compression,
      created_at: m.created_at,
      os: m.os ?? null,
      release: m.release ?? null,
      arch: m.arch ?? null,
      variant: m.variant ?? null,
      version: m.version ?? null,
      from_lxcid: m.from_lxcid ?? null,
      used_by: await this.dependents(ref.storage_id, m.image_id),
    };
  }
}
