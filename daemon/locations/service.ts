/**
 * Connected locations: SMB shares mounted under the data dir, their records,
 * their stored passwords, and the mount directory the folders domain
 * confines its paths to. Decisions the spec leaves open are in
 * docs/locations.md.
 */
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { ApiError, badRequest, conflict, errnoCode, notFound, unavailable } from '../lib/errors.js';
import { KeyedLock } from '../lib/lock.js';
import { requireAvailable, type Availability } from '../lib/availability.js';
import type { NoteSink } from '../lib/caller.js';
import type { SecretStore } from '../lib/secrets.js';
import type { MountDriver, MountRoute, SmbProbe } from './driver.js';
import { alive, findProcesses, mountAt, releaseMount } from './mounts.js';
import type { Intent, LocationRecord, LocationRecords } from './records.js';
import { parseCredentials, parseHost, parseIp, parseRemote, remoteRuleProblem, remoteText, userText, type Credentials, type MaybeCredentials, type Remote } from './smb/remote.js';
import { scrub } from './smb/status.js';
import type { Discovery, DiscoveredHost } from './discovery/index.js';

export const SECRET_NS = 'locations';

export interface LocationView {
  location_id: string;
  name: string;
  type: 'smb';
  remote: string;
  host: string;
  share: string;
  username: string | null;
  guest: boolean;
  /** mounted; disconnected (by the user); unavailable (wanted, but the last mount or check failed). */
  status: 'mounted' | 'disconnected' | 'unavailable';
  mounted: boolean;
  mount_route: MountRoute | null;
  /** The share's directory on this host while mounted, else null. */
  mount_path: string | null;
  last_error: string | null;
  last_error_at: string | null;
  mounted_at: string | null;
  created_at: string;
}

export interface HostStatus {
  /** The route new mounts take on this host, or null when neither is available. */
  mount_route: MountRoute | null;
  /** Why that route (or why none). */
  route_reason: string;
  runtimes: Availability[];
}

/** A location kept from before a rule that its stored address now breaks: never mounted again until replaced. */
export interface RefusedLocation {
  location_id: string;
  name: string;
  reason: string;
}

export interface LocationsSettings {
  mountRoute: 'auto' | MountRoute;
  /** How often mounted locations are checked and lost ones retried. */
  checkIntervalMs: number;
  /** Bound of one check of a mount. */
  checkTimeoutMs: number;
  /** Bound of a discovery without host. */
  discoveryTimeoutMs: number;
}

export interface ServiceDeps {
  records: LocationRecords;
  secrets: SecretStore;
  log: Logger;
  dataDir: string;
  settings: LocationsSettings;
  /** The chosen route's driver, or null with the reason in `hostStatus`. */
  driver: MountDriver | null;
  hostStatus: () => Promise<HostStatus>;
  probe: SmbProbe;
  discovery: Discovery;
  env: NodeJS.ProcessEnv;
}

interface CreateArgs {
  name: string;
  remote: string;
  type?: string;
  username?: string;
  password?: string;
}

interface DiscoverArgs {
  host?: string;
  ip?: string;
  username?: string;
  password?: string;
}

const NAME_MAX = 128;
const CONTROL = /[\u0000-\u001f\u007f]/;
const noop: NoteSink = { note() {} };
const now = () => new Date().toISOString();
const HEALTH = 'health check';

export class LocationsService {
  private readonly cache = new Map<string, LocationRecord>();
  private readonly lock = new KeyedLock();
  private readonly pendingNames = new Set<string>();
  private readonly lastCheck = new Map<string, number>();
  private closed = false;
  readonly root: string;

  constructor(private readonly d: ServiceDeps) {
    this.root = path.join(d.dataDir, 'locations');
  }

  // ----- start, stop ------------------------------------------------------

