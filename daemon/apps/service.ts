/**
 * The apps service: compose projects installed from templates or custom
 * content, and managed through their lifecycle. The rules of the spec and of
 * docs/apps.md live here: validation beyond the schema, states and 409s,
 * locks, tasks, intents and activity notes. The runtime is behind AppsDriver.
 *
 * Truth is in the store (record + compose content); the files compose runs
 * are rendered from it before every `up`, so a crash between writing files
 * and committing a record never leaves a definition the store does not know.
 */
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type { Logger } from 'pino';
import type { ArgsOf } from '../../api/registry/index.js';
import type { FolderAssignment } from '../../api/registry/schema.js';
import type { PoolConfig } from '../config.js';
import type { FoldersPort, GuestInfo } from '../domain.js';
import type { NoteSink } from '../lib/caller.js';
import { ApiError, badRequest, conflict, errnoCode, notFound } from '../lib/errors.js';
import type { JournalOp } from '../lib/journal.js';
import { KeyedLock } from '../lib/lock.js';
import { nextDocs } from '../lib/docs.js';
import type { TaskHandle, TaskRecord, Tasks } from '../lib/tasks.js';
import { parseCompose, type AppCompose } from './compose/model.js';
import { isInside, renderCompose, type ResolvedMount } from './compose/render.js';
import type { AppsDriver, ContainerStats, ContainerSummary, ProjectRef } from './driver.js';
import { type AppContent, type AppIntent, type AppRecord, type AppRecords, type Definition, type ReservedPort } from './records.js';
import { CUSTOM, type AppTemplate, type TemplateCatalog } from './templates.js';
import { copyTree, totalBytes, verifyTree, walk } from './tree.js';

export const DEFAULT_LOG_TAIL = 100;
export const MAX_LOG_TAIL = 10_000;
const APP_DIR = '.hostd-apps';

export interface AppsSettings {
  dockerHost?: string;
  composeBinary?: string;
  templatesDir?: string;
  /** Host address templates publish their ports on (HOSTD_PUBLISH_ADDRESS). */
  publishAddress: string;
  defaultStorageId?: string;
}

export interface AppsServiceDeps {
  driver: AppsDriver;
  records: AppRecords;
  catalog: TemplateCatalog;
  pools: PoolConfig[];
  folders: () => FoldersPort;
  tasks: Tasks;
  log: Logger;
  /** hostd's own directory for rendered compose files (`<data dir>/apps`). */
  composeRoot: string;
  settings: AppsSettings;
  /** Test hook: the step at which to stop and wait to be killed (HOSTD_APPS_PAUSE_AT). */
  pauseAt?: string;
}

export type AppState = 'installing' | 'moving' | 'updating' | 'running' | 'stopped' | 'partial' | 'not_created' | 'unknown';

export interface AppServiceView {
  service: string;
  container_id: string;
  name: string;
  image: string;
  state: string;
  status: string;
  generation: number | null;
}

export interface AppPort {
  service: string;
  host_ip: string;
  host_port: number;
  container_port: number;
  protocol: string;
}

export interface AppView {
  app_id: string;
  name: string;
  template_id: string;
  storage_id: string;
  data_dir: string;
  project: string;
  state: AppState;
  desired_state: 'running' | 'stopped';
  services: AppServiceView[];
  ports: AppPort[];
  folder_assignments: FolderAssignment[];
  compose_sha256: string;
  generation: number;
  task_id: string | null;
  /**
   * Null, or why hostd refuses to start or apply the stored compose file: a
   * rule added after the app was installed (nothing is removed; PATCH
   * /apps/{id}/compose with accepted content clears it).
   */
  refused: string | null;
  created_at: string;
  updated_at: string;
}

type Args<N extends 'apps_create' | 'apps_delete' | 'apps_actions' | 'apps_logs' | 'apps_stats' | 'apps_compose_update' | 'apps_folders_update' | 'apps_move' | 'apps_docs_get' | 'apps_docs_set'> = ArgsOf<N>;

const sha256 = (s: string) => crypto.createHash('sha256').update(s).digest('hex');
const now = () => new Date().toISOString();

/** `My Media App!` -> `my-media-app`. */
export function slug(name: string): string {
  return name.normalize('NFKD').replace(/[\u0300-\u036f]/g, '').toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 40).replace(/-+$/, '');
}

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

export function checkContainerPath(p: string, where: string): string {
  if (!p.startsWith('/')) throw badRequest(`${where} must be an absolute path inside the container`);
  if (p.includes('\0') || p.includes(':') || p.includes(',')) throw badRequest(`${where} must not contain NUL, ':' or ','`);
  const norm = path.posix.normalize(p);
  if (norm === '/') throw badRequest(`${where} must not be the container's root`);
  return norm.replace(/\/+$/, '');
}

export class AppsService {
  private readonly lock = new KeyedLock();
  private recovery: Promise<void> | null = null;
  private lastRecovery = 0;
  /** Apps whose interrupted change could not be settled yet, with why. */
  private readonly pending = new Map<string, string>();
  /** Whether each app's stored compose file passes today's rules, by the input it was checked with. */
  private readonly refusals = new Map<string, { key: string; why: string | null }>();

  constructor(private readonly d: AppsServiceDeps) {}

  // ------------------------------------------------------------ readiness

  /** 503 when the engine is not reachable; settles interrupted changes first. */
  async ready(): Promise<void> {
    await this.d.driver.ping();
    if (this.recovery && !(this.pending.size && Date.now() - this.lastRecovery > 10_000)) return this.recovery;
    this.lastRecovery = Date.now();
    this.recovery = this.recover().catch((err) => {
      // Not even the journal could be read: try again at the next call.
      this.recovery = null;
      throw err;
    });
    return this.recovery;
  }

  private async pause(step: string): Promise<void> {
    if (this.d.pauseAt !== step) return;
    this.d.log.warn({ step }, 'apps: paused at a test step, waiting to be killed');
    await new Promise<never>(() => undefined);
  }

  // ------------------------------------------------------------ helpers

