/**
 * The apps collection's reads: apps_list (installed apps), apps_templates_list
 * (what can be installed) and apps_discovered_list (containers on the engine
 * that no app owns).
 */
import type { ResultOf } from '../../api/registry/index.js';
import type { AppsContext } from './context.js';
import { ENGINE } from './driver.js';
import { refusalOf } from './refusals.js';
import { view } from './views.js';

/** Every app, with one engine call for all of them. */
export async function listApps(c: AppsContext): Promise<ResultOf<'apps_list'>> {
  await c.ready([ENGINE]);
  const cs = await c.driver.containers({});
  const all = c.records.all();
  await Promise.all(all.filter((r) => r.status === 'installed').map((r) => refusalOf(c, r).catch(() => null)));
  return { apps: all.map((r) => view(c, r, cs)) };
}

/** The bundled templates and those of apps.templates_dir, read anew (a new file shows without a restart). */
export async function listTemplates(c: AppsContext): Promise<ResultOf<'apps_templates_list'>> {
  await c.ready([ENGINE]);
  return c.catalog.load();
}

/** Containers that belong to no app (by project and by hostd's app label), by name. */
export async function listDiscovered(c: AppsContext): Promise<ResultOf<'apps_discovered_list'>> {
  await c.ready([ENGINE]);
  const projects = new Set(c.records.all().map((r) => r.project));
  const cs = await c.driver.containers({});
  const containers = cs
    .filter((x) => !(x.project && projects.has(x.project)) && !(x.app_id && c.records.get(x.app_id)))
    .map(({ app_id: _a, generation: _g, ...rest }) => rest)
    .sort((a, b) => a.name.localeCompare(b.name));
  return { containers };
}
