/**
 * A container's disk limit (`PATCH /lxc/{id}/disk`, container stopped): on
 * ZFS the clone's refquota; growing an ext4 image in place; otherwise the
 * rootfs is copied into a new image (or back into a directory) and renamed
 * over the old one. Crash-safe through the intent journal: recovery finishes
 * a grow, and rolls a copy back or finishes it once it was renamed in place.
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { NoteSink } from '../lib/caller.js';
import { conflict, errnoCode } from '../lib/errors.js';
import { NEEDS, type LxcContext } from './context.js';
import type { ContainerRecord } from './model.js';

export class Disk {
  constructor(private readonly ctx: LxcContext) {}

  async update(a: ArgsOf<'lxc_disk_update'>, ctx: NoteSink): Promise<ResultOf<'lxc_disk_update'>> {
    const { ctx: c } = this;
    await c.require(['lxc-info', ...NEEDS.disk]);
    const bytes = a.disk_size_bytes;
    return c.onContainer(a.id, 'disk change', async (cur) => {
      const st = await c.state(cur);
      if (st !== 'stopped') throw conflict(`container ${a.id} is ${st}; stop it to change its disk limit`);
      if (bytes === cur.disk_size_bytes) return { container: c.view(cur, st) };
      const rec: ContainerRecord = { ...structuredClone(cur), disk_size_bytes: bytes, updated_at: c.now() };
      const pool = c.pool(cur.storage_id);
      const p = c.paths(cur);
      const s = c.driver.storage;
      if (cur.rootfs_kind === 'zfs') {
        await c.driver.zfs.setRefquota(cur.zfs_dataset!, bytes);
        await c.records.put(rec);
      } else if (cur.rootfs_kind === 'loop' && bytes > cur.disk_size_bytes) {
        // Growing: in place (e2fsck + resize2fs); a crash is finished by recovery.
        await c.records.journal.run(
          `disk:${cur.lxcid}`,
          { op: 'disk', lxcid: cur.lxcid, dir: p.dir, new_kind: 'loop', new_path: p.img, old_path: p.img, disk_size_bytes: bytes },
          async () => {
            await s.growDiskImage(p.img, bytes);
          },
          { commit: () => [c.records.putOp(rec)] },
        );
      } else {
        await this.checkFits(cur, bytes);
        rec.rootfs_kind = bytes > 0 ? 'loop' : 'dir';
        const newPath = bytes > 0 ? p.img + '.new' : p.rootfs + '.new';
        const oldPath = cur.rootfs_kind === 'loop' ? p.img : p.rootfs;
        const finalPath = bytes > 0 ? p.img : p.rootfs;
        const tmp = await s.makeTmp(pool.path);
        await c.records.journal.run(
          `disk:${cur.lxcid}`,
          { op: 'disk', lxcid: cur.lxcid, dir: p.dir, new_kind: rec.rootfs_kind, new_path: newPath, old_path: oldPath, disk_size_bytes: bytes },
          async () => {
            try {
              if (bytes > 0) {
                await s.makeDiskImage(newPath, bytes, cur.idmap);
                await s.withMounted(newPath, tmp, false, async (dst) => {
                  await c.withRootfs(cur, true, (src) => s.copy(src + '/.', dst));
                });
              } else {
                await c.withRootfs(cur, true, (src) => s.copy(src, newPath));
              }
            } catch (err) {
              if (errnoCode(err) === 'ENOSPC' || /No space left/i.test((err as Error).message)) throw conflict(`the rootfs does not fit in ${bytes} bytes`);
              throw err;
            } finally {
              await s.remove(tmp);
            }
            await c.pause('disk.copied');
            await s.rename(newPath, finalPath);
          },
          {
            commit: () => [c.records.putOp(rec), ...(oldPath !== finalPath ? [c.cleanupOp([oldPath])] : [])],
            rollback: async () => s.remove(newPath),
          },
        );
        await c.writeConfig(rec);
        if (oldPath !== finalPath) await c.finishCleanup([oldPath]);
      }
      await c.writeConfig(rec);
      ctx.note({
        summary: `Set the disk limit of container ${a.id} '${cur.name}' to ${bytes ? `${bytes} bytes` : 'none'}`,
        target: `lxc/${a.id}`,
        metadata: { disk_size_bytes: bytes },
      });
      return { container: c.view(rec, 'stopped') };
    });
  }

  /** 409 when the rootfs already uses more than `bytes` (ext4 needs some room of its own). */
  private async checkFits(rec: ContainerRecord, bytes: number): Promise<void> {
    if (bytes === 0) return;
    const p = this.ctx.paths(rec);
    const s = this.ctx.driver.storage;
    const used = rec.rootfs_kind === 'loop' ? ((await s.imageUsage(p.img))?.used_bytes ?? null) : await s.treeUsage(p.rootfs);
    if (used !== null && used > bytes * 0.9)
      throw conflict(
        `the rootfs of container ${rec.lxcid} uses ${used} bytes; a limit of ${bytes} bytes cannot hold it (ext4 keeps about 10% for itself on small disks)`,
      );
  }
}
