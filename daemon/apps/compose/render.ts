/**
 * Renders the file compose runs from the checked content: every host path
 * confined to the app's data directory (or, for a bind mount, to one of its
 * folder assignments) after symbolic links are resolved; named volumes stored
 * in the app's data directory; env files and secret files copied out of the
 * data directory through an opened descriptor (so a symbolic link swapped in
 * by a container cannot redirect the read); the folder assignments added as
 * bind mounts; hostd's labels on every service, network and volume; and every
 * `$` escaped, so that compose runs exactly what hostd checked.
 *
 * The rendering is redone before every `up`, so the confinement is checked
 * again each time the containers may be re-created.
 */
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { badRequest, errnoCode } from '../../lib/errors.js';
import { parseEnvFile } from './envfile.js';
import { escapeTree, type Env } from './interpolate.js';
import { isMapping, type AppCompose, type EnvFileRef, type VolumeMount } from './model.js';

export const LABEL_APP = 'org.hostd.app';
export const LABEL_GENERATION = 'org.hostd.generation';

/** A folder assignment with its host directory resolved (realpath) and the services it goes into. */
export interface ResolvedMount {
  /** Index in the request's folder_assignments (for messages). */
  index: number;
  folder_id: string;
  /** Absolute, symbolic links resolved, inside the folder. */
  source: string;
  container_path: string;
  read_only: boolean;
  services: string[];
}

export interface RenderInput {
  app: AppCompose;
  appId: string;
  generation: number;
  /** The app's data directory; exists. */
  dataDir: string;
  mounts: ResolvedMount[];
  /** Names the content in messages (`compose_content`, `template 'x'`). */
  label: string;
  /** The app's variables (HOSTD_APP_ID ...): what `${VAR}` in an env file may name. */
  env?: Env;
}

export interface Rendered {
  /** The compose file (JSON, which compose reads as YAML). */
  text: string;
  /** Copies the file refers to: file name (inside the files directory) to content. */
  files: Map<string, string>;
}

interface Root {
  path: string;
  real: string;
  create: boolean;
  readOnly: boolean;
  what: string;
}

export function isInside(p: string, root: string): boolean {
  return p === root || p.startsWith(root.endsWith('/') ? root : root + '/');
}

/**
 * The real path of `abs` inside `root`: the deepest existing ancestor is
 * resolved (symbolic links followed) and must stay inside the root; missing
 * directories below it are created when the root allows it.
 */
async function realInside(abs: string, root: Root, where: string, shown: string): Promise<string> {
  let existing = abs;
  const rest: string[] = [];
  for (;;) {
    try {
      await fs.lstat(existing);
      break;
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT' && errnoCode(err) !== 'ENOTDIR') throw err;
      if (existing === root.path || !isInside(existing, root.path)) throw badRequest(`${where}: ${root.what} is missing`);
      rest.unshift(path.basename(existing));
      existing = path.dirname(existing);
    }
  }
  const real = await fs.realpath(existing);
  if (!isInside(real, root.real)) throw badRequest(`${where} is refused: '${shown}' leads outside ${root.what} through a symbolic link`);
  const full = rest.length ? path.join(real, ...rest) : real;
  if (rest.length) {
    if (!root.create) throw badRequest(`${where}: '${shown}' does not exist in ${root.what}`);
    await fs.mkdir(full, { recursive: true });
  }
  return full;
}

/** Reads a file inside the data directory through its descriptor; null when missing. */
async function readConfined(abs: string, root: Root, where: string, shown: string): Promise<string | null> {
  if (!isInside(abs, root.path)) throw badRequest(`${where} is refused: '${shown}' is outside ${root.what}`);
  let fh;
  try {
    fh = await fs.open(abs, 'r');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return null;
    if (errnoCode(err) === 'EISDIR') throw badRequest(`${where}: '${shown}' is a directory`);
    throw err;
  }
  try {
    const real = await fs.readlink(`/proc/self/fd/${fh.fd}`);
    if (!isInside(real, root.real)) throw badRequest(`${where} is refused: '${shown}' leads outside ${root.what} through a symbolic link`);
    const st = await fh.stat();
    if (!st.isFile()) throw badRequest(`${where}: '${shown}' is not a regular file`);
    if (st.size > 1024 * 1024) throw badRequest(`${where}: '${shown}' is over 1 MiB`);
    return await fh.readFile('utf8');
  } finally {
    await fh.close();
  }
}

function labelMap(v: unknown): Record<string, string> {
  if (Array.isArray(v)) {
    const out: Record<string, string> = {};
    for (const e of v) {
      const s = String(e);
      const i = s.indexOf('=');
      out[i < 0 ? s : s.slice(0, i)] = i < 0 ? '' : s.slice(i + 1);
    }
    return out;
  }
  if (isMapping(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, x === null || x === undefined ? '' : String(x)]));
  return {};
}

/** `environment` in either of compose's forms, as entries (a list item without `=` has no value). */
function environmentEntries(v: unknown): Array<[string, unknown]> {
  if (v === undefined || v === null) return [];
  if (Array.isArray(v)) {
    return v.map((e) => {
      const t = String(e);
      const i = t.indexOf('=');
      return i < 0 ? [t, null] : [t.slice(0, i), t.slice(i + 1)];
    });
  }
  return isMapping(v) ? Object.entries(v) : [];
}

