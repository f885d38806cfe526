/**
 * Capturing a stopped container's rootfs as a template image
 * (`POST /lxc/{id}/template`), as a task that holds the container and the new
 * image id: packed with the ids as the container sees them, zstd where the
 * host has it (else gzip), and staged into place like every image.
 */
import path from 'node:path';
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { CallContext } from '../lib/caller.js';
import { conflict } from '../lib/errors.js';
import { lockedTask } from '../lib/locked-task.js';
import { actorOf } from '../lib/operator.js';
import type { LxcContext } from './context.js';
import type { Compression } from './driver.js';
import { imageKey, stageImage } from './images.js';
import { imageIdFromName } from './naming.js';

export class Templates {
  constructor(private readonly ctx: LxcContext) {}

  async capture(a: ArgsOf<'lxc_template_create'>, ctx: CallContext): Promise<ResultOf<'lxc_template_create'>> {
    const { ctx: c } = this;
    await c.require(['tar', 'bash', 'lxc-usernsexec', 'lxc-info']);
    const rec = await c.record(a.id);
    const id = a.image_id ?? imageIdFromName(rec.name, rec.lxcid);
    const pool = c.pool(rec.storage_id);
    if (await c.driver.images.get(pool, id)) throw conflict(`image '${id}' exists on storage '${pool.id}' already`);
    const st = await c.state(rec);
    if (st !== 'stopped') throw conflict(`container ${a.id} is ${st}; stop it to capture a consistent template`);
    const comp: Compression = (await c.driver.availability()).find((p) => p.name === 'zstd')?.available ? 'zstd' : 'gzip';
    const task = lockedTask(
      c.lock,
      c.tasks,
      [`ct:${a.id}`, imageKey(pool.id, id)],
      'template capture',
      {
        kind: 'lxc.template.capture',
        title: `Capture container ${a.id} as image ${id}`,
        owner: actorOf(ctx),
        resource: `lxc/images/${id}`,
      },
      async (t) => {
        const fresh = await c.record(a.id);
        if ((await c.state(fresh)) !== 'stopped') throw conflict(`container ${a.id} was started meanwhile`);
        return stageImage(
          c,
          pool,
          id,
          t,
          async (work) => {
            const file = path.join(work, comp === 'zstd' ? 'rootfs.tar.zst' : 'rootfs.tar.gz');
            t.log(`packing the rootfs of container ${a.id}`);
            t.progress(5);
            await c.withRootfs(fresh, true, (root) => c.driver.storage.pack(root, file, fresh.idmap, comp, t.signal));
            t.progress(90);
            const dg = await c.driver.images.digest(file);
            t.log(`${dg.size_bytes} bytes, SHA-256 ${dg.sha256}`);
            return {
              image_id: id,
              source: 'template',
              file: path.basename(file),
              compression: comp,
              ...dg,
              created_at: c.now(),
              from_lxcid: fresh.lxcid,
              from_name: fresh.name,
              from_privileged: fresh.privileged,
              min_cpu_cores: fresh.cpu_cores,
              min_memory_mb: fresh.memory_mb,
              disk_size_bytes: fresh.disk_size_bytes || undefined,
            };
          },
          'template.packed',
        );
      },
    );
    ctx.note({
      summary: `Capturing container ${a.id} '${rec.name}' as image '${id}'`,
      target: `lxc/images/${id}`,
      metadata: { task_id: task.task_id, storage_id: pool.id },
    });
    return { task };
  }
}
