/**
 * apps_compose_update and apps_folders_update: a change of an app's
 * definition. Checked (400/404) before anything is written, then intent,
 * files, `up`, record; missing images make it a task (pull, then apply). A
 * failure puts the previous definition back. Each change bumps the generation
 * and gives an app of the first naming scheme its current project name.
 */
import crypto from 'node:crypto';
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import { conflict } from '../lib/errors.js';
import { startHolding } from '../lib/locked-task.js';
import { actorOf } from '../lib/operator.js';
import { appKey, type AppsContext, type Call } from './context.js';
import { apply, checkWithCompose, render, up, writeFiles, type Rendering } from './definition.js';
import { COMPOSE, ENGINE } from './driver.js';
import { imagesToPull, pullAll } from './images.js';
import { projectName } from './naming.js';
import type { AppContent, AppRecord, Definition } from './records.js';
import { requireAccepted } from './refusals.js';
import { viewOf } from './views.js';

type UpdateResult = ResultOf<'apps_compose_update'>;

export async function updateCompose(c: AppsContext, args: ArgsOf<'apps_compose_update'>, ctx: Call): Promise<ResultOf<'apps_compose_update'>> {
  await c.ready([ENGINE, COMPOSE]);
  const r = await c.settled(args.app_id);
  const content: AppContent = { content: args.compose_content, sha256: crypto.createHash('sha256').update(args.compose_content).digest('hex') };
  const res = await update(c, r, 'compose', (cur) => ({ record: { ...cur, compose_sha256: content.sha256 }, content }), ctx);
  ctx.note({
    summary: `Updated the compose file of app ${r.name}`,
    target: `apps/${r.app_id}`,
    metadata: { app_id: r.app_id, compose_sha256: content.sha256, generation: res.app.generation, task_id: res.task?.task_id ?? null },
  });
  return res;
}

export async function updateFolders(c: AppsContext, args: ArgsOf<'apps_folders_update'>, ctx: Call): Promise<ResultOf<'apps_folders_update'>> {
  await c.ready([ENGINE, COMPOSE]);
  const r = await c.settled(args.app_id);
  if (args.folder_assignments === undefined || args.folder_assignments === null) return { app: await viewOf(c, r), task: null };
  const list = args.folder_assignments;
  await requireAccepted(c, r);
  const res = await update(c, r, 'folders', (cur, content) => ({ record: { ...cur, folder_assignments: list }, content }), ctx);
  ctx.note({
    summary: `Updated the folder mounts of app ${r.name} (${list.length})`,
    target: `apps/${r.app_id}`,
    metadata: { app_id: r.app_id, folder_assignments: list, generation: res.app.generation },
  });
  return res;
}

async function update(
  c: AppsContext,
  r: AppRecord,
  what: 'compose' | 'folders',
  change: (cur: AppRecord, content: AppContent) => Definition,
  ctx: Call,
): Promise<UpdateResult> {
  const release = c.states.releasing(r.app_id, actorOf(ctx), c.lock.hold([appKey(r.app_id)], `${what} update`));
  let pulls: string[] = [];
  let before!: Definition;
  let after!: Definition;
  try {
    const cur = c.record(r.app_id);
    if (cur.status === 'installing') throw conflict(`app '${r.app_id}' is still installing`);
    before = { record: cur, content: await c.records.contentOf(r.app_id) };
    const next = change(cur, before.content);
    after = {
      record: { ...next.record, project: projectName(cur.app_id), generation: cur.generation + 1, updated_at: new Date().toISOString() },
      content: next.content,
    };
    const rendered = await render(c, after);
    pulls = await imagesToPull(c, rendered.app, c.contentLabel(after.record));
    if (pulls.length) await checkWithCompose(c, after.record, rendered);
    if (!pulls.length) {
      await commitUpdate(c, what, before, after, rendered, actorOf(ctx));
      release();
      await c.states.refresh(r.app_id, actorOf(ctx));
      return { app: await viewOf(c, after.record), task: null };
    }
  } catch (err) {
    release();
    throw err;
  }
  const task = startHolding(
    c.tasks,
    release,
    {
      kind: 'apps.app.update',
      title: `Update app ${r.name}: pull ${pulls.length} image${pulls.length === 1 ? '' : 's'} and apply`,
      owner: actorOf(ctx),
      resource: `apps/${r.app_id}`,
    },
    async (t) => {
      await pullAll(c, pulls, t, 0, 90);
      t.log('applying the new definition');
      await commitUpdate(c, what, before, after, await render(c, after), actorOf(ctx), t.signal);
      return { app_id: r.app_id, generation: after.record.generation };
    },
  );
  await c.states.refresh(r.app_id, actorOf(ctx));
  return { app: await viewOf(c, before.record), task };
}

async function commitUpdate(
  c: AppsContext,
  what: 'compose' | 'folders',
  before: Definition,
  after: Definition,
  rendered: Rendering,
  actor: string,
  signal?: AbortSignal,
): Promise<void> {
  const appId = after.record.app_id;
  await c.records.begin(appId, { op: 'update', app_id: appId, what, before, after });
  try {
    await writeFiles(c, appId, rendered);
    await c.pause('update.after-files');
    await up(c, after.record, signal);
    await c.pause('update.after-up');
  } catch (err) {
    try {
      await apply(c, before);
      await c.records.journal.drop(appId);
    } catch (e) {
      c.log.error({ err: e, app_id: appId }, 'apps: putting the previous definition back failed; the next start settles it');
    }
    throw err;
  }
  // The new definition and the state it leaves the app in (`updating` ends with the call): one batch.
  await c.states.commit(appId, actor, c.records.commitOps(appId, [c.records.putRecord(after.record), c.records.putContent(appId, after.content)]), true);
  await c.pause('update.committed');
}