const fileName = (content: string, ext: string) => `${crypto.createHash('sha256').update(content).digest('hex').slice(0, 32)}.${ext}`;

/** Renders the compose file; `filesDir` is where the copies will be written (absolute). Throws 400. */
export async function renderCompose(input: RenderInput, filesDir: string): Promise<Rendered> {
  const { app, label } = input;
  const where = `${label}:`;
  const dataReal = await fs.realpath(input.dataDir);
  const data: Root = { path: input.dataDir, real: dataReal, create: true, readOnly: false, what: "the app's data directory" };
  const roots: Root[] = [
    data,
    ...input.mounts.map((m) => ({
      path: m.source,
      real: m.source,
      create: false,
      readOnly: m.read_only,
      what: `folder assignment ${m.index} (folder '${m.folder_id}')`,
    })),
  ];
  const files = new Map<string, string>();
  const appLabels = { [LABEL_APP]: input.appId };
  const doc = structuredClone(app.doc) as unknown as Record<string, any>;

  for (const [name, svc] of Object.entries(doc.services as Record<string, Record<string, any>>)) {
    const sw = `${where} services.${name}`;
    const mounts: VolumeMount[] = [];
    for (const [i, m] of ((svc.volumes ?? []) as VolumeMount[]).entries()) {
      const vw = `${sw}.volumes[${i}]`;
      if (m.type !== 'bind') {
        mounts.push(m);
        continue;
      }
      const abs = path.resolve(input.dataDir, m.source);
      const root = roots.find((r) => isInside(abs, r.path));
      if (!root) throw badRequest(`${vw} is refused: '${m.source}' is outside the app's data directory and its folder assignments`);
      if (root.readOnly && !m.read_only) throw badRequest(`${vw}: '${m.source}' is inside ${root.what}, which is read-only: mount it read-only`);
      const source = await realInside(abs, root, vw, m.source);
      mounts.push({ ...m, source, bind: { ...(m.bind ?? {}), create_host_path: false } });
    }
    for (const fm of input.mounts) {
      if (!fm.services.includes(name)) continue;
      const clash = mounts.find((m) => path.posix.normalize(m.target) === path.posix.normalize(fm.container_path));
      if (clash) throw badRequest(`folder_assignments[${fm.index}]: container_path '${fm.container_path}' is already a mount of service '${name}'`);
      mounts.push({
        type: 'bind',
        source: fm.source,
        target: fm.container_path,
        ...(fm.read_only ? { read_only: true } : {}),
        bind: { create_host_path: false },
      });
    }
    if (mounts.length) svc.volumes = mounts;
    // Env files are read here, through the descriptor, and become plain environment entries (envfile.ts says why).
    const fromFiles = new Map<string, string>();
    if (svc.env_file !== undefined) {
      for (const [i, ref] of (svc.env_file as EnvFileRef[]).entries()) {
        const ew = `${sw}.env_file[${i}]`;
        const content = await readConfined(path.resolve(input.dataDir, ref.path), data, ew, ref.path);
        if (content === null) {
          if (ref.required) throw badRequest(`${ew}: '${ref.path}' does not exist in the app's data directory`);
          continue;
        }
        for (const [k, v] of parseEnvFile(content, input.env ?? {}, `${ew} '${ref.path}'`)) {
          fromFiles.delete(k);
          fromFiles.set(k, v);
        }
      }
      delete svc.env_file;
    }
    if (svc.environment !== undefined || fromFiles.size) {
      const env = Object.fromEntries(fromFiles) as Record<string, unknown>;
      for (const [k, v] of environmentEntries(svc.environment)) {
        // A name without a value is left unset: compose would look it up in its own environment (hostd's).
        if (v === null || v === undefined) delete env[k];
        else env[k] = v;
      }
      svc.environment = env;
    }
    svc.labels = { ...labelMap(svc.labels), ...appLabels, [LABEL_GENERATION]: String(input.generation) };
  }

  if (doc.volumes) {
    for (const [name, def] of Object.entries(doc.volumes as Record<string, Record<string, any>>)) {
      const vw = `${where} volumes.${name}`;
      const device = await realInside(path.join(input.dataDir, 'volumes', name), data, vw, `volumes/${name}`);
      const { driver: _d, ...rest } = def;
      doc.volumes[name] = { ...rest, driver: 'local', driver_opts: { type: 'none', o: 'bind', device }, labels: { ...labelMap(def.labels), ...appLabels } };
    }
  }
  if (doc.networks) {
    for (const [name, def] of Object.entries(doc.networks as Record<string, Record<string, any>>)) {
      doc.networks[name] = { ...def, labels: { ...labelMap(def.labels), ...appLabels } };
    }
  }
  for (const kind of ['secrets', 'configs'] as const) {
    if (!doc[kind]) continue;
    for (const [name, def] of Object.entries(doc[kind] as Record<string, Record<string, any>>)) {
      if (def.file === undefined) continue;
      const fw = `${where} ${kind}.${name}.file`;
      const content = await readConfined(path.resolve(input.dataDir, def.file), data, fw, def.file);
      if (content === null) throw badRequest(`${fw}: '${def.file}' does not exist in the app's data directory`);
      const f = fileName(content, kind === 'secrets' ? 'secret' : 'config');
      files.set(f, content);
      doc[kind][name] = { ...def, file: path.join(filesDir, f) };
    }
  }
  return { text: JSON.stringify(escapeTree(doc), null, 2) + '\n', files };
}
