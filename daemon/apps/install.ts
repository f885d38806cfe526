/**
 * apps_create: install an app from a template or custom compose content.
 *
 * Checked before anything is written (a bad file or assignment is a 400 with
 * nothing to undo), then the installing record and the intent in one batch,
 * then either `up` at once (every image present) or a task that pulls and then
 * starts. A failed install is rolled back: project, data directory, compose
 * directory and record.
 */
import crypto from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import { badRequest, conflict } from '../lib/errors.js';
import { startHolding } from '../lib/locked-task.js';
import { actorOf } from '../lib/operator.js';
import { parseCompose } from './compose/model.js';
import { appKey, type AppsContext, type Call } from './context.js';
import { apply, checkWithCompose, removeEverything, render, up, writeFiles } from './definition.js';
import { COMPOSE, ENGINE } from './driver.js';
import { imagesToPull, pullAll } from './images.js';
import { resolveMounts } from './mounts.js';
import { dataDirOf, projectName, slug } from './naming.js';
import type { AppRecord, Definition, ReservedPort } from './records.js';
import { CUSTOM, type AppTemplate } from './templates.js';
import { exists } from './tree.js';
import { view, viewOf } from './views.js';

const sha256 = (s: string) => crypto.createHash('sha256').update(s).digest('hex');

export async function installApp(c: AppsContext, args: ArgsOf<'apps_create'>, ctx: Call): Promise<ResultOf<'apps_create'>> {
  await c.ready([ENGINE, COMPOSE]);
  let template: AppTemplate | null = null;
  let content: string;
  if (args.template_id === CUSTOM) {
    if (args.compose_content === undefined) throw badRequest(`argument 'compose_content' is required when template_id is '${CUSTOM}'`);
    content = args.compose_content;
  } else {
    if (args.compose_content !== undefined) throw badRequest(`argument 'compose_content' is only for template_id '${CUSTOM}'`);
    template = await c.catalog.get(args.template_id);
    content = template.compose;
  }
  const pool = c.pool(args.storage_id);
  const name = args.name ?? template?.default_name ?? CUSTOM;
  const assignments = args.folder_assignments ?? [];

  // Id and ports are chosen and reserved (the installing record) under one lock.
  const { record, app } = await c.lock.run(
    ['apps:allocate'],
    async () => {
      const appId = await allocateId(c, name, args.name !== undefined);
      const dataDir = dataDirOf(pool.path, appId);
      if (await exists(dataDir)) throw conflict(`the data directory ${dataDir} of app '${appId}' already exists; move it away first`);
      const at = new Date().toISOString();
      const rec: AppRecord = {
        app_id: appId,
        name,
        template_id: args.template_id,
        storage_id: pool.id,
        data_dir: dataDir,
        project: projectName(appId),
        folder_assignments: assignments,
        ports: await allocatePorts(c, template),
        compose_sha256: sha256(content),
        generation: 1,
        desired_state: 'running',
        status: 'installing',
        task_id: null,
        created_at: at,
        updated_at: at,
      };
      // Checked before anything is written: a bad file or assignment is a 400 with nothing to undo.
      const parsed = parseCompose(content, c.env(rec), c.contentLabel(rec));
      await resolveMounts(c, assignments, parsed, template);
      await c.records.begin(appId, { op: 'install', app_id: appId, record: rec }, [
        c.records.putRecord(rec),
        c.records.putContent(appId, { content, sha256: rec.compose_sha256 }),
      ]);
      return { record: rec, app: parsed };
    },
    'install',
  );
  const appId = record.app_id;
  const def: Definition = { record, content: { content, sha256: record.compose_sha256 } };
  const note = (summary: string, extra: Record<string, unknown> = {}) =>
    ctx.note({
      summary,
      target: `apps/${appId}`,
      metadata: {
        app_id: appId,
        template_id: args.template_id,
        storage_id: pool.id,
        folder_assignments: assignments.length,
        images: [...new Set(app.images.map((i) => i.image))],
        ...extra,
      },
    });
  note(`Install app ${name} (${args.template_id})`);
  const release = c.states.releasing(appId, actorOf(ctx), c.lock.hold([appKey(appId)], 'install'));
  let images: string[];
  let installed: AppRecord | null = null;
  try {
    await c.pause('install.after-intent');
    images = await imagesToPull(c, app, c.contentLabel(record));
    // Rendering checks the host paths (inside the data directory, or a folder assignment).
    const rendered = await render(c, def);
    // With images to pull the file is applied later, in the task: compose checks it now, so that a bad file is a 400 here.
    if (images.length) await checkWithCompose(c, record, rendered);
    if (!images.length) {
      await writeFiles(c, appId, rendered);
      await up(c, record);
      await c.pause('install.after-up');
      installed = { ...record, status: 'installed' as const, updated_at: new Date().toISOString() };
      await c.states.commit(appId, actorOf(ctx), c.records.commitOps(appId, [c.records.putRecord(installed)]));
      await c.pause('install.committed');
    }
  } catch (err) {
    await undoInstall(c, record, actorOf(ctx)).catch((e) => c.log.error({ err: e, app_id: appId }, 'apps: install rollback failed; the next start settles it'));
    release();
    throw err;
  }
  if (installed) {
    release();
    await c.states.refresh(appId, actorOf(ctx));
    note(`Installed app ${name} (${args.template_id})`);
    return { app: await viewOf(c, installed), task: null };
  }
  // The task starts once its id is in the record, so that its own commit is the last write.
  let go!: () => void;
  const recorded = new Promise<void>((r) => (go = r));
  const task = startHolding(
    c.tasks,
    release,
    {
      kind: 'apps.app.install',
      title: `Install app ${name}: pull ${images.length} image${images.length === 1 ? '' : 's'} and start`,
      owner: actorOf(ctx),
      resource: `apps/${appId}`,
    },
    async (t) => {
      await recorded;
      try {
        await pullAll(c, images, t, 0, 90);
        t.log('starting the containers');
        await apply(c, def, t.signal);
        await c.pause('install.after-up');
        const done = { ...c.records.get(appId)!, status: 'installed' as const, task_id: null, updated_at: new Date().toISOString() };
        // The record and the state it settles in (`running`...) in one batch, before the lock is let go.
        await c.states.commit(appId, actorOf(ctx), c.records.commitOps(appId, [c.records.putRecord(done)]), true);
        await c.pause('install.committed');
        t.log('installed');
        return { app_id: appId };
      } catch (err) {
        t.log('install failed; removing what it made');
        await undoInstall(c, record, actorOf(ctx)).catch((e) =>
          c.log.error({ err: e, app_id: appId }, 'apps: install rollback failed; the next start settles it'),
        );
        throw new Error(`install of app '${appId}' rolled back: ${(err as Error).message}`);
      }
    },
  );
  note(`Installing app ${name} (${args.template_id}): pulling ${images.join(', ')}`, { task_id: task.task_id });
  const withTask = { ...record, task_id: task.task_id };
  try {
    await c.records.write([c.records.putRecord(withTask)]);
  } finally {
    go();
  }
  await c.states.refresh(appId, actorOf(ctx));
  return { app: view(c, withTask, []), task };
}