  private key = (appId: string) => `app:${appId}`;
  private label = (k: string) => `app '${k.slice(4)}'`;

  private record(appId: string): AppRecord {
    const r = this.d.records.get(appId);
    if (!r) throw notFound(`app '${appId}' not found`);
    const why = this.pending.get(appId);
    if (why) throw conflict(`app '${appId}' has an interrupted change that is not settled yet: ${why}`);
    return r;
  }

  private pool(storageId: string | undefined): PoolConfig {
    const id = storageId ?? this.d.settings.defaultStorageId ?? this.d.pools[0]?.id;
    const p = this.d.pools.find((x) => x.id === id);
    if (!p) throw notFound(`storage pool '${id}' not found`);
    return p;
  }

  private files(appId: string) {
    const root = path.join(this.d.composeRoot, appId);
    return { root, file: path.join(root, 'compose.json'), files: path.join(root, 'files'), envFile: path.join(root, 'empty.env') };
  }

  private ref(r: AppRecord): ProjectRef {
    const f = this.files(r.app_id);
    return { project: r.project, file: f.file, dir: r.data_dir, envFile: f.envFile };
  }

  private env(r: AppRecord): Record<string, string> {
    const e: Record<string, string> = {
      HOSTD_APP_ID: r.app_id,
      HOSTD_APP_NAME: r.name,
      HOSTD_APP_DATA: r.data_dir,
      HOSTD_PUBLISH_ADDRESS: this.d.settings.publishAddress,
    };
    for (const p of r.ports) e[p.name] = String(p.host_port);
    return e;
  }

  private contentLabel(r: AppRecord): string {
    return r.template_id === CUSTOM ? 'compose_content' : `template '${r.template_id}'`;
  }