  /** Recovers interrupted changes and loads the records; mounts come back in `restoreMounts`. */
  async init(): Promise<void> {
    await fs.mkdir(path.join(this.root, 'mnt'), { recursive: true, mode: 0o700 });
    await fs.mkdir(path.join(this.root, 'work'), { recursive: true, mode: 0o700 });
    await fs.chmod(this.root, 0o700);
    for (const r of await this.d.records.all()) this.cache.set(r.location_id, r);
    const n = await this.d.records.journal.recover((key, intent) => this.recover(key, intent));
    if (n) this.d.log.info({ recovered: n }, 'locations: finished or undid interrupted changes');
    await this.wipeTransientFiles();
    // After a host restart the records still say mounted: say what is true until restoreMounts is done.
    for (const r of [...this.cache.values()]) {
      if (r.mounted && !(await mountAt(r.mount_dir))) {
        await this.save({ ...r, mounted: false, mounted_at: null, last_error: 'not mounted after a restart; hostd is mounting it again', last_error_at: now() });
      }
    }
  }

  /**
   * Brings every wanted location back (after a hostd restart its mount is
   * still there and is adopted; after a host restart it is mounted again) and
   * unmounts any that is mounted but not wanted. Runs in the background.
   */
  async restoreMounts(): Promise<void> {
    await Promise.all([...this.cache.values()].map((r) => this.reconcile(r.location_id, true).catch((err) => this.d.log.warn({ err, location_id: r.location_id }, 'locations: restore failed'))));
  }

