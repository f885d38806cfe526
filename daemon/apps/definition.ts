/**
 * From a definition (an app's record and compose content) to the engine:
 * parse and check it, resolve its folder assignments, render the file compose
 * runs, write it, and bring the project to it. Every start, update, move and
 * recovery goes through here, so confinement is checked again each time
 * containers may be (re-)created.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { parseCompose, type AppCompose } from './compose/model.js';
import { renderCompose } from './compose/render.js';
import type { AppsContext } from './context.js';
import { resolveMounts } from './mounts.js';
import type { AppRecord, Definition } from './records.js';
import { CUSTOM, type AppTemplate } from './templates.js';

export interface Rendering {
  app: AppCompose;
  text: string;
  files: Map<string, string>;
}

/** The app's template, or null (custom content, or a template removed from the directory since: its folders by service name only). */
export async function templateOf(c: AppsContext, r: AppRecord): Promise<AppTemplate | null> {
  if (r.template_id === CUSTOM) return null;
  try {
    return await c.catalog.get(r.template_id);
  } catch {
    return null;
  }
}

/** Parses and renders a definition (400/404 on bad content or assignments); writes nothing but directories inside the data dir. */
export async function render(c: AppsContext, def: Definition): Promise<Rendering> {
  const r = def.record;
  const label = c.contentLabel(r);
  const app = parseCompose(def.content.content, c.env(r), label);
  const mounts = await resolveMounts(c, r.folder_assignments, app, await templateOf(c, r));
  await fs.mkdir(r.data_dir, { recursive: true, mode: 0o755 });
  const out = await renderCompose(
    { app, appId: r.app_id, generation: r.generation, dataDir: r.data_dir, mounts, label, env: c.env(r) },
    c.files(r.app_id).files,
  );
  return { app, ...out };
}

/** Writes the rendered files (the compose file last, by rename). */
export async function writeFiles(c: AppsContext, appId: string, rendered: Pick<Rendering, 'text' | 'files'>): Promise<void> {
  const f = c.files(appId);
  await fs.mkdir(f.files, { recursive: true, mode: 0o700 });
  await fs.chmod(f.root, 0o700);
  await fs.writeFile(f.envFile, '', { mode: 0o600 });
  const keep = new Set(rendered.files.keys());
  for (const [name, content] of rendered.files) await fs.writeFile(path.join(f.files, name), content, { mode: 0o644 });
  for (const name of await fs.readdir(f.files)) if (!keep.has(name)) await fs.rm(path.join(f.files, name), { force: true });
  const tmp = `${f.file}.tmp`;
  await fs.writeFile(tmp, rendered.text, { mode: 0o600 });
  await fs.rename(tmp, f.file);
}

/** Compose's own validation of a rendering, from a scratch file beside the real one. */
export async function checkWithCompose(c: AppsContext, r: AppRecord, rendered: Pick<Rendering, 'text' | 'files'>): Promise<void> {
  const f = c.files(r.app_id);
  await fs.mkdir(f.files, { recursive: true, mode: 0o700 });
  await fs.writeFile(f.envFile, '', { mode: 0o600 });
  for (const [name, content] of rendered.files) await fs.writeFile(path.join(f.files, name), content, { mode: 0o644 });
  const scratch = path.join(f.root, 'compose.check.json');
  await fs.writeFile(scratch, rendered.text, { mode: 0o600 });
  try {
    await c.driver.check({ ...c.ref(r), file: scratch });
  } finally {
    await fs.rm(scratch, { force: true });
  }
}

/**
 * Brings the engine to a written rendering: `up` (or create only when the
 * app is stopped). An app has one project: one left under another name (the
 * first naming scheme, or the other side of a rename that a failure undid)
 * is removed first, its data staying in the data directory.
 */
export async function up(c: AppsContext, r: AppRecord, signal?: AbortSignal): Promise<void> {
  const others = new Set((await c.driver.containers({ appId: r.app_id })).map((x) => x.project).filter((p): p is string => p !== null && p !== r.project));
  for (const p of others) await c.driver.remove(p);
  await c.driver.up(c.ref(r), { start: r.desired_state === 'running' }, signal);
}

/** Renders, writes and brings the project to the definition. */
export async function apply(c: AppsContext, def: Definition, signal?: AbortSignal): Promise<AppCompose> {
  const rendered = await render(c, def);
  await writeFiles(c, def.record.app_id, rendered);
  await up(c, def.record, signal);
  return rendered.app;
}

/** What an uninstall removes: the project on the engine (by its label), the data directory and the compose directory. */
export async function removeEverything(c: AppsContext, r: AppRecord): Promise<void> {
  await c.driver.remove(r.project);
  await fs.rm(r.data_dir, { recursive: true, force: true });
  await fs.rm(c.files(r.app_id).root, { recursive: true, force: true });
}
