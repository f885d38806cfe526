/**
 * The proxy's CaddyDriver: Caddy 2.6+ run as hostd's child (process.ts),
 * driven through its admin API on a unix socket (admin.ts) with the JSON
 * built from a plan (build.ts), given the internal CA's root (ca.ts).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { ProbeCache, type Availability } from '../../lib/availability.js';
import { ConfigRefused, type CaRoot, type CaddyDriver, type CaddyLogLine, type ServePlan, type StoredCertificate, type UpstreamCounter } from '../driver.js';
import { bootConfig, buildPlan, redactCaddyConfig } from './build.js';
import { proxyRoot } from './ca.js';
import { CaddyProcess, probeCaddy, type CaddyProbe } from './process.js';

export class CaddyRuntime implements CaddyDriver {
  private readonly process: CaddyProcess;
  private readonly probe: ProbeCache<CaddyProbe>;
  /** The root being made or made, for the seed with this hash. */
  private root: { key: string; made: Promise<CaRoot> } | null = null;
  /** What Caddy serves now: the JSON text (to compare) and the plan's root (to start again on it). */
  private last: { text: string; built: Record<string, unknown>; root: CaRoot } | null = null;

  /** `dir`: `<data dir>/proxy`. */
  constructor(
    private readonly dir: string,
    private readonly logger: Logger,
    binary = 'caddy',
  ) {
    this.process = new CaddyProcess(dir, logger.child({ mod: 'caddy' }), binary);
    this.probe = new ProbeCache(() => probeCaddy(binary));
    // A Caddy that exits on its own serves nothing any more.
    this.process.onExit(() => (this.last = null));
  }

  // ------------------------------------------------------------------ availability, the build

  async availability(opts?: { fresh?: boolean }): Promise<Availability[]> {
    const p = await this.probe.get(opts);
    return [p.caddy, p.setpriv];
  }

  async modules(): Promise<ReadonlySet<string>> {
    return (await this.probe.get()).modules;
  }

  // ------------------------------------------------------------------ the internal CA

  caRoot(seed: Buffer): Promise<CaRoot> {
    const key = crypto.createHash('sha256').update(seed).digest('hex');
    if (this.root?.key !== key) {
      const made = proxyRoot(seed, path.join(this.dir, 'ca'));
      this.root = { key, made };
      made.catch(() => {
        if (this.root?.made === made) this.root = null;
      });
    }
    return this.root.made;
  }

  // ------------------------------------------------------------------ the process

  get bootFile(): string {
    return this.process.bootFile;
  }

  running(): boolean {
    return this.process.running;
  }

  pid(): number | null {
    return this.process.pid;
  }

  async start(root: CaRoot): Promise<number> {
    // Only this Caddy uses this storage: a lock left by one that was stopped mid-issuance is stale.
    fs.rmSync(path.join(this.process.storage, 'locks'), { recursive: true, force: true });
    this.last = null;
    await this.process.start(root);
    return this.process.pid ?? 0;
  }

  async stop(): Promise<void> {
    await this.process.stop();
    this.last = null;
  }

  onExit(cb: (code: number | null, signal: string | null) => void): () => void {
    return this.process.onExit(cb);
  }

  killLeftover(boot: string, pid: number | null): void {
    const pids = new Set<number>();
    if (pid) pids.add(pid);
    try {
      for (const d of fs.readdirSync('/proc')) if (/^\d+$/.test(d)) pids.add(Number(d));
    } catch {
      /* no /proc: only the recorded pid */
    }
    for (const p of pids) {
      let cmd: string;
      try {
        cmd = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8');
      } catch {
        continue;
      }
      const args = cmd.split('\0');
      if (args.includes(boot) && args.some((a) => a.endsWith('caddy')) && args.includes('run')) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
    }
  }

  log(n = 100): CaddyLogLine[] {
    return this.process.recent(n);
  }

  // ------------------------------------------------------------------ the configuration

  private build(plan: ServePlan): Record<string, unknown> {
    return buildPlan(plan, { adminSocket: this.process.adminSocket, storageRoot: this.process.storage });
  }

  async serve(plan: ServePlan): Promise<boolean> {
    this.process.useRoot(plan.caRoot);
    const built = this.build(plan);
    const text = JSON.stringify(built);
    if (this.last?.text === text) return false;
    await this.loadOrRestore(built, plan.caRoot);
    this.last = { text, built, root: plan.caRoot };
    return true;
  }

  /**
   * Loads `built`; when Caddy refuses it, starts Caddy again on the last good
   * configuration before passing the refusal on. Caddy 2.6 rolls a refused
   * load back, but can leave sockets of the refused configuration listening
   * beside the good ones (a second `*:443` socket of the same process, with no
   * certificates behind it): the kernel then hands some connections to it and
   * their handshakes fail with an internal-error alert until Caddy exits. Seen
   * about one refusal in ten here; only a new process is surely clean. The
   * cost is a restart's blip (docs/proxy.md), on refusals only. The new
   * process has the same boot file, which is what a restart after a crash
   * finds it by.
   */
  private async loadOrRestore(built: Record<string, unknown>, root: CaRoot): Promise<void> {
    try {
      await this.process.admin.load(built);
    } catch (err) {
      if (!(err instanceof ConfigRefused)) throw err;
      const good = this.last;
      try {
        await this.process.stop();
        await this.process.start(good?.root ?? root);
        if (good) await this.process.admin.load(good.built);
      } catch (e) {
        this.last = null;
        this.logger.error({ err: (e as Error).message }, 'proxy: restarting Caddy on the last good configuration after a refused one failed');
      }
      throw err;
    }
  }

  async unserve(root: CaRoot): Promise<void> {
    if (!this.process.running) return;
    this.last = null;
    await this.process.admin
      .load(bootConfig({ adminSocket: this.process.adminSocket, storageRoot: this.process.storage, caRoot: root }))
      .catch(() => this.process.stop());
  }

  preview(plan: ServePlan): unknown {
    return redactCaddyConfig(this.build(plan));
  }

  loaded(): unknown {
    return redactCaddyConfig(this.last?.built ?? null);
  }

  // ------------------------------------------------------------------ certificates, the admin API

  /** The storage directories holding a certificate for `*.<domain>`, one per issuer. */
  private certDirs(domain: string): string[] {
    const root = path.join(this.process.storage, 'certificates');
    const name = `wildcard_.${domain}`;
    let issuers: string[] = [];
    try {
      issuers = fs.readdirSync(root);
    } catch {
      return [];
    }
    return issuers.map((i) => path.join(root, i, name)).filter((p) => fs.existsSync(path.join(p, `${name}.crt`)));
  }

  storedCertificate(domain: string): StoredCertificate | { error: string } | null {
    const dir = this.certDirs(domain)[0];
    if (!dir) return null;
    try {
      const pem = fs.readFileSync(path.join(dir, `wildcard_.${domain}.crt`), 'utf8');
      const first = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(pem)?.[0] ?? pem;
      const x = new crypto.X509Certificate(first);
      return {
        issuer: x.issuer.replace(/\n/g, ', '),
        serial: x.serialNumber,
        not_before: new Date(x.validFrom).toISOString(),
        not_after: new Date(x.validTo).toISOString(),
        storage_issuer: path.basename(path.dirname(dir)),
      };
    } catch (err) {
      return { error: `cannot read the stored certificate: ${(err as Error).message}` };
    }
  }

  async renewCertificate(domain: string): Promise<void> {
    for (const d of this.certDirs(domain)) fs.rmSync(d, { recursive: true, force: true });
    if (!this.last) throw new Error('Caddy has no configuration loaded');
    await this.process.admin.load(this.last.built, true);
  }

  adminAnswers(): Promise<boolean> {
    return this.process.running ? this.process.admin.ping() : Promise.resolve(false);
  }

  async upstreamCounters(): Promise<UpstreamCounter[]> {
    if (!(await this.adminAnswers())) return [];
    const list = await this.process.admin.getJson<Array<Record<string, unknown>>>('/reverse_proxy/upstreams').catch(() => []);
    // Caddy's own fields, named here: a later Caddy may add others.
    return list.map((u) => ({ address: String(u.address), num_requests: Number(u.num_requests ?? 0), fails: Number(u.fails ?? 0) }));
  }
}