/** Removes everything an install made and forgets it (record, content, intent), with its `uninstalled` event when one was reported. */
async function undoInstall(c: AppsContext, r: AppRecord, actor: string): Promise<void> {
  await removeEverything(c, r);
  await c.states.commit(r.app_id, actor, c.records.commitOps(r.app_id, c.records.forget(r.app_id)), true);
}

/** The app id made from the name: the slug, or with `-2`, `-3` ... when taken (409 when the caller named it). */
async function allocateId(c: AppsContext, name: string, explicit: boolean): Promise<string> {
  const base = slug(name) || 'app';
  for (let n = 1; n < 1000; n++) {
    const id = n === 1 ? base : `${base}-${n}`;
    if (c.records.get(id) || (await exists(path.join(c.composeRoot, id)))) {
      if (explicit) throw conflict(`an app with the id '${id}' already exists (the id is made from the name '${name}')`);
      continue;
    }
    return id;
  }
  throw conflict(`no free app id for the name '${name}'`);
}

/** Host ports for the template's parameters: the default when free, else the next free one. */
async function allocatePorts(c: AppsContext, t: AppTemplate | null): Promise<ReservedPort[]> {
  if (!t || !t.ports.length) return [];
  const taken = new Set<string>();
  for (const r of c.records.all()) for (const p of r.ports) taken.add(`${p.protocol}/${p.host_port}`);
  for (const x of await c.driver.containers({})) for (const p of x.ports) taken.add(`${p.protocol}/${p.host_port}`);
  const out: ReservedPort[] = [];
  for (const p of t.ports) {
    let chosen = 0;
    for (let port = p.default, n = 0; n < 200 && port <= 65535; port++, n++) {
      if (taken.has(`${p.protocol}/${port}`)) continue;
      if (p.protocol === 'tcp' && !(await portFree(c.settings.publishAddress, port))) continue;
      chosen = port;
      break;
    }
    if (!chosen) throw conflict(`no free host port for ${p.name} of template '${t.template_id}' from ${p.default} on`);
    taken.add(`${p.protocol}/${chosen}`);
    out.push({ name: p.name, host_port: chosen, protocol: p.protocol });
  }
  return out;
}

function portFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}
