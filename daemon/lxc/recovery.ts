/**
 * What the LXC domain does at open, before it serves a call (daemon/lib's
 * IntentRecovery runs it): settle each change a crash left open by what the
 * disk shows, then reconcile what intents do not cover: empty every pool's
 * work dir, unmount mount-point staging a crash left mounted, and render
 * every container's config from its record (records are the truth).
 */
import path from 'node:path';
import type { JournalOp } from '../lib/journal.js';
import type { LxcContext } from './context.js';
import { LXC_NAME_PREFIX, lxcNameOf } from './naming.js';
import type { Intent } from './records.js';

export class Recovery {
  constructor(private readonly ctx: LxcContext) {}

  /** Finishes or undoes one interrupted change; the store writes of its outcome. */
  async settle(intent: Intent): Promise<JournalOp[]> {
    const { ctx: c } = this;
    const s = c.driver.storage;
    switch (intent.op) {
      case 'create':
        // The record is written in the same batch that drops the intent: an open one means no record.
        await c.removeContainerFiles(intent.dir, intent.lxcid, intent.zfs_dataset);
        return [];
      case 'delete':
        await c.removeContainerFiles(intent.dir, intent.lxcid, intent.zfs_dataset);
        return c.records.delOps(intent.lxcid);
      case 'move': {
        const rec = await c.records.get(intent.lxcid);
        if (!rec) return [];
        if (!(await s.exists(intent.from_dir)) && (await s.exists(intent.to_dir))) {
          // It had been renamed (same filesystem): finish the move.
          return [c.records.putOp({ ...rec, storage_id: intent.to_storage, updated_at: c.now() })];
        }
        await s.remove(intent.to_dir);
        return [];
      }
      case 'disk': {
        const rec = await c.records.get(intent.lxcid);
        if (!rec) return [];
        if (intent.new_path === intent.old_path) {
          await s.growDiskImage(intent.new_path, intent.disk_size_bytes);
          return [c.records.putOp({ ...rec, disk_size_bytes: intent.disk_size_bytes, updated_at: c.now() })];
        }
        if (await s.exists(intent.new_path)) {
          await s.remove(intent.new_path);
          return [];
        }
        // The new rootfs had been renamed into place: finish.
        const finalPath = intent.new_kind === 'loop' ? path.join(intent.dir, 'disk.img') : path.join(intent.dir, 'rootfs');
        if (await s.exists(finalPath)) {
          if (intent.old_path !== finalPath) await s.remove(intent.old_path);
          return [c.records.putOp({ ...rec, rootfs_kind: intent.new_kind, disk_size_bytes: intent.disk_size_bytes, updated_at: c.now() })];
        }
        return [];
      }
      case 'cleanup':
        for (const p of intent.paths) await s.remove(p);
        for (const ds of intent.zfs_datasets ?? []) await c.driver.zfs.destroy(ds);
        return [];
      case 'image':
        if ((await s.exists(intent.final)) && intent.remove_after) await s.remove(intent.remove_after);
        await s.remove(intent.tmp);
        return [];
    }
  }

  /** What a log line may say about an intent (its op and ids, never its paths' contents). */
  describe(intent: Intent): Record<string, unknown> {
    return 'lxcid' in intent ? { op: intent.op, lxcid: intent.lxcid } : { op: intent.op };
  }

  /** Work dirs emptied, stale staging unmounted, every config rendered from its record; orphan config dirs reported. */
  async reconcile(): Promise<void> {
    const { ctx: c } = this;
    for (const pool of c.pools) {
      await c.driver.storage.clearWorkDirs(pool.path).catch((err) => c.log.error({ err, pool: pool.id }, 'lxc: cannot empty a work dir'));
    }
    await c.driver.mounts.clearStale();
    const recs = await c.records.all();
    const names = new Set(recs.map((r) => lxcNameOf(r.lxcid)));
    for (const r of recs) {
      try {
        await c.writeConfig(r);
      } catch (err) {
        c.log.error({ err, lxcid: r.lxcid }, 'lxc: cannot write a container config');
      }
    }
    for (const dir of await c.driver.tools.listConfigDirs()) {
      if (dir.startsWith(LXC_NAME_PREFIX) && !names.has(dir)) c.log.warn({ dir }, 'lxc: a config dir under the lxc path has no record (left as it is)');
    }
  }
}
