/**
 * Moving a stopped container's rootfs to another pool, as a task that holds
 * the container until it ends: a rename on one filesystem, else a copy whose
 * source is removed once the move is committed (a clean-up intent in the
 * commit batch finishes that removal after a crash).
 */
import path from 'node:path';
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import { actorOf } from '../lib/operator.js';
import type { CallContext } from '../lib/caller.js';
import { conflict } from '../lib/errors.js';
import { lockedTask } from '../lib/locked-task.js';
import type { LxcContext } from './context.js';
import type { ContainerRecord } from './model.js';

export class Move {
  constructor(private readonly ctx: LxcContext) {}

  async move(a: ArgsOf<'lxc_move'>, ctx: CallContext): Promise<ResultOf<'lxc_move'>> {
    const { ctx: c } = this;
    await c.require(['lxc-info', 'tar']);
    const rec = await c.record(a.id);
    const to = c.pool(a.storage_id);
    if (to.id === rec.storage_id) throw conflict(`container ${a.id} is on storage '${to.id}' already`);
    if (rec.linked_clone) throw conflict(`container ${a.id} is a linked clone of image '${rec.template}' and cannot leave its ZFS pool`);
    const st = await c.state(rec);
    if (st !== 'stopped') throw conflict(`container ${a.id} is ${st}; stop it before moving its rootfs`);
    const from = c.pool(rec.storage_id);
    const task = lockedTask(
      c.lock,
      c.tasks,
      [`ct:${a.id}`],
      'move',
      {
        kind: 'lxc.container.move',
        title: `Move container ${a.id} to storage ${to.id}`,
        owner: actorOf(ctx),
        resource: `lxc/${a.id}`,
      },
      async (t) => {
        const fresh = await c.record(a.id);
        if (fresh.storage_id !== from.id) throw conflict(`container ${a.id} moved meanwhile`);
        const s = c.driver.storage;
        const fromDir = s.containerPaths(from.path, a.id).dir;
        const toDir = s.containerPaths(to.path, a.id).dir;
        await s.preparePool(to.path);
        if (fresh.idmap) await s.ensureTraversable(path.dirname(toDir), fresh.idmap.uid);
        const total = (await s.treeUsage(fromDir, t.signal)) ?? 0;
        t.log(`moving ${total} bytes from ${from.id} to ${to.id}`);
        const moved: ContainerRecord = { ...fresh, storage_id: to.id, updated_at: c.now() };
        let how: 'renamed' | 'copied' = 'copied';
        await c.records.journal.run(
          `move:${a.id}`,
          { op: 'move', lxcid: a.id, from_storage: from.id, to_storage: to.id, from_dir: fromDir, to_dir: toDir },
          async () => {
            await s.remove(toDir);
            how = await s.relocate(fromDir, toDir, t.signal, (n) => t.progress(total ? Math.min(95, (n / total) * 95) : 50));
            await c.pause('move.copied');
          },
          {
            commit: () => [c.records.putOp(moved), ...(how === 'copied' ? [c.cleanupOp([fromDir])] : [])],
            rollback: async () => {
              if (how === 'renamed' || !(await s.exists(fromDir))) await s.rename(toDir, fromDir);
              else await s.remove(toDir);
            },
          },
        );
        await c.writeConfig(moved);
        await c.pause('move.committed');
        if (how === 'copied') await c.finishCleanup([fromDir]);
        t.log(`moved (${how})`);
        return { lxcid: a.id, storage_id: to.id };
      },
    );
    ctx.note({
      summary: `Moving container ${a.id} '${rec.name}' to storage '${to.id}'`,
      target: `lxc/${a.id}`,
      metadata: { task_id: task.task_id, from: rec.storage_id, to: to.id },
    });
    return { task };
  }
}