  /**
   * Why the stored compose file of `r` breaks today's rules, or null. A file
   * accepted by an older version may hold a key refused since (a log driver,
   * a sysctl): it is kept, listed (`refused` in the app's view), and refused
   * with 409 whenever hostd would start or apply it.
   */
  private async refusalOf(r: AppRecord, content?: AppContent): Promise<string | null> {
    const key = `${r.compose_sha256}\0${JSON.stringify(this.env(r))}`;
    const known = this.refusals.get(r.app_id);
    if (known && known.key === key) return known.why;
    let why: string | null = null;
    try {
      const c = content ?? (await this.d.records.contentOf(r.app_id));
      parseCompose(c.content, this.env(r), this.contentLabel(r));
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 400) throw err;
      why = err.message;
    }
    this.refusals.set(r.app_id, { key, why });
    return why;
  }

  /** 409 when the stored definition breaks a rule added since it was accepted. */
  private async requireAccepted(r: AppRecord, content?: AppContent): Promise<void> {
    const why = await this.refusalOf(r, content);
    if (why) throw storedRefused(r.app_id, why);
  }

  /** Logs every app whose stored compose file breaks today's rules (at start; they stay listed in GET /apps). */
  async audit(): Promise<void> {
    for (const r of this.d.records.all()) {
      if (r.status !== 'installed') continue;
      const why = await this.refusalOf(r).catch((err) => (err as Error).message);
      if (why) this.d.log.warn({ app_id: r.app_id, refused: why }, 'apps: the stored compose file breaks a rule added since it was installed; the app is refused at its next start or change');
    }
  }

  private async template(r: AppRecord): Promise<AppTemplate | null> {
    if (r.template_id === CUSTOM) return null;
    try {
      return await this.d.catalog.get(r.template_id);
    } catch {
      return null; // a template removed from the directory after install: its folders by service name only
    }
  }

  /**
   * Resolves folder assignments: the folder (404 when unknown), the sub-path
   * inside it after symbolic links (400 when it leads out), and the services
   * each goes into (`mount_point_id`: a template data folder or a service).
   */
  private async resolveMounts(list: FolderAssignment[], app: AppCompose, template: AppTemplate | null): Promise<ResolvedMount[]> {
    const out: ResolvedMount[] = [];
    const seen = new Set<string>();
    for (const [i, a] of list.entries()) {
      const w = `folder_assignments[${i}]`;
      const folder = this.d.folders().folder(a.folder_id);
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
        if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') throw notFound(`${w}.sub_path '${a.sub_path}' does not exist in folder '${a.folder_id}'`);
        throw err;
      }
      if (!isInside(real, base)) throw badRequest(`argument '${w}.sub_path' leads outside folder '${a.folder_id}' through a symbolic link`);
      const target = checkContainerPath(a.container_path, `argument '${w}.container_path'`);
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
          throw badRequest(`argument '${w}.mount_point_id' names no data folder${template ? ` of template '${template.template_id}'` : ''} and no service of the app ('${a.mount_point_id}')`);
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

  /** Parses and renders a definition (400/404 on bad content or assignments); writes nothing but directories inside the data dir. */
  private async render(def: Definition): Promise<{ app: AppCompose; text: string; files: Map<string, string> }> {
    const r = def.record;
    const label = this.contentLabel(r);
    const app = parseCompose(def.content.content, this.env(r), label);
    const mounts = await this.resolveMounts(r.folder_assignments, app, await this.template(r));
    await fs.mkdir(r.data_dir, { recursive: true, mode: 0o755 });
    const out = await renderCompose({ app, appId: r.app_id, generation: r.generation, dataDir: r.data_dir, mounts, label, env: this.env(r) }, this.files(r.app_id).files);
    return { app, ...out };
  }

  /** Writes the rendered files (the compose file last, by rename). */
  private async writeFiles(appId: string, rendered: { text: string; files: Map<string, string> }): Promise<void> {
    const f = this.files(appId);
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
  private async checkWithCompose(r: AppRecord, rendered: { text: string; files: Map<string, string> }): Promise<void> {
    const f = this.files(r.app_id);
    await fs.mkdir(f.files, { recursive: true, mode: 0o700 });
    await fs.writeFile(f.envFile, '', { mode: 0o600 });
    for (const [name, content] of rendered.files) await fs.writeFile(path.join(f.files, name), content, { mode: 0o644 });
    const scratch = path.join(f.root, 'compose.check.json');
    await fs.writeFile(scratch, rendered.text, { mode: 0o600 });
    try {
      await this.d.driver.check({ ...this.ref(r), file: scratch });
    } finally {
      await fs.rm(scratch, { force: true });
    }
  }

  /** Renders, writes and brings the project to the definition (`up`, or create only when stopped). */
  private async apply(def: Definition, signal?: AbortSignal): Promise<AppCompose> {
    const rendered = await this.render(def);
    await this.writeFiles(def.record.app_id, rendered);
    await this.d.driver.up(this.ref(def.record), { start: def.record.desired_state === 'running' }, signal);
    return rendered.app;
  }

  /** Images the engine lacks (or that the file says to pull always). */
  private async imagesToPull(app: AppCompose, where: string): Promise<string[]> {
    const uniq = new Map<string, { pull: string; service: string }>();
    for (const i of app.images) if (!uniq.has(i.image) || i.pull === 'always') uniq.set(i.image, { pull: i.pull, service: i.service });
    const out: string[] = [];
    await Promise.all(
      [...uniq].map(async ([image, u]) => {
        const present = await this.d.driver.imageExists(image);
        if (u.pull === 'always' || !present) {
          if (u.pull === 'never') throw badRequest(`${where}: image '${image}' of service '${u.service}' is not on the engine and its pull_policy is never`);
          out.push(image);
        }
      }),
    );
    return out.sort();
  }

  /** Pulls images with progress over [from, to] of the task's percent. */
  private async pullAll(images: string[], t: TaskHandle, from: number, to: number): Promise<void> {
    for (const [i, image] of images.entries()) {
      t.log(`pulling ${image}`);
      const span = (to - from) / images.length;
      let last = -1;
      try {
        await this.d.driver.pull(
          image,
          (p) => {
            const pct = p.total > 0 ? p.current / p.total : 0;
            const v = Math.floor(from + span * i + span * pct);
            if (v !== last) {
              last = v;
              t.progress(v);
            }
          },
          t.signal,
        );
      } catch (err) {
        if (t.signal.aborted) throw err;
        throw new Error(pullError(image, err));
      }
      t.log(`pulled ${image}`);
      t.progress(from + span * (i + 1));
    }
  }

  /** Holds the app's lock until `release` is called (a task's lifetime); 409 when it is busy. */
  private hold(appId: string, what: string): () => void {
    const busy = this.lock.busy(this.key(appId));
    if (busy) throw conflict(`app '${appId}' is busy: ${busy} in progress`);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    void this.lock.exclusive([this.key(appId)], what, () => gate, this.label).catch(() => undefined);
    return release;
  }

  private exclusive<T>(appId: string, what: string, fn: () => Promise<T>): Promise<T> {
    return this.lock.exclusive([this.key(appId)], what, fn, this.label);
  }

  // ------------------------------------------------------------ views

  private stateOf(r: AppRecord, cs: ContainerSummary[] | null, services: string[] | null): AppState {
    if (r.status === 'installing') return 'installing';
    const busy = this.lock.busy(this.key(r.app_id));
    if (busy === 'move') return 'moving';
    if (busy === 'compose update' || busy === 'folders update') return 'updating';
    if (!cs) return 'unknown';
    const mine = cs.filter((c) => c.project === r.project);
    if (!mine.length) return 'not_created';
    const running = mine.filter((c) => c.state === 'running').length;
    const expected = services ? services.length : mine.length;
    if (running === 0) return 'stopped';
    if (running >= expected && running === mine.length) return 'running';
    return 'partial';
  }

  private view(r: AppRecord, cs: ContainerSummary[] | null): AppView {
    const mine = (cs ?? []).filter((c) => c.project === r.project).sort((a, b) => (a.service ?? '').localeCompare(b.service ?? '') || a.name.localeCompare(b.name));
    const ports: AppPort[] = [];
    for (const c of mine) for (const p of c.ports) ports.push({ service: c.service ?? '', ...p });
    return {
      app_id: r.app_id,
      name: r.name,
      template_id: r.template_id,
      storage_id: r.storage_id,
      data_dir: r.data_dir,
      project: r.project,
      state: this.stateOf(r, cs, null),
      desired_state: r.desired_state,
      services: mine.map((c) => ({ service: c.service ?? '', container_id: c.container_id, name: c.name, image: c.image, state: c.state, status: c.status, generation: c.generation })),
      ports,
      folder_assignments: r.folder_assignments,
      compose_sha256: r.compose_sha256,
      generation: r.generation,
      task_id: r.task_id,
      refused: this.refusals.get(r.app_id)?.why ?? null,
      created_at: r.created_at,
      updated_at: r.updated_at,
    };
  }

  private async viewOf(r: AppRecord): Promise<AppView> {
    if (r.status === 'installed') await this.refusalOf(r).catch(() => null);
    return this.view(r, await this.d.driver.containers({ project: r.project }));
  }

  // ------------------------------------------------------------ reads

  async list(): Promise<{ apps: AppView[] }> {
    await this.ready();
    const cs = await this.d.driver.containers({});
    const all = this.d.records.all();
    await Promise.all(all.filter((r) => r.status === 'installed').map((r) => this.refusalOf(r).catch(() => null)));
    return { apps: all.map((r) => this.view(r, cs)) };
  }

  async templates(): Promise<{ templates: Array<Omit<AppTemplate, 'compose'> & { compose: string }>; invalid: Array<{ file: string; error: string }> }> {
    await this.ready();
    return this.d.catalog.load();
  }

  async discovered(): Promise<{ containers: Array<Omit<ContainerSummary, 'app_id' | 'generation'>> }> {
    await this.ready();
    const projects = new Set(this.d.records.all().map((r) => r.project));
    const cs = await this.d.driver.containers({});
    const out = cs
      .filter((c) => !(c.project && projects.has(c.project)) && !(c.app_id && this.d.records.get(c.app_id)))
      .map(({ app_id: _a, generation: _g, ...rest }) => rest)
      .sort((a, b) => a.name.localeCompare(b.name));
    return { containers: out };
  }

  async logs(args: Args<'apps_logs'>): Promise<{ app_id: string; tail: number; lines: Array<{ service: string; container: string; time: string; stream: string; text: string }> }> {
    await this.ready();
    const r = this.d.records.get(args.app_id);
    if (!r) throw notFound(`app '${args.app_id}' not found`);
    const tail = args.tail ?? DEFAULT_LOG_TAIL;
    if (tail > MAX_LOG_TAIL) throw badRequest(`argument 'tail' must be <= ${MAX_LOG_TAIL}`);
    const cs = await this.d.driver.containers({ project: r.project });
    const per = await Promise.all(
      cs.map(async (c) => {
        const lines = tail === 0 ? [] : await this.d.driver.logs(c.container_id, tail).catch((err) => {
          if ((err as { statusCode?: number }).statusCode === 404) return [];
          throw err;
        });
        return lines.map((l) => ({ service: c.service ?? '', container: c.name, ...l }));
      }),
    );
    const all = per.flat().sort((a, b) => a.time.localeCompare(b.time));
    return { app_id: r.app_id, tail, lines: all.slice(Math.max(0, all.length - tail)) };
  }

  async stats(args: Args<'apps_stats'>): Promise<{ app_id: string; containers: Array<{ service: string; container_id: string; name: string; state: string } & ({ stats: ContainerStats } | { stats: null })>; totals: Record<string, number> }> {
    await this.ready();
    const r = this.d.records.get(args.app_id);
    if (!r) throw notFound(`app '${args.app_id}' not found`);
    const cs = (await this.d.driver.containers({ project: r.project })).sort((a, b) => (a.service ?? '').localeCompare(b.service ?? ''));
    const rows = await Promise.all(
      cs.map(async (c) => {
        const base = { service: c.service ?? '', container_id: c.container_id, name: c.name, state: c.state };
        if (c.state !== 'running') return { ...base, stats: null };
        // A container that stopped or went away since the listing has no stats.
        const stats = await this.d.driver.stats(c.container_id).catch((err) => {
          if ([404, 409].includes((err as { statusCode?: number }).statusCode ?? 0)) return null;
          throw err;
        });
        return { ...base, stats };
      }),
    );
    const totals = { cpu_percent: 0, memory_usage_bytes: 0, network_rx_bytes: 0, network_tx_bytes: 0, block_read_bytes: 0, block_write_bytes: 0, pids: 0 };
    for (const row of rows) {
      const s = row.stats;
      if (!s) continue;
      totals.cpu_percent += s.cpu_percent;
      totals.memory_usage_bytes += s.memory.usage_bytes;
      totals.network_rx_bytes += s.network.rx_bytes;
      totals.network_tx_bytes += s.network.tx_bytes;
      totals.block_read_bytes += s.block_io.read_bytes;
      totals.block_write_bytes += s.block_io.write_bytes;
      totals.pids += s.pids;
    }
    totals.cpu_percent = Math.round(totals.cpu_percent * 100) / 100;
    return { app_id: r.app_id, containers: rows, totals };
  }

  async docsGet(args: Args<'apps_docs_get'>): Promise<{ app_id: string; content: string; updated_at: string | null }> {
    await this.ready();
    const r = this.d.records.get(args.app_id);
    if (!r) throw notFound(`app '${args.app_id}' not found`);
    const docs = await this.d.records.docs.get(r.app_id);
    return { app_id: r.app_id, content: docs?.content ?? '', updated_at: docs?.updated_at ?? null };
  }

  async docsSet(args: Args<'apps_docs_set'>, ctx: NoteSink): Promise<{ app_id: string; content: string; updated_at: string }> {
    await this.ready();
    const r = this.d.records.get(args.app_id);
    if (!r) throw notFound(`app '${args.app_id}' not found`);
    return this.lock.run([`docs:${r.app_id}`], async () => {
      if (!this.d.records.get(r.app_id)) throw notFound(`app '${args.app_id}' not found`);
      const at = now();
      const content = nextDocs((await this.d.records.docs.get(r.app_id))?.content ?? '', args.content, args.append_entry ?? false, at);
      await this.d.records.docs.put(r.app_id, { content, updated_at: at });
      ctx.note({ summary: `${args.append_entry ? 'Appended to' : 'Set'} the documentation of app ${r.name}`, target: `apps/${r.app_id}`, metadata: { app_id: r.app_id, bytes: Buffer.byteLength(content), append: Boolean(args.append_entry) } });
      return { app_id: r.app_id, content, updated_at: at };
    });
  }

  // ------------------------------------------------------------ install

  /** Host ports for the template's parameters: the default when free, else the next free one. */
  private async allocatePorts(t: AppTemplate | null): Promise<ReservedPort[]> {
    if (!t || !t.ports.length) return [];
    const taken = new Set<string>();
    for (const r of this.d.records.all()) for (const p of r.ports) taken.add(`${p.protocol}/${p.host_port}`);
    for (const c of await this.d.driver.containers({})) for (const p of c.ports) taken.add(`${p.protocol}/${p.host_port}`);
    const out: ReservedPort[] = [];
    for (const p of t.ports) {
      let chosen = 0;
      for (let port = p.default, n = 0; n < 200 && port <= 65535; port++, n++) {
        if (taken.has(`${p.protocol}/${port}`)) continue;
        if (p.protocol === 'tcp' && !(await portFree(this.d.settings.publishAddress, port))) continue;
        chosen = port;
        break;
      }
      if (!chosen) throw conflict(`no free host port for ${p.name} of template '${t.template_id}' from ${p.default} on`);
      taken.add(`${p.protocol}/${chosen}`);
      out.push({ name: p.name, host_port: chosen, protocol: p.protocol });
    }
    return out;
  }

  private async allocateId(name: string, explicit: boolean): Promise<string> {
    const base = slug(name) || 'app';
    for (let n = 1; n < 1000; n++) {
      const id = n === 1 ? base : `${base}-${n}`;
      if (this.d.records.get(id) || (await exists(path.join(this.d.composeRoot, id)))) {
        if (explicit) throw conflict(`an app with the id '${id}' already exists (the id is made from the name '${name}')`);
        continue;
      }
      return id;
    }
    throw conflict(`no free app id for the name '${name}'`);
  }

  async create(args: Args<'apps_create'>, ctx: NoteSink & { caller?: { tokenName: string } }): Promise<{ app: AppView; task: TaskRecord | null }> {
    await this.ready();
    await this.d.driver.requireCompose();
    let template: AppTemplate | null = null;
    let content: string;
    if (args.template_id === CUSTOM) {
      if (args.compose_content === undefined) throw badRequest(`argument 'compose_content' is required when template_id is '${CUSTOM}'`);
      content = args.compose_content;
    } else {
      if (args.compose_content !== undefined) throw badRequest(`argument 'compose_content' is only for template_id '${CUSTOM}'`);
      template = await this.d.catalog.get(args.template_id);
      content = template.compose;
    }
    const pool = this.pool(args.storage_id);
    const name = (args.name ?? template?.default_name ?? CUSTOM).trim();
    if (!name || /[\u0000-\u001f\u007f]/.test(name)) throw badRequest(`argument 'name' must be 1-64 printable characters`);
    const assignments = args.folder_assignments ?? [];

    // Id and ports are chosen and reserved (the installing record) under one lock.
    const { record, app } = await this.lock.run(['apps:allocate'], async () => {
      const appId = await this.allocateId(name, args.name !== undefined);
      const dataDir = path.join(pool.path, APP_DIR, appId);
      if (await exists(dataDir)) throw conflict(`the data directory ${dataDir} of app '${appId}' already exists; move it away first`);
      const at = now();
      const rec: AppRecord = {
        app_id: appId, name, template_id: args.template_id, storage_id: pool.id, data_dir: dataDir, project: `hostd-${appId}`,
        folder_assignments: assignments, ports: await this.allocatePorts(template), compose_sha256: sha256(content), generation: 1,
        desired_state: 'running', status: 'installing', task_id: null, created_at: at, updated_at: at,
      };
      // Checked before anything is written: a bad file or assignment is a 400 with nothing to undo.
      const parsed = parseCompose(content, this.env(rec), this.contentLabel(rec));
      await this.resolveMounts(assignments, parsed, template);
      await this.d.records.begin(appId, { op: 'install', app_id: appId, record: rec }, [this.d.records.putRecord(rec), this.d.records.putContent(appId, { content, sha256: rec.compose_sha256 })]);
      return { record: rec, app: parsed };
    });
    const appId = record.app_id;
    const def: Definition = { record, content: { content, sha256: record.compose_sha256 } };
    const note = (summary: string, extra: Record<string, unknown> = {}) =>
      ctx.note({
        summary,
        target: `apps/${appId}`,
        metadata: { app_id: appId, template_id: args.template_id, storage_id: pool.id, folder_assignments: assignments.length, images: [...new Set(app.images.map((i) => i.image))], ...extra },
      });
    note(`Install app ${name} (${args.template_id})`);
    const release = this.hold(appId, 'install');
    let images: string[];
    let installed: AppRecord | null = null;
    try {
      await this.pause('install:after-intent');
      images = await this.imagesToPull(app, this.contentLabel(record));
      // Rendering checks the host paths (inside the data directory, or a folder assignment).
      const rendered = await this.render(def);
      // With images to pull the file is applied later, in the task: compose checks it now, so that a bad file is a 400 here.
      if (images.length) await this.checkWithCompose(record, rendered);
      if (!images.length) {
        await this.writeFiles(appId, rendered);
        await this.d.driver.up(this.ref(record), { start: true });
        await this.pause('install:after-up');
        installed = { ...record, status: 'installed' as const, updated_at: now() };
        await this.d.records.commit(appId, [this.d.records.putRecord(installed)]);
      }
    } catch (err) {
      await this.undoInstall(record).catch((e) => this.d.log.error({ err: e, app_id: appId }, 'apps: install rollback failed; the next start settles it'));
      release();
      throw err;
    }
    if (installed) {
      release();
      note(`Installed app ${name} (${args.template_id})`);
      return { app: await this.viewOf(installed), task: null };
    }
    // The task starts once its id is in the record, so that its own commit is the last write.
    let go!: () => void;
    const recorded = new Promise<void>((r) => (go = r));
    const task = this.d.tasks.start(
      { kind: 'apps.install', title: `Install app ${name}: pull ${images.length} image${images.length === 1 ? '' : 's'} and start`, owner: ctx.caller?.tokenName ?? 'local', resource: `apps/${appId}` },
      async (t) => {
        await recorded;
        try {
          await this.pullAll(images, t, 0, 90);
          t.log('starting the containers');
          await this.apply(def, t.signal);
          await this.pause('install:after-up');
          const done = { ...this.d.records.get(appId)!, status: 'installed' as const, task_id: null, updated_at: now() };
          await this.d.records.commit(appId, [this.d.records.putRecord(done)]);
          t.log('installed');
          return { app_id: appId };
        } catch (err) {
          t.log(`install failed; removing what it made`);
          await this.undoInstall(record).catch((e) => this.d.log.error({ err: e, app_id: appId }, 'apps: install rollback failed; the next start settles it'));
          throw new Error(`install of app '${appId}' rolled back: ${(err as Error).message}`);
        } finally {
          release();
        }
      },
    );
    note(`Installing app ${name} (${args.template_id}): pulling ${images.join(', ')}`, { task_id: task.task_id });
    const withTask = { ...record, task_id: task.task_id };
    try {
      await this.d.records.write([this.d.records.putRecord(withTask)]);
    } finally {
      go();
    }
    return { app: this.view(withTask, []), task };
  }

  /** Removes everything an install made and forgets it (record, content, intent). */
  private async undoInstall(r: AppRecord): Promise<void> {
    await this.d.driver.remove(r.project);
    await fs.rm(r.data_dir, { recursive: true, force: true });
    await fs.rm(this.files(r.app_id).root, { recursive: true, force: true });
    await this.d.records.commit(r.app_id, this.d.records.forget(r.app_id));
  }

  // ------------------------------------------------------------ delete

  async delete(args: Args<'apps_delete'>, ctx: NoteSink): Promise<{ app_id: string; deleted: true; data_dir: string; folders_kept: string[] }> {
    await this.ready();
    const r = this.record(args.app_id);
    return this.exclusive(r.app_id, 'uninstall', async () => {
      await this.d.records.begin(r.app_id, { op: 'delete', app_id: r.app_id, record: r });
      await this.pause('delete:after-intent');
      await this.finishDelete(r);
      await this.d.records.commit(r.app_id, this.d.records.forget(r.app_id));
      const kept = [...new Set(r.folder_assignments.map((a) => a.folder_id))];
      ctx.note({ summary: `Uninstalled app ${r.name}`, target: `apps/${r.app_id}`, metadata: { app_id: r.app_id, data_dir: r.data_dir, folders_kept: kept } });
      return { app_id: r.app_id, deleted: true as const, data_dir: r.data_dir, folders_kept: kept };
    });
  }

  private async finishDelete(r: AppRecord): Promise<void> {
    await this.d.driver.remove(r.project);
    await fs.rm(r.data_dir, { recursive: true, force: true });
    await fs.rm(this.files(r.app_id).root, { recursive: true, force: true });
  }

  // ------------------------------------------------------------ actions

  async action(args: Args<'apps_actions'>, ctx: NoteSink): Promise<{ app: AppView; action: string }> {
    await this.ready();
    await this.d.driver.requireCompose();
    const r = this.record(args.app_id);
    if (r.status === 'installing') throw conflict(`app '${r.app_id}' is still installing`);
    const action = args.action;
    return this.exclusive(r.app_id, action, async () => {
      // Stopping is always possible; starting runs the stored definition, which must pass today's rules.
      if (action !== 'stop') await this.requireAccepted(r);
      const after: AppRecord = { ...r, desired_state: action === 'stop' ? 'stopped' : 'running', updated_at: now() };
      await this.d.records.begin(r.app_id, { op: 'action', app_id: r.app_id, action, after });
      await this.runAction(action, after);
      await this.d.records.commit(r.app_id, [this.d.records.putRecord(after)]);
      ctx.note({ summary: `${action[0].toUpperCase()}${action.slice(1)} app ${r.name}`, target: `apps/${r.app_id}`, metadata: { app_id: r.app_id, action } });
      return { app: await this.viewOf(after), action };
    });
  }

  private async runAction(action: 'start' | 'stop' | 'restart', after: AppRecord): Promise<void> {
    if (action === 'stop') return this.d.driver.stop(this.ref(after));
    if (action === 'start') {
      // `up` (after a fresh rendering, so confinement is checked again) creates what is missing and starts the rest.
      await this.apply({ record: after, content: await this.d.records.contentOf(after.app_id) }).catch((err) => {
        throw storedError(after.app_id, err);
      });
      return;
    }
    // Restart: one `compose restart` when every service has its container of this generation;
    // otherwise what exists is restarted and `up` creates the rest.
    const def = { record: after, content: await this.d.records.contentOf(after.app_id) };
    const cs = await this.d.driver.containers({ project: after.project });
    if (cs.length) await this.d.driver.restart(this.ref(after));
    const services = parseCompose(def.content.content, this.env(after), this.contentLabel(after)).services;
    const current = new Set(cs.filter((c) => c.generation === after.generation).map((c) => c.service));
    if (!services.every((s) => current.has(s))) {
      await this.apply(def).catch((err) => {
        throw storedError(after.app_id, err);
      });
    }
  }

  // ------------------------------------------------------------ updates

  async composeUpdate(args: Args<'apps_compose_update'>, ctx: NoteSink & { caller?: { tokenName: string } }): Promise<{ app: AppView; task: TaskRecord | null }> {
    await this.ready();
    await this.d.driver.requireCompose();
    const r = this.record(args.app_id);
    const content: AppContent = { content: args.compose_content, sha256: sha256(args.compose_content) };
    const res = await this.update(r, 'compose', (cur) => ({ record: { ...cur, compose_sha256: content.sha256 }, content }), ctx);
    ctx.note({ summary: `Updated the compose file of app ${r.name}`, target: `apps/${r.app_id}`, metadata: { app_id: r.app_id, compose_sha256: content.sha256, generation: res.app.generation, task_id: res.task?.task_id ?? null } });
    return res;
  }

  async foldersUpdate(args: Args<'apps_folders_update'>, ctx: NoteSink & { caller?: { tokenName: string } }): Promise<{ app: AppView; task: TaskRecord | null }> {
    await this.ready();
    await this.d.driver.requireCompose();
    const r = this.record(args.app_id);
    if (args.folder_assignments === undefined || args.folder_assignments === null) return { app: await this.viewOf(r), task: null };
    const list = args.folder_assignments;
    await this.requireAccepted(r);
    const res = await this.update(r, 'folders', (cur, content) => ({ record: { ...cur, folder_assignments: list }, content }), ctx);
    ctx.note({ summary: `Updated the folder mounts of app ${r.name} (${list.length})`, target: `apps/${r.app_id}`, metadata: { app_id: r.app_id, folder_assignments: list, generation: res.app.generation } });
    return res;
  }

  /**
   * A change of the definition: checked (400/404) before anything is written,
   * then intent, files, `up`, record. Missing images make it a task (pull,
   * then apply). A failure puts the previous definition back.
   */
  private async update(r: AppRecord, what: 'compose' | 'folders', change: (cur: AppRecord, content: AppContent) => Definition, ctx: { caller?: { tokenName: string } }): Promise<{ app: AppView; task: TaskRecord | null }> {
    const opName = `${what} update`;
    const release = this.hold(r.app_id, opName);
    let pulls: string[] = [];
    let before!: Definition;
    let after!: Definition;
    try {
      if (r.status === 'installing') throw conflict(`app '${r.app_id}' is still installing`);
      const cur = this.d.records.get(r.app_id)!;
      before = { record: cur, content: await this.d.records.contentOf(r.app_id) };
      const next = change(cur, before.content);
      after = { record: { ...next.record, generation: cur.generation + 1, updated_at: now() }, content: next.content };
      const rendered = await this.render(after);
      pulls = await this.imagesToPull(rendered.app, this.contentLabel(after.record));
      if (pulls.length) await this.checkWithCompose(after.record, rendered);
      if (!pulls.length) {
        await this.commitUpdate(r.app_id, what, before, after, rendered);
        release();
        return { app: await this.viewOf(after.record), task: null };
      }
    } catch (err) {
      release();
      throw err;
    }
    const task = this.d.tasks.start(
      { kind: 'apps.update', title: `Update app ${r.name}: pull ${pulls.length} image${pulls.length === 1 ? '' : 's'} and apply`, owner: ctx.caller?.tokenName ?? 'local', resource: `apps/${r.app_id}` },
      async (t) => {
        try {
          await this.pullAll(pulls, t, 0, 90);
          t.log('applying the new definition');
          await this.commitUpdate(r.app_id, what, before, after, await this.render(after), t.signal);
          return { app_id: r.app_id, generation: after.record.generation };
        } finally {
          release();
        }
      },
    );
    return { app: await this.viewOf(before.record), task };
  }

  private async commitUpdate(appId: string, what: 'compose' | 'folders', before: Definition, after: Definition, rendered: { text: string; files: Map<string, string> }, signal?: AbortSignal): Promise<void> {
    await this.d.records.begin(appId, { op: 'update', app_id: appId, what, before, after });
    try {
      await this.writeFiles(appId, rendered);
      await this.pause('update:after-files');
      await this.d.driver.up(this.ref(after.record), { start: after.record.desired_state === 'running' }, signal);
      await this.pause('update:after-up');
    } catch (err) {
      try {
        await this.apply(before);
        await this.d.records.journal.drop(appId);
      } catch (e) {
        this.d.log.error({ err: e, app_id: appId }, 'apps: putting the previous definition back failed; the next start settles it');
      }
      throw err;
    }
    await this.d.records.commit(appId, [this.d.records.putRecord(after.record), this.d.records.putContent(appId, after.content)]);
  }

  // ------------------------------------------------------------ move

  async move(args: Args<'apps_move'>, ctx: NoteSink & { caller?: { tokenName: string } }): Promise<{ app: AppView; task: TaskRecord }> {
    await this.ready();
    await this.d.driver.requireCompose();
    const r = this.record(args.app_id);
    const pool = this.pool(args.storage_id);
    if (r.status === 'installing') throw conflict(`app '${r.app_id}' is still installing`);
    if (pool.id === r.storage_id) throw conflict(`app '${r.app_id}' is already in storage pool '${pool.id}'`);
    await this.requireAccepted(r);
    const target = path.join(pool.path, APP_DIR, r.app_id);
    if (await exists(target)) throw conflict(`the target directory ${target} already exists; move it away first`);
    const release = this.hold(r.app_id, 'move');
    let task: TaskRecord;
    try {
      task = this.d.tasks.start(
        { kind: 'apps.move', title: `Move app ${r.name} from pool ${r.storage_id} to ${pool.id}`, owner: ctx.caller?.tokenName ?? 'local', resource: `apps/${r.app_id}` },
        async (t) => {
          try {
            return await this.runMove(r.app_id, pool, target, t);
          } finally {
            release();
          }
        },
      );
    } catch (err) {
      release();
      throw err;
    }
    ctx.note({ summary: `Moving app ${r.name} from pool ${r.storage_id} to ${pool.id}`, target: `apps/${r.app_id}`, metadata: { app_id: r.app_id, from: r.storage_id, to: pool.id, task_id: task.task_id } });
    return { app: await this.viewOf(r), task };
  }

  private async runMove(appId: string, pool: PoolConfig, target: string, t: TaskHandle): Promise<unknown> {
    const before = this.d.records.get(appId)!;
    const content = await this.d.records.contentOf(appId);
    const after: AppRecord = { ...before, storage_id: pool.id, data_dir: target, generation: before.generation + 1, task_id: null, updated_at: now() };
    const staging = `${target}.moving-${crypto.randomBytes(4).toString('hex')}`;
    const wasRunning = before.desired_state === 'running';
    const intent: AppIntent = { op: 'move', app_id: appId, phase: 'copy', before, after, was_running: wasRunning, staging };
    await this.d.records.begin(appId, intent, [this.d.records.putRecord({ ...before, task_id: t.id })]);
    let switched = false;
    try {
      t.log('stopping the app');
      await this.d.driver.stop(this.ref(before));
      // Containers, networks and volume objects go; the volumes' data stays in the data directory.
      await this.d.driver.remove(before.project);
      await this.pause('move:after-stop');
      const entries = await walk(before.data_dir, t.signal);
      const total = totalBytes(entries);
      t.log(`copying ${entries.size} entries (${total} bytes) to ${target}`);
      await fs.mkdir(path.dirname(target), { recursive: true });
      await copyTree(before.data_dir, staging, total, (b) => t.progress(total ? (b / total) * 60 : 60), t.signal);
      t.log('verifying the copy');
      const v = await verifyTree(before.data_dir, staging, (b) => t.progress(60 + (total ? (b / total) * 30 : 30)), t.signal);
      t.log(`verified ${v.files} files (${v.bytes} bytes)`);
      await fs.rename(staging, target);
      await this.pause('move:after-copy');
      await this.d.records.advance(appId, { ...intent, phase: 'switch' }, [this.d.records.putRecord({ ...after, task_id: t.id })]);
      switched = true;
      await this.pause('move:after-switch');
      t.log(wasRunning ? 'starting the app from its new place' : 'creating the containers (the app stays stopped)');
      await this.apply({ record: after, content }, t.signal);
      await fs.rm(before.data_dir, { recursive: true, force: true });
      await this.d.records.commit(appId, [this.d.records.putRecord(after)]);
      t.log('moved');
      return { app_id: appId, storage_id: pool.id, data_dir: target, files: v.files, bytes: v.bytes };
    } catch (err) {
      if (!switched) {
        t.log('move failed; the app stays where it was');
        await fs.rm(staging, { recursive: true, force: true }).catch(() => undefined);
        await fs.rm(target, { recursive: true, force: true }).catch(() => undefined);
        const back = { ...before, task_id: null };
        await this.apply({ record: back, content }).catch((e) => this.d.log.error({ err: e, app_id: appId }, 'apps: restarting the app after a failed move failed'));
        await this.d.records.commit(appId, [this.d.records.putRecord(back)]);
      } else {
        // The data is in its new place and the record says so: keep that, and let a later start bring the containers up.
        await fs.rm(before.data_dir, { recursive: true, force: true }).catch(() => undefined);
        await this.d.records.commit(appId, [this.d.records.putRecord(after)]);
      }
      throw err;
    }
  }

  // ------------------------------------------------------------ guests port

  async guests(): Promise<GuestInfo[]> {
    let cs: ContainerSummary[] | null = null;
    try {
      await this.d.driver.ping();
      cs = await this.d.driver.containers({});
    } catch {
      cs = null;
    }
    return this.d.records.all().map((r) => {
      const v = this.view(r, cs);
      const addresses = [...new Set(v.ports.map((p) => `${p.host_ip === '' || p.host_ip === '0.0.0.0' ? '127.0.0.1' : p.host_ip === '::' ? '[::1]' : p.host_ip.includes(':') ? `[${p.host_ip}]` : p.host_ip}:${p.host_port}`))];
      return { kind: 'app' as const, id: r.app_id, name: r.name, state: v.state, running: v.state === 'running' || v.state === 'partial', cpu_cores: 0, memory_mb: 0, addresses };
    });
  }

  // ------------------------------------------------------------ recovery

  /** Settles every open intent (finish or roll back) so that records, compose projects and data agree. */
  private async recover(): Promise<void> {
    const open = await this.d.records.journal.open();
    for (const [key, intent] of open) {
      try {
        const ops = await this.settle(intent);
        await this.d.records.commit(key, ops);
        this.pending.delete(intent.app_id);
        this.d.log.info({ app_id: intent.app_id, op: intent.op }, 'apps: settled an interrupted change');
      } catch (err) {
        const why = err instanceof ApiError ? err.message : (err as Error).message;
        this.pending.set(intent.app_id, why);
        this.d.log.error({ err, app_id: intent.app_id, op: intent.op }, 'apps: could not settle an interrupted change yet');
      }
    }
  }

  private async settle(i: AppIntent): Promise<JournalOp[]> {
    const R = this.d.records;
    switch (i.op) {
      case 'install':
        await this.finishDelete(i.record);
        return R.forget(i.app_id);
      case 'delete':
        await this.finishDelete(i.record);
        return R.forget(i.app_id);
      case 'action':
        await this.d.driver.requireCompose();
        await this.runAction(i.action, i.after);
        return [R.putRecord(i.after)];
      case 'update':
        await this.d.driver.requireCompose();
        try {
          await this.apply(i.after);
          return [R.putRecord(i.after.record), R.putContent(i.app_id, i.after.content)];
        } catch (err) {
          this.d.log.warn({ err, app_id: i.app_id }, 'apps: the interrupted update does not apply; putting the previous definition back');
          await this.apply(i.before).catch((e) => this.d.log.error({ err: e, app_id: i.app_id }, 'apps: the previous definition does not apply either'));
          return [R.putRecord(i.before.record), R.putContent(i.app_id, i.before.content)];
        }
      case 'move': {
        await this.d.driver.requireCompose();
        const content = await R.contentOf(i.app_id);
        if (i.phase === 'copy') {
          await fs.rm(i.staging, { recursive: true, force: true });
          await fs.rm(i.after.data_dir, { recursive: true, force: true });
          const back = { ...i.before, task_id: null };
          await this.apply({ record: back, content });
          return [R.putRecord(back)];
        }
        await this.apply({ record: i.after, content }).catch((e) => this.d.log.error({ err: e, app_id: i.app_id }, 'apps: the moved app does not start; start it again'));
        await fs.rm(i.before.data_dir, { recursive: true, force: true });
        return [R.putRecord({ ...i.after, task_id: null })];
      }
    }
  }
}

/** The 409 of an app whose stored compose file breaks a rule added since it was accepted. */
function storedRefused(appId: string, why: string): ApiError {
  return conflict(`app '${appId}' is refused: its stored compose file breaks a rule added since it was installed (${why}); nothing was changed or removed: replace the file with PATCH /apps/${appId}/compose`);
}

/** Starting from the stored definition, a 400 is the definition's (the caller sent nothing): 409. */
function storedError(appId: string, err: unknown): unknown {
  if (err instanceof ApiError && err.status === 400) return conflict(`app '${appId}' cannot start from its stored definition: ${err.message}`);
  return err;
}

function pullError(image: string, err: unknown): string {
  const msg = (err as Error)?.message ?? String(err);
  if (/dial tcp|no such host|connection refused|i\/o timeout|TLS handshake|network is unreachable|Temporary failure in name resolution|server misbehaving|no route to host/i.test(msg)) {
    return `cannot pull image '${image}': no registry is reachable (${msg.replace(/\s+/g, ' ').slice(0, 300)}); load the image into the engine (docker load / docker import) and install again`;
  }
  return `cannot pull image '${image}': ${msg.replace(/\s+/g, ' ').slice(0, 400)}`;
}

async function exists(p: string): Promise<boolean> {
  try {
    await fs.lstat(p);
    return true;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}

function portFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}