  /** One pass of the monitor: check mounted ones, retry wanted ones that are not mounted. */
  async monitor(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.cache.values()].map((r) => this.reconcile(r.location_id, false).catch((err) => this.d.log.warn({ err, location_id: r.location_id }, 'locations: check failed'))));
  }

  close(): void {
    this.closed = true;
  }

  // ----- operations -------------------------------------------------------

  async list(): Promise<{ locations: LocationView[]; host: HostStatus & { refused: RefusedLocation[] } }> {
    await Promise.all([...this.cache.keys()].map((id) => this.refresh(id)));
    const locations = [...this.cache.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).map((r) => this.view(r));
    return { locations, host: await this.hostStatus() };
  }

  async get(id: string): Promise<{ location: LocationView }> {
    this.rec(id);
    await this.refresh(id);
    return { location: this.view(this.rec(id)) };
  }

  async create(args: CreateArgs, ctx: NoteSink = noop): Promise<{ location: LocationView }> {
    const name = this.validName(args.name);
    const remote = parseRemote(args.remote);
    if (args.type !== undefined && args.type !== null && args.type !== 'smb') throw badRequest(`argument 'type' must be 'smb' (the only type mounted), not '${String(args.type).slice(0, 40)}'`);
    const creds = parseCredentials(args.username, args.password);
    const driver = await this.requireDriver();
    await this.lock.run(['names'], async () => {
      if (this.pendingNames.has(name) || [...this.cache.values()].some((r) => r.name === name)) throw conflict(`a location named '${name}' already exists`);
      this.pendingNames.add(name);
    });
    try {
      // The probe touches nothing: a share that cannot be used fails here with its reason.
      await this.d.probe.check(remote, creds);
      const id = this.newId();
      const rec: LocationRecord = {
        location_id: id,
        name,
        type: 'smb',
        host: remote.host,
        share: remote.share,
        user: creds?.user ?? null,
        domain: creds?.domain ?? null,
        wanted: true,
        mounted: true,
        mount_route: driver.route,
        mount_dir: path.join(this.root, 'mnt', id),
        work_dir: path.join(this.root, 'work', id),
        last_error: null,
        last_error_at: null,
        mounted_at: now(),
        created_at: now(),
      };
      const done = await this.lock.exclusive([this.key(id)], 'create', () =>
        this.d.records.journal.run(
          id,
          { op: 'create', rec },
          async () => {
            if (creds) await this.d.secrets.put(SECRET_NS, id, creds.password);
            await this.makeDirs(rec);
            await driver.mount(remote, creds, rec.mount_dir, rec.work_dir);
            await this.pause('create:mounted');
            await this.verifyMount(rec, driver, creds);
            return rec;
          },
          {
            commit: (r) => [this.d.records.put(r)],
            rollback: () => this.removeAll(rec),
          },
        ),
      );
      this.cache.set(id, done);
      this.lastCheck.set(id, Date.now());
      ctx.note({ summary: `Connected location ${name} (${remoteText(remote)}) through ${driver.route}`, target: name, metadata: { location_id: id, remote: remoteText(remote), mount_route: driver.route } });
      return { location: this.view(done) };
    } finally {
      this.pendingNames.delete(name);
    }
  }

  async disconnect(id: string, ctx: NoteSink = noop): Promise<{ location: LocationView }> {
    this.rec(id);
    const out = await this.userLock(id, 'disconnect', async () => {
      const rec = this.rec(id);
      const isMounted = (await mountAt(rec.mount_dir)) !== null;
      if (!rec.wanted && !rec.mounted && !isMounted) return rec; // already disconnected
      return this.sync(rec, false, async () => {
        await this.unmountDir(rec);
        await this.pause('disconnect:unmounted');
        return { ...rec, wanted: false, mounted: false, last_error: null, last_error_at: null, mounted_at: null };
      });
    });
    ctx.note({ summary: `Disconnected location ${out.name}`, target: out.name, metadata: { location_id: id } });
    return { location: this.view(out) };
  }

  async reconnect(id: string, ctx: NoteSink = noop): Promise<{ location: LocationView }> {
    this.rec(id);
    const driver = await this.requireDriver();
    const out = await this.userLock(id, 'reconnect', async () => {
      const rec = this.rec(id);
      const refused = this.refusal(rec);
      if (refused) {
        if (rec.last_error !== refused) await this.save({ ...rec, last_error: refused, last_error_at: now() });
        throw conflict(refused);
      }
      // Idempotent: a mount that works is left as it is.
      if (rec.mounted && (await this.health(rec)) === null) {
        if (!rec.wanted) return this.save({ ...rec, wanted: true });
        return rec;
      }
      return this.mountAgain(rec, driver, true);
    });
    ctx.note({ summary: `Reconnected location ${out.name}`, target: out.name, metadata: { location_id: id, mount_route: out.mount_route } });
    return { location: this.view(out) };
  }

  async delete(id: string, ctx: NoteSink = noop): Promise<{ location: LocationView; deleted: true }> {
    this.rec(id);
    const rec = await this.userLock(id, 'delete', async () => {
      const r = this.rec(id);
      await this.d.records.journal.run(
        id,
        { op: 'delete', rec: r },
        async () => {
          await this.unmountDir(r);
          await this.pause('delete:unmounted');
          await this.removeAll(r);
        },
        { commit: () => [this.d.records.del(id)] },
      );
      this.cache.delete(id);
      this.lastCheck.delete(id);
      return r;
    });
    ctx.note({ summary: `Removed location ${rec.name} and its stored credentials`, target: rec.name, metadata: { location_id: id } });
    return { location: { ...this.view(rec), mounted: false, status: 'disconnected', mount_path: null }, deleted: true };
  }

  async discover(args: DiscoverArgs): Promise<unknown> {
    const creds = parseCredentials(args.username, args.password);
    const ip = args.ip !== undefined && args.ip !== null && args.ip !== '' ? parseIp(args.ip) : undefined;
    if (args.host === undefined || args.host === null || args.host === '') {
      if (ip) throw badRequest(`argument 'ip' needs 'host' (the host whose shares to list)`);
      if (creds) throw badRequest(`arguments 'username' and 'password' need 'host' (host discovery sends no credentials)`);
      const started = Date.now();
      const found: { hosts: DiscoveredHost[]; methods: Record<string, string> } = await this.d.discovery.hosts(this.d.settings.discoveryTimeoutMs);
      return { hosts: found.hosts, methods: found.methods, timeout_ms: this.d.settings.discoveryTimeoutMs, duration_ms: Date.now() - started };
    }
    const host = parseHost(args.host);
    requireAvailable(await this.d.probe.availability());
    // The credentials are used for this probe only: they are not stored anywhere.
    const shares = await this.d.probe.shares(host, creds, { ip });
    return { host, ip: ip ?? null, username: userText(creds), shares };
  }

  /** The connections port: the share's directory, 404 unknown, 409 not mounted. */
  async mountDir(id: string): Promise<string> {
    const rec = typeof id === 'string' ? this.cache.get(id) : undefined;
    if (!rec) throw notFound(`location '${id}' not found`);
    if (!rec.mounted) {
      if (!rec.wanted) throw conflict(`location '${rec.name}' is not mounted: it is disconnected (reconnect it first)`);
      throw conflict(`location '${rec.name}' is not mounted${rec.last_error ? `: ${rec.last_error}` : ''}`);
    }
    // The record can lag behind the mount table (an unmount by hand, a helper killed): never hand out a bare directory.
    if (!(await mountAt(rec.mount_dir))) throw conflict(`location '${rec.name}' is not mounted: its mount is gone (hostd will check it and mount it again)`);
    return this.shareRoot(rec);
  }

  async hostStatus(): Promise<HostStatus & { refused: RefusedLocation[] }> {
    return { ...(await this.d.hostStatus()), refused: this.refusedList() };
  }

  /** Locations whose stored address breaks a rule added since they were created (they stay, unmounted). */
  private refusedList(): RefusedLocation[] {
    const out: RefusedLocation[] = [];
    for (const r of this.cache.values()) {
      const why = this.refusal(r);
      if (why) out.push({ location_id: r.location_id, name: r.name, reason: why });
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** The 409 message for a stored location whose address the share-name rule now refuses, or null. */
  private refusal(r: LocationRecord): string | null {
    const problem = remoteRuleProblem(r.host, r.share, r.user, r.domain);
    if (!problem) return null;
    return `location '${r.name}' is refused: its stored address breaks a rule added since it was created (${problem}); it is not mounted again, and nothing was removed: delete it and add the share again`;
  }

  // ----- internals --------------------------------------------------------

  private view(r: LocationRecord): LocationView {
    const remote = { host: r.host, share: r.share };
    return {
      location_id: r.location_id,
      name: r.name,
      type: r.type,
      remote: remoteText(remote),
      host: r.host,
      share: r.share,
      username: r.user ? (r.domain ? `${r.domain}\\${r.user}` : r.user) : null,
      guest: r.user === null,
      status: r.mounted ? 'mounted' : r.wanted ? 'unavailable' : 'disconnected',
      mounted: r.mounted,
      mount_route: r.mount_route,
      mount_path: r.mounted ? this.shareRoot(r) : null,
      last_error: r.last_error,
      last_error_at: r.last_error_at,
      mounted_at: r.mounted_at,
      created_at: r.created_at,
    };
  }

  private rec(id: string): LocationRecord {
    const r = typeof id === 'string' ? this.cache.get(id) : undefined;
    if (!r) throw notFound(`location '${id}' not found`);
    return r;
  }

  private key(id: string): string {
    return `loc:${id}`;
  }

  private validName(name: unknown): string {
    if (typeof name !== 'string' || name.trim() === '') throw badRequest(`argument 'name' must not be empty`);
    if (name.length > NAME_MAX || CONTROL.test(name)) throw badRequest(`argument 'name' must be at most ${NAME_MAX} characters without control characters`);
    return name;
  }

  private newId(): string {
    for (;;) {
      const id = 'l_' + crypto.randomBytes(8).toString('base64url').replace(/[-_]/g, '').slice(0, 10);
      if (id.length === 12 && !this.cache.has(id)) return id;
    }
  }

  private async requireDriver(): Promise<MountDriver> {
    const st = await this.d.hostStatus();
    if (!this.d.driver || !st.mount_route) throw unavailable(`no way to mount SMB shares on this host: ${st.route_reason}`);
    requireAvailable(...(await this.d.driver.availability()), await this.d.probe.availability());
    return this.d.driver;
  }

  private shareRoot(rec: LocationRecord): string {
    const remote = { host: rec.host, share: rec.share };
    return rec.mount_route === 'fuse' ? path.join(rec.mount_dir, remote.host, remote.share) : rec.mount_dir;
  }

  /** User calls wait for a health check but refuse with 409 when another user call holds the location. */
  private userLock<T>(id: string, what: string, fn: () => Promise<T>): Promise<T> {
    const key = this.key(id);
    if (this.lock.busy(key) === HEALTH) return this.lock.run([key], fn, what);
    return this.lock.exclusive([key], what, fn, () => `location '${this.cache.get(id)?.name ?? id}'`);
  }

  private async credentials(rec: LocationRecord): Promise<MaybeCredentials> {
    if (rec.user === null) return null;
    const password = await this.d.secrets.get(SECRET_NS, rec.location_id);
    if (password === null) throw conflict(`location '${rec.name}' has no stored password (its secret is missing); remove and add it again`);
    const c: Credentials = { user: rec.user, domain: rec.domain, password };
    return c;
  }

  private async makeDirs(rec: LocationRecord): Promise<void> {
    await fs.mkdir(rec.mount_dir, { recursive: true, mode: 0o700 });
    await fs.mkdir(rec.work_dir, { recursive: true, mode: 0o700 });
  }

  /** Unmounts whatever serves the location's mount directory (either route). */
  private async unmountDir(rec: LocationRecord): Promise<void> {
    // Route-agnostic: a mount made by the other route (an older start, another config) goes too.
    await releaseMount(rec.mount_dir);
  }

  /** Mount, secret, directories: all gone. */
  private async removeAll(rec: LocationRecord): Promise<void> {
    await this.unmountDir(rec);
    if (await mountAt(rec.mount_dir)) throw conflict(`location '${rec.name}' is still mounted at ${rec.mount_dir}`);
    await this.d.secrets.delete(SECRET_NS, rec.location_id);
    await fs.rm(rec.work_dir, { recursive: true, force: true });
    // rmdir, not rm -r: an empty mount point only; never recurse into what could be a share.
    await fs.rmdir(rec.mount_dir).catch((err) => {
      if (errnoCode(err) !== 'ENOENT') throw err;
    });
  }

  /** After a mount: the share must answer through it, else the mount is undone and the reason given. */
  private async verifyMount(rec: LocationRecord, driver: MountDriver, creds: MaybeCredentials): Promise<void> {
    const err = await this.health({ ...rec, mount_route: driver.route });
    if (err) throw new ApiError(502, `//${rec.host}/${rec.share} was mounted but cannot be read through the mount: ${scrub(err, creds?.password)}`);
  }

  /** null when the mount works; else what is wrong. */
  private async health(rec: LocationRecord): Promise<string | null> {
    const m = await mountAt(rec.mount_dir);
    if (!m) return 'the mount is gone';
    if (rec.mount_route === 'fuse') {
      const pid = (await findProcesses('smbnetfs', rec.mount_dir))[0];
      if (pid === undefined || !(await alive(pid))) return 'the smbnetfs process serving the mount has exited';
    }
    const root = this.shareRoot(rec);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve(`the share did not answer within ${this.d.settings.checkTimeoutMs} ms`), this.d.settings.checkTimeoutMs);
    });
    const probe = (async () => {
      try {
        const dir = await fs.opendir(root);
        await dir.read();
        await dir.close();
        return null;
      } catch (err) {
        return `the share cannot be read through the mount (${errnoCode(err) ?? (err as Error).message})`;
      }
    })();
    try {
      return await Promise.race([probe, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * A change of an existing location's mount through the journal: the
   * intent says whether the user wants it connected, `work` does it and
   * returns the new record.
   */
  private async sync(rec: LocationRecord, wanted: boolean, work: () => Promise<LocationRecord>): Promise<LocationRecord> {
    const out = await this.d.records.journal.run(rec.location_id, { op: 'sync', id: rec.location_id, wanted }, work, {
      commit: (r) => [this.d.records.put(r)],
    });
    this.cache.set(out.location_id, out);
    this.lastCheck.set(out.location_id, Date.now());
    return out;
  }

  private async save(rec: LocationRecord): Promise<LocationRecord> {
    await this.d.records.records.put(rec.location_id, rec);
    this.cache.set(rec.location_id, rec);
    return rec;
  }

  /**
   * Unmounts what is left, then mounts again. On failure the record says
   * unmounted with the error, and `rethrow` gives the caller the error too.
   */
  private async mountAgain(rec: LocationRecord, driver: MountDriver, rethrow: boolean): Promise<LocationRecord> {
    const refused = this.refusal(rec);
    if (refused) throw conflict(refused);
    let failure: ApiError | null = null;
    const out = await this.sync(rec, true, async () => {
      await this.unmountDir(rec);
      const creds = await this.credentials(rec);
      const remote: Remote = { host: rec.host, share: rec.share };
      try {
        await this.d.probe.check(remote, creds);
        await this.makeDirs(rec);
        await driver.mount(remote, creds, rec.mount_dir, rec.work_dir);
        const next = { ...rec, wanted: true, mount_route: driver.route };
        await this.verifyMount(next, driver, creds);
        return { ...next, mounted: true, last_error: null, last_error_at: null, mounted_at: now() };
      } catch (err) {
        await this.unmountDir(rec).catch(() => undefined);
        failure = err instanceof ApiError ? err : new ApiError(500, `mount failed: ${scrub((err as Error).message, creds?.password)}`);
        return { ...rec, wanted: true, mounted: false, last_error: failure.message, last_error_at: now(), mounted_at: null };
      }
    });
    if (failure && rethrow) throw failure;
    return out;
  }

  /** Re-reads the state of a mounted location now and then (GET): a lost share shows as unmounted. */
  private async refresh(id: string): Promise<void> {
    const rec = this.cache.get(id);
    if (!rec || !rec.mounted || this.lock.busy(this.key(id))) return;
    const last = this.lastCheck.get(id) ?? 0;
    if (Date.now() - last < 1000) return;
    await this.lock.run([this.key(id)], () => this.checkMounted(id), HEALTH).catch((err) => this.d.log.warn({ err, location_id: id }, 'locations: check failed'));
  }

  private async checkMounted(id: string): Promise<void> {
    const rec = this.cache.get(id);
    if (!rec || !rec.mounted) return;
    this.lastCheck.set(id, Date.now());
    const problem = await this.health(rec);
    if (!problem) return;
    await this.lose(rec, problem);
  }

  /** A mount that stopped working is unmounted and reported with its reason. */
  private async lose(rec: LocationRecord, problem: string): Promise<void> {
    let reason = problem;
    // Ask the server directly for a precise reason (host down, password changed, share removed).
    try {
      await this.d.probe.check({ host: rec.host, share: rec.share }, await this.credentials(rec));
    } catch (err) {
      if (err instanceof ApiError) reason = `${err.message} (${problem})`;
    }
    this.d.log.warn({ location_id: rec.location_id, reason }, 'locations: lost a mount');
    await this.sync(rec, rec.wanted, async () => {
      await this.unmountDir(rec);
      return { ...rec, mounted: false, last_error: reason, last_error_at: now(), mounted_at: null };
    });
  }

  /**
   * Makes one location's mount match its record: adopt a working mount,
   * remount a wanted one that is missing or broken, unmount an unwanted one.
   * `atStart` also re-mounts wanted locations that failed before.
   */
  private async reconcile(id: string, atStart: boolean): Promise<void> {
    const key = this.key(id);
    if (this.lock.busy(key) || this.closed) return;
    await this.lock.run(
      [key],
      async () => {
        const rec = this.cache.get(id);
        if (!rec || this.closed) return;
        const present = (await mountAt(rec.mount_dir)) !== null;
        if (!rec.wanted) {
          if (present || rec.mounted) await this.sync(rec, false, async () => {
            await this.unmountDir(rec);
            return { ...rec, mounted: false };
          });
          return;
        }
        if (rec.mounted || present) {
          const problem = present ? await this.health({ ...rec, mount_route: rec.mount_route }) : 'the mount is gone (host restarted?)';
          this.lastCheck.set(id, Date.now());
          if (!problem) {
            if (!rec.mounted) await this.save({ ...rec, mounted: true, mounted_at: rec.mounted_at ?? now() });
            return;
          }
          if (!atStart) {
            await this.lose(rec, problem);
            return;
          }
        }
        // Wanted but not mounted (or broken at start): try to mount it again, unless today's rules refuse its address.
        const refused = this.refusal(rec);
        if (refused) {
          if (rec.last_error !== refused) {
            this.d.log.warn({ location_id: id, reason: refused }, 'locations: not mounting a location whose stored address a rule now refuses');
            await this.save({ ...rec, mounted: false, last_error: refused, last_error_at: now() });
          }
          return;
        }
        const driver = this.d.driver;
        if (!driver) {
          const st = await this.d.hostStatus();
          await this.save({ ...rec, mounted: false, last_error: `no way to mount SMB shares on this host: ${st.route_reason}`, last_error_at: now() });
          return;
        }
        const out = await this.mountAgain(rec, driver, false);
        if (out.mounted) this.d.log.info({ location_id: id, mount_route: out.mount_route }, 'locations: mounted again');
      },
      HEALTH,
    );
  }

  /** Finishes or undoes a change a crash interrupted (see records.ts). */
  private async recover(key: string, intent: Intent) {
    switch (intent.op) {
      case 'create':
        await this.removeAll(intent.rec);
        return [];
      case 'delete':
        await this.removeAll(intent.rec);
        this.cache.delete(intent.rec.location_id);
        return [this.d.records.del(intent.rec.location_id)];
      case 'sync': {
        const rec = this.cache.get(intent.id);
        if (!rec) return [];
        if (!intent.wanted) await this.unmountDir(rec);
        const present = (await mountAt(rec.mount_dir)) !== null;
        const next: LocationRecord = { ...rec, wanted: intent.wanted, mounted: present, mounted_at: present ? rec.mounted_at ?? now() : null };
        this.cache.set(rec.location_id, next);
        return [this.d.records.put(next)];
      }
      default:
        this.d.log.warn({ key }, 'locations: unknown intent dropped');
        return [];
    }
  }

  /** Credential files and config FIFOs a crash may have left in the work directories. */
  private async wipeTransientFiles(): Promise<void> {
    const work = path.join(this.root, 'work');
    for (const id of await fs.readdir(work).catch(() => [] as string[])) {
      const dir = path.join(work, id);
      for (const f of await fs.readdir(dir).catch(() => [] as string[])) {
        if (/^(config|credentials)-/.test(f)) await fs.rm(path.join(dir, f), { force: true });
      }
      // A work directory without a record belongs to a create that never finished.
      if (!this.cache.has(id)) {
        const mnt = path.join(this.root, 'mnt', id);
        if (!(await mountAt(mnt))) {
          await fs.rm(dir, { recursive: true, force: true });
          await fs.rmdir(mnt).catch(() => undefined);
        }
      }
    }
  }

  /** Test hook: HOSTD_TEST_LOCATIONS_PAUSE=<step> stops here forever (a test kills hostd meanwhile). */
  private async pause(step: string): Promise<void> {
    if (this.d.env.HOSTD_TEST_LOCATIONS_PAUSE !== step) return;
    this.d.log.warn({ step }, 'locations: paused for a test');
    await new Promise(() => undefined);
  }
}
