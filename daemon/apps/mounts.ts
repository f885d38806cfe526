/**
 * Folder assignments: which managed folder (or which directory inside one)
 * goes where in which services. Resolved before every rendering, so a folder
 * renamed, removed or swapped for a symbolic link since is seen at the next
 * start: the source is the real path, inside the folder, and it passes the
 * host-path rule every domain shares (daemon/lib/host-paths.ts), as LXC mount
 * points do.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { normalContainerPath } from '../../api/registry/schema.js';
import { badRequest, errnoCode, notFound } from '../lib/errors.js';
import { judgeHostPath, realRoots } from '../lib/host-paths.js';
import type { AppCompose } from './compose/model.js';
import { isInside, type ResolvedMount } from './compose/render.js';
import type { AppsContext } from './context.js';
import type { FolderAssignment } from './records.js';
import type { AppTemplate } from './templates.js';

export const MOUNT_RULE = 'apps may mount only managed folders, never a storage pool root or a directory hostd keeps for itself';

/** Checks a folder assignment's sub_path text: relative, no `..`, no NUL or backslash. Returns its segments. */
export function subPathSegments(sub: string | undefined, where: string): string[] {
  if (sub === undefined || sub === '' || sub === '.') return [];
  if (sub.includes('\0')) throw badRequest(`${where} must not contain NUL bytes`);
  if (sub.includes('\\')) throw badRequest(`${where} must not contain backslashes`);
  if (sub.startsWith('/')) throw badRequest(`${where} must stay inside the folder (it is relative to the folder)`);
  const segs = sub.split('/').filter((s) => s !== '' && s !== '.');
  if (segs.includes('..')) throw badRequest(`${where} must stay inside the folder`);
  return segs;
}

/**
 * Resolves folder assignments: the folder (404 when unknown), the sub-path
 * inside it after symbolic links (404 missing, 400 when it leads out or the
 * host-path rule refuses it), and the services each goes into
 * (`mount_point_id`: a template data folder or a service).
 */
export async function resolveMounts(c: AppsContext, list: FolderAssignment[], app: AppCompose, template: AppTemplate | null): Promise<ResolvedMount[]> {
  const out: ResolvedMount[] = [];
  const seen = new Set<string>();
  const poolRoots = list.length ? (await realRoots(c.pools.map((p) => ({ path: p.path })))).map((r) => r.path) : [];
  const own = list.length ? await realRoots([{ path: c.dataDir, label: 'data directory' }]) : [];
  for (const [i, a] of list.entries()) {
    const w = `folder_assignments[${i}]`;
    const folder = c.folders().folder(a.folder_id);
    const segs = subPathSegments(a.sub_path, `argument '${w}.sub_path'`);
    let base: string;
    try {
      base = await fs.realpath(folder.path);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') throw notFound(`folder '${a.folder_id}' has no directory at ${folder.path}`);
      throw err;
    }
    let real: string;
    try {
      real = await fs.realpath(path.join(base, ...segs));
    } catch (err) {
      if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR')
        throw notFound(`${w}.sub_path '${a.sub_path}' does not exist in folder '${a.folder_id}'`);
      throw err;
    }
    if (!isInside(real, base)) throw badRequest(`argument '${w}.sub_path' leads outside folder '${a.folder_id}' through a symbolic link`);
    const verdict = judgeHostPath(real, { allowed: [{ path: base, label: `managed folder '${folder.name}'` }], poolRoots, private: own });
    if (!verdict.ok)
      throw badRequest(`argument '${w}' (folder '${a.folder_id}'${segs.length ? `, sub_path '${segs.join('/')}'` : ''}) ${verdict.reason}: ${MOUNT_RULE}`);
    const target = normalContainerPath(a.container_path, `${w}.container_path`);
    let services: string[];
    let readOnly = a.read_only ?? false;
    if (a.mount_point_id !== undefined) {
      const tf = template?.data_folders.find((f) => f.id === a.mount_point_id);
      if (tf) {
        services = [tf.service];
        if (a.read_only === undefined) readOnly = tf.read_only;
      } else if (app.doc.services[a.mount_point_id]) {
        services = [a.mount_point_id];
      } else {
        throw badRequest(
          `argument '${w}.mount_point_id' names no data folder${template ? ` of template '${template.template_id}'` : ''} and no service of the app ('${a.mount_point_id}')`,
        );
      }
    } else {
      services = app.services;
    }
    for (const s of services) {
      const k = `${s}\0${target}`;
      if (seen.has(k)) throw badRequest(`argument '${w}.container_path' '${target}' is assigned twice to service '${s}'`);
      seen.add(k);
    }
    out.push({ index: i, folder_id: a.folder_id, source: real, container_path: target, read_only: readOnly, services });
  }
  return out;
}
