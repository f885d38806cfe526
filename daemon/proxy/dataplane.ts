/**
 * The proxy's data plane on this node: makes the host match what the
 * replicated configuration and the lease say, one reconcile at a time.
 *
 *   serving = configuration enabled AND this node holds the lease
 *             (a node outside any cluster is a cluster of one and holds it)
 *
 * Serving: Caddy runs with the whole configuration loaded (plane-caddy.ts);
 * the floating addresses are claimed once no other host answers for them
 * (plane-vip.ts). Not serving: the floating addresses go first (at the moment
 * the lease change is heard), then Caddy stops. The DNS responder runs
 * wherever the proxy is enabled (plane-dns.ts); upstreams are checked on the
 * holder (plane-checks.ts); an unreachable holder is taken over
 * (plane-takeover.ts).
 */
import type { PeerInfo } from '../domain.js';
import { OPERATOR } from '../lib/operator.js';
import { SerialQueue } from '../lib/serial.js';
import type { ProxyConfig } from './config.js';
import type { ProxyContext } from './context.js';
import { ConfigRefused, type ServePlan } from './driver.js';
import type { Incidents } from './incidents.js';
import type { CaddyPlane } from './plane-caddy.js';
import type { UpstreamChecks } from './plane-checks.js';
import type { DnsPlane } from './plane-dns.js';
import type { ProxyState, StateReports } from './plane-state.js';
import type { HolderWatch } from './plane-takeover.js';
import type { VipPlane } from './plane-vip.js';
import type { Screening } from './screen.js';

export interface PlaneParts {
  screening: Screening;
  incidents: Incidents;
  caddy: CaddyPlane;
  vip: VipPlane;
  dns: DnsPlane;
  checks: UpstreamChecks;
  holders: HolderWatch;
  states: StateReports;
}

export type ApplyResult = 'loaded' | 'refused' | 'failed';
export type ApplyWatcher = (result: ApplyResult, seconds: number) => void;

/** A configuration Caddy refused to load on the holder. */
export interface ApplyError {
  version: number;
  reason: string;
  at: string;
}

export class DataPlane {
  /** The replicated version Caddy serves now (null: nothing loaded). */
  private applied: number | null = null;
  private applyError: ApplyError | null = null;
  private peerList: PeerInfo[] = [];
  private readonly queue = new SerialQueue();
  private pending: Promise<void> | null = null;
  private timers: NodeJS.Timeout[] = [];
  private unsubs: Array<() => void> = [];
  private closed = false;
  private refusedVersion = -1;
  private lastCrash = 0;
  /** Whose call the reconciles now running serve (`actingFor`): their state events name it; else the operator. */
  private actor: string | null = null;
  /** Told of every load of a configuration into Caddy (the metrics domain's apply histogram). */
  private readonly applyWatchers: ApplyWatcher[] = [];

  constructor(
    private readonly ctx: ProxyContext,
    private readonly p: PlaneParts,
  ) {}

  onApply(watch: ApplyWatcher): void {
    this.applyWatchers.push(watch);
  }

  /**
   * Gives Caddy `plan`, telling the watchers how it went and how long it took:
   * `loaded`, `refused` (Caddy said no; it serves the last good one) or
   * `failed` (Caddy could not be asked). One that was already served is no apply.
   */
  private async serve(plan: ServePlan): Promise<boolean> {
    const began = process.hrtime.bigint();
    const tell = (result: ApplyResult) => {
      const seconds = Number(process.hrtime.bigint() - began) / 1e9;
      for (const w of this.applyWatchers) w(result, seconds);
    };
    try {
      const loaded = await this.ctx.drivers.caddy.serve(plan);
      if (loaded) tell('loaded');
      return loaded;
    } catch (err) {
      tell(err instanceof ConfigRefused ? 'refused' : 'failed');
      throw err;
    }
  }

  appliedVersion(): number | null {
    return this.applied;
  }

  lastApplyError(): ApplyError | null {
    return this.applyError;
  }

  /** The cluster's peers as the last tick read them. */
  peers(): PeerInfo[] {
    return this.peerList;
  }

  async open(): Promise<void> {
    const { ctx, p } = this;
    await p.states.open();
    this.unsubs.push(
      ctx.cluster.lease.onChange((s) => {
        // Losing the lease: the floating addresses go at once, before anything else.
        if (!s.holding && ctx.cluster.members().length > 1)
          void p.vip.release().catch((err) => ctx.log.error({ err }, 'releasing the floating address failed'));
        void this.kick();
      }),
      ctx.cluster.proxyConfig.onChange(() => void this.kick()),
      ctx.drivers.caddy.onExit((code, signal) => {
        this.applied = null;
        // Reported at once: the restart below reports `serving` again once Caddy is back.
        if (!this.closed) void p.states.report({ state: 'degraded', data: { reason: 'caddy-exited', exit_code: code, signal } });
        void p.incidents.capture('caddy_exited', `Caddy exited unexpectedly (${code ?? signal})`, { code, signal });
        const wait = Date.now() - this.lastCrash < 5000 ? 1000 : 0;
        this.lastCrash = Date.now();
        setTimeout(() => void this.kick(), wait).unref();
      }),
    );
    const every = (ms: number, fn: () => Promise<unknown>) => {
      const t = setInterval(() => void fn().catch((err) => ctx.log.debug({ err }, 'proxy periodic job failed')), ms);
      t.unref();
      this.timers.push(t);
    };
    every(ctx.settings.tickMs, () => this.tick());
    every(ctx.settings.upstreamCheckMs, () => p.checks.run(true));
    // hostd does not wait for Caddy to start serving (nor for a stuck one).
    void this.kick();
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    for (const u of this.unsubs) u();
    await this.queue.run(async () => {
      await this.p.vip.release(true).catch((err) => this.ctx.log.error({ err }, 'releasing the floating address at close failed'));
      await this.p.caddy.stop();
      await this.p.dns.stop();
    });
  }

