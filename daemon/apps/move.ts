/**
 * apps_move: move an app's data directory to another pool, as a task. The app
 * is stopped, its containers, networks and volume objects removed (the data
 * stays), the directory copied into `<new pool>/.hostd-apps/<id>.moving-*`,
 * verified, renamed into place; then the record switches (new generation, and
 * the current project name) and the app comes up from its new place (started
 * if it was), and the old directory goes. A failure before the switch brings
 * the app back where it was.
 */
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { PoolConfig } from '../config.js';
import { conflict } from '../lib/errors.js';
import { startHolding } from '../lib/locked-task.js';
import { actorOf } from '../lib/operator.js';
import type { TaskHandle } from '../lib/tasks.js';
import { appKey, type AppsContext, type Call } from './context.js';
import { apply } from './definition.js';
import { COMPOSE, ENGINE } from './driver.js';
import { dataDirOf, projectName } from './naming.js';
import type { AppIntent, AppRecord } from './records.js';
import { requireAccepted } from './refusals.js';
import { copyTree, exists, totalBytes, verifyTree, walk } from './tree.js';
import { viewOf } from './views.js';

export async function moveApp(c: AppsContext, args: ArgsOf<'apps_move'>, ctx: Call): Promise<ResultOf<'apps_move'>> {
  await c.ready([ENGINE, COMPOSE]);
  const r = await c.settled(args.app_id);
  const pool = c.pool(args.storage_id);
  if (r.status === 'installing') throw conflict(`app '${r.app_id}' is still installing`);
  if (pool.id === r.storage_id) throw conflict(`app '${r.app_id}' is already in storage pool '${pool.id}'`);
  await requireAccepted(c, r);
  const target = dataDirOf(pool.path, r.app_id);
  if (await exists(target)) throw conflict(`the target directory ${target} already exists; move it away first`);
  const release = c.states.releasing(r.app_id, actorOf(ctx), c.lock.hold([appKey(r.app_id)], 'move'));
  const task = startHolding(
    c.tasks,
    release,
    { kind: 'apps.app.move', title: `Move app ${r.name} from pool ${r.storage_id} to ${pool.id}`, owner: actorOf(ctx), resource: `apps/${r.app_id}` },
    (t) => runMove(c, r.app_id, pool, target, t, actorOf(ctx)),
  );
  await c.states.refresh(r.app_id, actorOf(ctx));
  ctx.note({
    summary: `Moving app ${r.name} from pool ${r.storage_id} to ${pool.id}`,
    target: `apps/${r.app_id}`,
    metadata: { app_id: r.app_id, from: r.storage_id, to: pool.id, task_id: task.task_id },
  });
  return { app: await viewOf(c, r), task };
}

/** Each commit of the move's outcome carries the state the app settles in (`states.commit`, settling): one batch. */
async function runMove(c: AppsContext, appId: string, pool: PoolConfig, target: string, t: TaskHandle, actor: string): Promise<unknown> {
  const commit = (rec: AppRecord) => c.states.commit(appId, actor, c.records.commitOps(appId, [c.records.putRecord(rec)]), true);
  const before = c.record(appId);
  const content = await c.records.contentOf(appId);
  const after: AppRecord = {
    ...before,
    storage_id: pool.id,
    data_dir: target,
    project: projectName(appId),
    generation: before.generation + 1,
    task_id: null,
    updated_at: new Date().toISOString(),
  };
  const staging = `${target}.moving-${crypto.randomBytes(4).toString('hex')}`;
  const wasRunning = before.desired_state === 'running';
  const intent: AppIntent = { op: 'move', app_id: appId, phase: 'copy', before, after, was_running: wasRunning, staging };
  await c.records.begin(appId, intent, [c.records.putRecord({ ...before, task_id: t.id })]);
  let switched = false;
  try {
    t.log('stopping the app');
    await c.driver.stop(c.ref(before));
    // Containers, networks and volume objects go; the volumes' data stays in the data directory.
    await c.driver.remove(before.project);
    await c.pause('move.after-stop');
    const entries = await walk(before.data_dir, t.signal);
    const total = totalBytes(entries);
    t.log(`copying ${entries.size} entries (${total} bytes) to ${target}`);
    await fs.mkdir(path.dirname(target), { recursive: true });
    await copyTree(before.data_dir, staging, total, (b) => t.progress(total ? (b / total) * 60 : 60), t.signal);
    t.log('verifying the copy');
    const v = await verifyTree(before.data_dir, staging, (b) => t.progress(60 + (total ? (b / total) * 30 : 30)), t.signal);
    t.log(`verified ${v.files} files (${v.bytes} bytes)`);
    await fs.rename(staging, target);
    await c.pause('move.after-copy');
    await c.records.advance(appId, { ...intent, phase: 'switch' }, [c.records.putRecord({ ...after, task_id: t.id })]);
    switched = true;
    await c.pause('move.after-switch');
    t.log(wasRunning ? 'starting the app from its new place' : 'creating the containers (the app stays stopped)');
    await apply(c, { record: after, content }, t.signal);
    await fs.rm(before.data_dir, { recursive: true, force: true });
    await commit(after);
    await c.pause('move.committed');
    t.log('moved');
    return { app_id: appId, storage_id: pool.id, data_dir: target, files: v.files, bytes: v.bytes };
  } catch (err) {
    if (!switched) {
      t.log('move failed; the app stays where it was');
      await fs.rm(staging, { recursive: true, force: true }).catch(() => undefined);
      await fs.rm(target, { recursive: true, force: true }).catch(() => undefined);
      const back = { ...before, task_id: null };
      await apply(c, { record: back, content }).catch((e) => c.log.error({ err: e, app_id: appId }, 'apps: restarting the app after a failed move failed'));
      await commit(back);
    } else {
      // The data is in its new place and the record says so: keep that, and let a later start bring the containers up.
      await fs.rm(before.data_dir, { recursive: true, force: true }).catch(() => undefined);
      await commit(after);
    }
    throw err;
  }
}