  /**
   * Runs a user's change (`fn`) and then a reconcile, and waits for both: the
   * call answers after this node's part of the change and its state event,
   * which names `actor` (so does any reconcile in between: the change lands
   * before `fn` returns and may be reconciled by a kick of its own).
   */
  async actingFor<T>(actor: string, fn: () => Promise<T>): Promise<T> {
    this.actor = actor;
    try {
      const out = await fn();
      await this.kick();
      return out;
    } finally {
      this.actor = null;
    }
  }

  /** Reconciles soon; concurrent kicks share one run. */
  kick(): Promise<void> {
    if (this.pending) return this.pending;
    const run = this.queue.run(async () => {
      this.pending = null;
      if (this.closed) return;
      // A reconcile that failed (logged below) leaves the state as last reported: the next one settles it.
      const state = await this.reconcile();
      if (!this.closed) await this.p.states.report(state, this.actor ?? OPERATOR);
    });
    this.pending = run;
    return run.catch((err) => this.ctx.log.error({ err }, 'proxy reconcile failed'));
  }

  private async tick(): Promise<void> {
    this.peerList = await this.ctx.cluster.peers();
    await this.p.holders.watch(this.peerList);
    // Membership changes, target addresses and claims that must be retried.
    await this.kick();
  }

  /** Whether Caddy can run here (it runs under setpriv). */
  private async caddyReady(): Promise<boolean> {
    return (await this.ctx.drivers.caddy.availability()).every((a) => a.available);
  }

  /** Why this node does not serve `cfg` (the `stopped` state's reason). */
  private stoppedState(cfg: ProxyConfig): ProxyState {
    const holder = this.ctx.holder();
    if (!cfg.enabled) return { state: 'stopped', data: { reason: 'disabled', holder } };
    // Served (or meant to) until now and no longer the holder: the lease went elsewhere.
    return { state: 'stopped', data: { reason: this.p.states.lostLease() ? 'lease-lost' : 'not-holder', holder } };
  }

  /** Makes the host match the configuration and the lease; answers the state this leaves the proxy in. */
  private async reconcile(): Promise<ProxyState> {
    const { ctx, p } = this;
    const snap = ctx.config();
    const cfg = snap.config;
    await p.dns.reconcile(cfg);
    if (!ctx.serving(cfg)) {
      await p.vip.release();
      await p.caddy.stop();
      this.applied = null;
      return this.stoppedState(cfg);
    }
    const runtimes = await ctx.drivers.caddy.availability();
    const missing = runtimes.filter((a) => !a.available);
    if (missing.length) return { state: 'degraded', data: { reason: 'caddy-unavailable', missing: missing.map((a) => `${a.name}: ${a.reason}`) } };
    try {
      await p.caddy.start();
    } catch (err) {
      ctx.log.error({ err }, 'proxy: Caddy did not start');
      return { state: 'degraded', data: { reason: 'caddy-failed', error: (err as Error).message } };
    }
    const { plan, screened } = await p.caddy.plan(cfg);
    p.screening.noteRefusals(screened);
    try {
      if (await this.serve(plan)) this.applyError = null;
    } catch (err) {
      const reason = err instanceof ConfigRefused ? err.reason : (err as Error).message;
      this.applyError = { version: snap.version, reason, at: new Date().toISOString() };
      if (this.refusedVersion !== snap.version) {
        this.refusedVersion = snap.version;
        await p.incidents.capture('config_refused', `Caddy refused configuration version ${snap.version}: ${reason}`, {
          version: snap.version,
          reason,
          refused_config: ctx.drivers.caddy.preview(plan),
        });
      }
      // Caddy keeps the last good configuration (if any); what was refused (a listener, a port) is not served.
      return { state: 'degraded', data: { reason: 'config-refused', error: reason, config_version: snap.version } };
    }
    this.applied = snap.version;
    await p.vip.reconcile(cfg.vip);
    return { state: 'serving', data: { holder: ctx.node.id, config_version: snap.version } };
  }

  /**
   * Runs a change: `candidate` is loaded into Caddy first when this node
   * serves it (ConfigRefused when Caddy refuses it; Caddy keeps the last good
   * one), then `commit` replicates it. Reconciles wait meanwhile, so none
   * acts on the configuration of before the change.
   */
  applyChange<T>(candidate: ProxyConfig, commit: () => Promise<T>): Promise<T> {
    return this.queue.run(async () => {
      if (this.ctx.serving(candidate) && (await this.caddyReady())) {
        await this.p.caddy.start();
        await this.serve((await this.p.caddy.plan(candidate)).plan);
      }
      return commit();
    });
  }

  /** What Caddy would be given for `candidate`, credentials redacted (for the incident of a refusal). */
  async preview(candidate: ProxyConfig): Promise<unknown> {
    return this.ctx.drivers.caddy.preview((await this.p.caddy.plan(candidate)).plan);
  }

  /** Forces a fresh certificate for `domain` (between reconciles). */
  renew(domain: string): Promise<void> {
    return this.queue.run(async () => {
      await this.ctx.drivers.caddy.renewCertificate(domain);
      // `site`: the log's own `domain` field names the hostd domain (proxy).
      this.ctx.log.info({ site: domain }, 'proxy certificate renewal forced');
    });
  }
}
