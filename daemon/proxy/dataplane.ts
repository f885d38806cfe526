/**
 * The proxy's data plane on this node: makes the host match what the
 * replicated configuration and the lease say.
 *
 *   serving = configuration enabled AND this node holds the lease
 *             (a node outside any cluster is a cluster of one and holds it)
 *
 * Serving: Caddy runs and has the whole configuration loaded (POST /load);
 * the floating addresses are on `vip_iface`, claimed only once no other host
 * answers ARP for them. Not serving: the floating addresses go first (at the
 * moment the lease change is heard), then Caddy stops.
 *
 * Everything that touches the host goes through the intent journal
 * (records.ts) so that a restart after a crash finds and undoes it. The
 * built-in DNS responder runs on every node where the proxy is enabled and
 * `dns_listen` is set. On a member that does not hold the lease, a holder
 * that the cluster's probes report unreachable is taken over (after a grace
 * staggered by member rank, so that members do not duel for it).
 */
import type { ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Logger } from 'pino';
import type { ClusterPorts, LeaseView, NodeIdentity, PeerInfo, Ports } from '../domain.js';
import type { SecretStore } from '../lib/secrets.js';
import { SerialQueue } from '../lib/serial.js';
import { errorBody } from '../lib/errors.js';
import type { Availability } from '../lib/availability.js';
import { validateProxyConfig, type ProxyConfig, type ProxyConfigSnapshot, type ProxyVip } from './config.js';
import { buildCaddyConfig, entryKey, redactCaddyConfig, type UpstreamDial } from './caddy/build.js';
import { CaddyRefused } from './caddy/admin.js';
import { CaddyProcess, probeCaddy, type CaddyProbe } from './caddy/process.js';
import { claimVip, cidr4, cidr6, dropParked, handoffVip, parkable, probeVip, releaseVip, startGuard, type VipProbe } from './net/vip.js';
import { bootConfig } from './caddy/build.js';
import { proxyRoot, type ProxyRoot } from './caddy/ca.js';
import { DnsResponder, parseHostPort } from './dns/responder.js';
import { dialFor, findTarget, listTargets } from './targets.js';
import type { Config } from '../config.js';
import { domainNameProblem } from './config.js';
import { localAddresses } from './policy/addresses.js';
import { HeldPorts, configuredPorts } from './policy/listeners.js';
import { NameResolver } from './policy/resolve.js';
import {
  acmeSettingsProblem, credentialKeysWithBraces, dialRefusal, dnsUpstreamRefusal, headerRefusal, listenPortRefusal, resolveHost,
  type Refusal, type RuleContext,
} from './policy/rules.js';
import type { Incident, IncidentKind, ProxyRecords } from './records.js';
import type { ProxySettings } from './settings.js';

export const SECRET_NS = 'proxy-acme';

export interface UpstreamCheck {
  entry: string;
  dial: string | null;
  reachable: boolean;
  error: string | null;
  latency_ms: number | null;
  checked_at: string;
}

export interface DataPlaneDeps {
  node: NodeIdentity;
  cluster: ClusterPorts;
  ports: Ports;
  secrets: SecretStore;
  records: ProxyRecords;
  log: Logger;
  settings: ProxySettings;
  /** `<data dir>/proxy` */
  dir: string;
  /** The daemon's config: its listeners are ports no entry may publish or take. */
  hostdConfig: Config;
}

/** What the rules decided for one configuration on this node (see policy/rules.ts). */
export interface Screened {
  /** Where each entry's upstream is dialled, or why it cannot be now, by entryKey(). */
  upstreams: Map<string, UpstreamDial>;
  /** Entries refused by a rule, by entryKey(). */
  refused: Map<string, Refusal>;
  /** Domains left out of Caddy's configuration, with why (`provider-missing` is not a containment rule). */
  skipDomains: Map<string, { rule: 'domain-name' | 'acme-placeholder' | 'provider-missing'; message: string }>;
}

/** One refused entry or domain as host-status lists it. */
export interface RefusedItem {
  kind: 'entry' | 'domain' | 'dns-upstream';
  name: string;
  rule: string;
  message: string;
}

/** `fn`'s answer, asked again at most every `ms` (this host's addresses, read per forwarded DNS query otherwise). */
function cachedFor<T>(ms: number, fn: () => T): () => T {
  let at = 0;
  let v: T;
  return () => {
    if (Date.now() - at >= ms) {
      v = fn();
      at = Date.now();
    }
    return v;
  };
}

/** TCP connect to `dial` within `ms`. */
export function tcpCheck(dial: string, ms = 2000): Promise<{ ok: boolean; error: string | null; latency_ms: number | null }> {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(dial);
  if (!m) return Promise.resolve({ ok: false, error: `'${dial}' is not host:port`, latency_ms: null });
  const t0 = process.hrtime.bigint();
  return new Promise((resolve) => {
    const s = net.connect({ host: m[1], port: Number(m[2]) });
    const done = (ok: boolean, error: string | null) => {
      s.destroy();
      resolve({ ok, error, latency_ms: ok ? Number(process.hrtime.bigint() - t0) / 1e6 : null });
    };
    s.setTimeout(ms, () => done(false, `no connection within ${ms} ms`));
    s.once('connect', () => done(true, null));
    s.once('error', (err) => done(false, err.message));
  });
}

/**
 * Test-only: with HOSTD_TEST_PROXY_PAUSE=<step>, the data plane stops for
 * good at that step (after the host was changed, before the store says so),
 * so that a test can kill hostd exactly there. Steps: caddy-started, vip-claimed.
 */
async function testPause(step: string, log: Logger): Promise<void> {
  if (process.env.HOSTD_TEST_PROXY_PAUSE !== step) return;
  log.warn({ step }, 'proxy paused at a test step');
  await new Promise(() => undefined);
}

/** What the members' shared secret is used for here (changing it changes every root). */
const CA_PURPOSE = 'hostd proxy internal CA root v1';

export class DataPlane {
  /** The internal CA root being made or made, for the seed with this hash. */
  private root: { key: string; made: Promise<ProxyRoot> } | null = null;
  readonly caddy: CaddyProcess;
  caddyProbe: CaddyProbe = { caddy: { name: 'caddy', version: null, available: false, reason: 'not probed yet' }, setpriv: { name: 'setpriv', version: null, available: false, reason: 'not probed yet' }, modules: new Set() };
  vipProbe: VipProbe = { ip: { name: 'ip', version: null, available: false, reason: 'not probed yet' }, arping: { name: 'arping', version: null, available: false, reason: 'not probed yet' } };
  /** The replicated version Caddy serves now (null: nothing loaded). */
  appliedVersion: number | null = null;
  lastApplyError: { version: number; reason: string; at: string } | null = null;
  vipError: string | null = null;
  dnsError: string | null = null;
  readonly upstreamChecks = new Map<string, UpstreamCheck>();
  dns: DnsResponder | null = null;

  private lastLoadedText: string | null = null;
  private lastLoadedObj: unknown = null;
  private claimed: { iface: string; cidrs: string[]; key: string } | null = null;
  private guard: ChildProcess | null = null;
  private readonly queue = new SerialQueue();
  private readonly vipQueue = new SerialQueue();
  private pending: Promise<void> | null = null;
  private timers: NodeJS.Timeout[] = [];
  private unsubs: Array<() => void> = [];
  private closed = false;
  private peersCache: PeerInfo[] = [];
  private holderUnreachableSince: number | null = null;
  private takeoverInFlight = false;
  private readonly credentials = new Map<string, Record<string, string>>();
  private refusedVersion = -1;
  private lastCrash = 0;
  private lastRefusedText = '';
  /** The containment rules as this node applies them (its settings, its listeners, its addresses). */
  readonly rules: RuleContext;

  constructor(private readonly d: DataPlaneDeps) {
    this.caddy = new CaddyProcess(d.dir, d.log.child({ mod: 'caddy' }), d.settings.caddyBinary);
    this.rules = {
      allowLoopback: d.settings.allowLoopbackUpstreams,
      allowPrivilegedPorts: d.settings.allowPrivilegedListenPorts,
      held: new HeldPorts(() => configuredPorts(d.hostdConfig, d.settings.dnsListen?.port ?? null)),
      local: cachedFor(1000, localAddresses),
      resolver: new NameResolver(),
    };
  }

  get config(): ProxyConfigSnapshot {
    return this.d.cluster.proxyConfig.get() as ProxyConfigSnapshot;
  }

  lease(): LeaseView {
    return this.d.cluster.lease.state();
  }

  /** A node alone (no cluster) holds the proxy; in a cluster, the lease decides. */
  holdsProxy(): boolean {
    const members = this.d.cluster.members();
    if (members.length <= 1) return true;
    return this.lease().holding;
  }

  serving(cfg: ProxyConfig = this.config.config): boolean {
    return cfg.enabled && this.holdsProxy();
  }

  runtimes(): Availability[] {
    return [this.caddyProbe.caddy, this.caddyProbe.setpriv, this.vipProbe.ip, this.vipProbe.arping];
  }

  async open(): Promise<void> {
    const undone = await this.d.records.recover(async (v) => {
      await releaseVip({ vip_iface: v.iface, cidrs: v.cidrs }).catch((err) => this.d.log.warn({ err, v }, 'could not remove a floating address left by the last run'));
      await dropParked(parkable(v.cidrs)).catch(() => undefined);
    }, (addrs) => dropParked(addrs).catch((err) => this.d.log.warn({ err, addrs }, 'could not remove a parked floating address')));
    if (undone.intents || undone.vip || undone.caddy) this.d.log.warn(undone, 'proxy: undid what the last run left on the host');
    [this.caddyProbe, this.vipProbe] = await Promise.all([probeCaddy(this.d.settings.caddyBinary), probeVip()]);
    for (const name of await this.d.secrets.list(SECRET_NS)) {
      const v = await this.d.secrets.get(SECRET_NS, name).catch(() => null);
      if (v) this.credentials.set(name, JSON.parse(v) as Record<string, string>);
    }
    this.unsubs.push(
      this.d.cluster.lease.onChange((s) => {
        // Losing the lease: the floating addresses go at once, before anything else.
        if (!s.holding && this.d.cluster.members().length > 1) void this.releaseClaim().catch((err) => this.d.log.error({ err }, 'releasing the floating address failed'));
        void this.kick();
      }),
      this.d.cluster.proxyConfig.onChange(() => void this.kick()),
      this.caddy.onExit((code, signal) => {
        this.lastLoadedText = null;
        this.appliedVersion = null;
        void this.capture('caddy_exited', `Caddy exited unexpectedly (${code ?? signal})`, { code, signal });
        const wait = Date.now() - this.lastCrash < 5000 ? 1000 : 0;
        this.lastCrash = Date.now();
        setTimeout(() => void this.kick(), wait).unref();
      }),
    );
    const every = (ms: number, fn: () => Promise<unknown>) => {
      const t = setInterval(() => void fn().catch((err) => this.d.log.debug({ err }, 'proxy periodic job failed')), ms);
      t.unref();
      this.timers.push(t);
    };
    every(this.d.settings.tickMs, () => this.tick());
    every(this.d.settings.upstreamCheckMs, () => this.checkUpstreams(true));
    // hostd does not wait for Caddy to start serving (nor for a stuck one).
    void this.kick();
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    for (const u of this.unsubs) u();
    await this.queue.run(async () => {
      await this.vipQueue.run(() => this.releaseLocked(true)).catch((err) => this.d.log.error({ err }, 'releasing the floating address at close failed'));
      await this.stopCaddy();
      await this.dns?.stop();
      this.dns = null;
    });
  }

  /** Reconciles soon; concurrent kicks share one run. */
  kick(): Promise<void> {
    if (this.pending) return this.pending;
    const p = this.queue.run(async () => {
      this.pending = null;
      if (this.closed) return;
      await this.reconcile();
    });
    this.pending = p;
    return p.catch((err) => this.d.log.error({ err }, 'proxy reconcile failed'));
  }

  private async tick(): Promise<void> {
    this.peersCache = await this.d.cluster.peers();
    await this.watchHolder();
    // Membership changes, target addresses and claims that must be retried.
    await this.kick();
  }

  // ------------------------------------------------------------------ reconcile

  private async reconcile(): Promise<void> {
    const snap = this.config;
    const cfg = snap.config;
    await this.reconcileDns(cfg);
    if (!this.serving(cfg)) {
      await this.releaseClaim();
      await this.stopCaddy();
      this.appliedVersion = null;
      return;
    }
    if (!this.caddyProbe.caddy.available || !this.caddyProbe.setpriv.available) return;
    await this.ensureCaddy();
    const { built, screened } = await this.buildScreened(cfg);
    this.noteRefusals(screened);
    const text = JSON.stringify(built);
    if (text !== this.lastLoadedText) {
      try {
        await this.loadOrRestore(built);
        this.lastLoadedText = text;
        this.lastLoadedObj = built;
        this.lastApplyError = null;
      } catch (err) {
        const reason = err instanceof CaddyRefused ? err.reason : (err as Error).message;
        this.lastApplyError = { version: snap.version, reason, at: new Date().toISOString() };
        if (this.refusedVersion !== snap.version) {
          this.refusedVersion = snap.version;
          await this.capture('config_refused', `Caddy refused configuration version ${snap.version}: ${reason}`, { version: snap.version, reason, refused_config: redactCaddyConfig(built) });
        }
        return;
      }
    }
    this.appliedVersion = snap.version;
    await this.reconcileVip(cfg.vip);
  }

  /**
   * Runs a change: `candidate` is loaded into Caddy first when this node
   * serves it (CaddyRefused when Caddy refuses it; Caddy keeps the last good
   * one), then `commit` replicates it. Reconciles wait meanwhile, so none
   * acts on the configuration of before the change.
   */
  async applyChange<T>(candidate: ProxyConfig, commit: () => Promise<T>): Promise<T> {
    return this.queue.run(async () => {
      if (this.serving(candidate) && this.caddyProbe.caddy.available && this.caddyProbe.setpriv.available) {
        await this.ensureCaddy();
        const built = await this.build(candidate);
        const text = JSON.stringify(built);
        if (text !== this.lastLoadedText) {
          await this.loadOrRestore(built);
          this.lastLoadedText = text;
          this.lastLoadedObj = built;
        }
      }
      return commit();
    });
  }

  /**
   * Loads `built`; when Caddy refuses it, restarts Caddy on the last good
   * configuration before passing the refusal on. Caddy 2.6 rolls a refused
   * load back, but can leave sockets of the refused configuration listening
   * beside the good ones (a second `*:443` socket of the same process, with no
   * certificates behind it): the kernel then hands some connections to it and
   * their handshakes fail with an internal-error alert until Caddy exits. Seen
   * about one refusal in ten here; only a new process is surely clean. The
   * cost is a restart's blip (docs/proxy.md), on refusals only.
   */
  private async loadOrRestore(built: unknown): Promise<void> {
    try {
      await this.caddy.admin.load(built);
    } catch (err) {
      if (!(err instanceof CaddyRefused)) throw err;
      const good = this.lastLoadedObj;
      try {
        await this.stopCaddy();
        await this.ensureCaddy();
        if (good) {
          await this.caddy.admin.load(good);
          this.lastLoadedText = JSON.stringify(good);
          this.lastLoadedObj = good;
        }
      } catch (e) {
        this.d.log.error({ err: (e as Error).message }, 'proxy: restarting Caddy on the last good configuration after a refused one failed');
      }
      throw err;
    }
  }

  /** Forces a fresh certificate for `domain`: its stored certificate is removed and the configuration reloaded. */
  async renew(domainName: string, certFiles: string[]): Promise<void> {
    await this.queue.run(async () => {
      for (const f of certFiles) fs.rmSync(f, { recursive: true, force: true });
      if (!this.lastLoadedObj) throw new Error('Caddy has no configuration loaded');
      await this.caddy.admin.load(this.lastLoadedObj, true);
      this.d.log.info({ domain: domainName }, 'proxy certificate renewal forced');
    });
  }

  private async ensureCaddy(): Promise<void> {
    if (this.caddy.running) return;
    this.lastLoadedText = null;
    const boot = this.caddy.bootFile;
    // Only this Caddy uses this storage: a lock left by one that was stopped mid-issuance is stale.
    fs.rmSync(path.join(this.caddy.storage, 'locks'), { recursive: true, force: true });
    await this.d.records.journal.run('caddy', { kind: 'caddy-start', boot }, async () => {
      await this.caddy.start(await this.caRoot());
      await testPause('caddy-started', this.d.log);
      return this.caddy.pid ?? 0;
    }, {
      commit: (pid) => [this.d.records.putCaddy({ pid, boot })],
      rollback: () => this.caddy.stop(),
    });
  }

  private async stopCaddy(): Promise<void> {
    if (!this.caddy.running && !(await this.d.records.caddy())) return;
    const boot = this.caddy.bootFile;
    await this.d.records.journal.run('caddy', { kind: 'caddy-stop', pid: this.caddy.pid, boot }, () => this.caddy.stop(), {
      commit: () => [this.d.records.delCaddy()],
    });
    this.lastLoadedText = null;
    this.lastLoadedObj = null;
  }

  /**
   * The internal CA's root, the same on every member: derived from the
   * cluster's shared secret, or (outside a cluster) from a seed this node keeps
   * in its secret store. Joining or leaving a cluster changes it.
   */
  async caRoot(): Promise<ProxyRoot> {
    const seed = this.d.cluster.sharedSecret(CA_PURPOSE) ?? (await this.localCaSeed());
    const key = crypto.createHash('sha256').update(seed).digest('hex');
    if (this.root?.key !== key) {
      const made = proxyRoot(seed, path.join(this.d.dir, 'ca'));
      this.root = { key, made };
      made.catch(() => { if (this.root?.made === made) this.root = null; });
    }
    return this.root.made;
  }

  private async localCaSeed(): Promise<Buffer> {
    let hex = await this.d.secrets.get('proxy', 'ca-seed');
    if (!hex) {
      hex = crypto.randomBytes(32).toString('hex');
      await this.d.secrets.put('proxy', 'ca-seed', hex);
    }
    return Buffer.from(hex, 'hex');
  }

  /**
   * The rules applied to every entry and domain of `cfg` on this node:
   * where each upstream is dialled (targets and host names resolved here),
   * what is refused and why. Build and host-status both read it.
   */
  async screen(cfg: ProxyConfig): Promise<Screened> {
    const upstreams = new Map<string, UpstreamDial>();
    const refused = new Map<string, Refusal>();
    const skipDomains: Screened['skipDomains'] = new Map();
    const needTargets = cfg.domains.some((d) => d.entries.some((e) => e.target_id !== null));
    const targets = needTargets ? (await listTargets(this.d.ports.all('guests'))).targets : [];
    // One look at this host's addresses for the whole pass.
    const local = this.rules.local();
    const ctx: RuleContext = { ...this.rules, local: () => local };
    const acmeBad = acmeSettingsProblem(cfg.acme);
    for (const d of cfg.domains) {
      const nameBad = domainNameProblem(d.name);
      if (nameBad) skipDomains.set(d.name, { rule: 'domain-name', message: `domain name '${d.name}' ${nameBad}` });
      else if (d.cert_source !== 'internal') {
        const braces = credentialKeysWithBraces(this.credentials.get(d.cert_source) ?? {});
        if (!this.caddyProbe.modules.has(`dns.providers.${d.cert_source}`)) skipDomains.set(d.name, { rule: 'provider-missing', message: `this Caddy build has no module dns.providers.${d.cert_source}` });
        else if (acmeBad) skipDomains.set(d.name, { rule: 'acme-placeholder', message: acmeBad });
        else if (braces.length) skipDomains.set(d.name, { rule: 'acme-placeholder', message: `the stored ${d.cert_source} credentials hold a brace in ${braces.join(', ')}, which the provider module would expand as a placeholder; store them again` });
      }
      await Promise.all(d.entries.map(async (e) => {
        const k = entryKey(d.name, e);
        const r = listenPortRefusal(e.listen_port, ctx) ?? headerRefusal(e.header_up);
        if (r) {
          refused.set(k, r);
          return;
        }
        if (e.host !== null) {
          const h = await resolveHost(e.host, e.port, ctx);
          if ('refusal' in h) refused.set(k, h.refusal);
          else upstreams.set(k, 'error' in h ? { error: h.error } : { dial: h.dial, serverName: h.serverName });
          return;
        }
        try {
          const t = findTarget(targets, e.target_id!);
          const dial = dialFor(t, e.port);
          if ('error' in dial) {
            upstreams.set(k, dial);
            return;
          }
          const bad = dialRefusal(dial.ip, e.port, { target: t.target_id, kind: t.kind }, ctx);
          if (bad) refused.set(k, bad);
          else upstreams.set(k, { dial: dial.dial });
        } catch (err) {
          upstreams.set(k, { error: errorBody(err).body.error });
        }
      }));
    }
    return { upstreams, refused, skipDomains };
  }

  /** What the rules refuse in `cfg` on this node, as host-status lists it. */
  async refusals(cfg: ProxyConfig = this.config.config): Promise<RefusedItem[]> {
    const s = await this.screen(cfg);
    return [
      ...[...s.skipDomains].filter(([, x]) => x.rule !== 'provider-missing').map(([name, x]) => ({ kind: 'domain' as const, name, rule: x.rule, message: x.message })),
      ...[...s.refused].map(([name, r]) => ({ kind: 'entry' as const, name, rule: r.rule, message: r.message })),
      ...this.dnsUpstreams(cfg.dns_upstreams).refused.map((x) => ({ kind: 'dns-upstream' as const, name: x.upstream, rule: x.refusal.rule, message: x.refusal.message })),
    ].sort((a, b) => a.name.localeCompare(b.name));
  }

  /** The Caddy JSON for `cfg`: the rules applied, targets resolved, credentials from the secret store. */
  async build(cfg: ProxyConfig): Promise<Record<string, unknown>> {
    return (await this.buildScreened(cfg)).built;
  }

  private async buildScreened(cfg: ProxyConfig): Promise<{ built: Record<string, unknown>; screened: Screened }> {
    const screened = await this.screen(cfg);
    const root = await this.caRoot();
    this.caddy.useRoot(root);
    const built = buildCaddyConfig(cfg, {
      adminSocket: this.caddy.adminSocket,
      storageRoot: this.caddy.storage,
      listenHost: this.d.settings.listenHost,
      upstreams: screened.upstreams,
      refused: screened.refused,
      credentials: this.credentials,
      skipDomains: new Set(screened.skipDomains.keys()),
      caRoot: root,
    });
    return { built, screened };
  }

  /** Says once (per change) in hostd's log what the rules leave out of Caddy's configuration. */
  private noteRefusals(s: Screened): void {
    const items = [...s.refused].map(([entry, r]) => ({ entry, rule: r.rule, message: r.message }));
    const text = JSON.stringify(items);
    if (text === this.lastRefusedText) return;
    this.lastRefusedText = text;
    if (items.length) this.d.log.warn({ refused: items }, 'proxy: entries refused by the proxy rules are left out of what Caddy dials (GET /proxy/host-status)');
  }

  /** Dial addresses per entry key (for diagnostics and checks); `refused` marks what the rules refused. */
  async dials(cfg: ProxyConfig): Promise<Map<string, { dial: string } | { error: string; refused?: boolean }>> {
    const s = await this.screen(cfg);
    const out = new Map<string, { dial: string } | { error: string; refused?: boolean }>();
    for (const d of cfg.domains) {
      if (s.skipDomains.has(d.name)) continue;
      for (const e of d.entries) {
        const k = entryKey(d.name, e);
        const r = s.refused.get(k);
        const up = s.upstreams.get(k);
        out.set(k, r ? { error: `refused by the proxy rules (${r.rule}): ${r.message}`, refused: true } : up && 'dial' in up ? { dial: up.dial } : { error: up?.error ?? 'upstream not resolved' });
      }
    }
    return out;
  }

  setCredentials(provider: string, creds: Record<string, string>): void {
    this.credentials.set(provider, creds);
  }

  hasCredentials(provider: string): boolean {
    return this.credentials.has(provider);
  }

  // ------------------------------------------------------------------ floating addresses

  private vipKey = (v: ProxyVip) => `${v.vip_iface}|${cidr4(v)}|${cidr6(v) ?? ''}`;

  private async reconcileVip(v: ProxyVip | null): Promise<void> {
    await this.vipQueue.run(async () => {
      if (this.claimed && (!v || this.claimed.key !== this.vipKey(v))) await this.releaseLocked();
      if (!v || this.claimed) return;
      if (!this.vipProbe.ip.available || !this.vipProbe.arping.available) {
        this.vipError = `${!this.vipProbe.ip.available ? this.vipProbe.ip.reason : this.vipProbe.arping.reason}`;
        return;
      }
      // Lost the lease while waiting for this queue: claim nothing.
      if (!this.serving()) return;
      const cidrs = [cidr4(v), ...(cidr6(v) ? [cidr6(v)!] : [])];
      // The guard is armed before the address is added: hostd may die the moment it is up.
      const guard = startGuard(v.vip_iface, cidrs, Math.ceil(this.d.settings.handoffMs / 1000));
      try {
        await this.d.records.journal.run('vip', { kind: 'vip-add', iface: v.vip_iface, cidrs }, async () => {
          await claimVip(v);
          await testPause('vip-claimed', this.d.log);
        }, {
          commit: () => [this.d.records.putVip({ iface: v.vip_iface, cidrs })],
          rollback: () => releaseVip({ vip_iface: v.vip_iface, cidrs }),
        });
      } catch (err) {
        guard.kill('SIGUSR1');
        const msg = errorBody(err).body.error;
        if (this.vipError !== msg && errorBody(err).status === 409) await this.capture('vip_conflict', msg, { vip: v });
        this.vipError = msg;
        return;
      }
      this.vipError = null;
      this.claimed = { iface: v.vip_iface, cidrs, key: this.vipKey(v) };
      this.guard = guard;
      this.d.log.info({ iface: v.vip_iface, cidrs }, 'floating addresses claimed');
    });
  }

  private releaseClaim(): Promise<void> {
    return this.vipQueue.run(() => this.releaseLocked());
  }

  private async releaseLocked(closing = false): Promise<void> {
    const c = this.claimed ?? (await this.d.records.vip().then((v) => (v ? { ...v, key: '' } : null)));
    if (!c) return;
    // No longer the holder: Caddy's servers go before the address is parked on lo, so that
    // clients still sent here are refused at once, never served by two nodes.
    if (!this.serving() && this.caddy.running) {
      await this.caddy.admin.load(bootConfig({ adminSocket: this.caddy.adminSocket, storageRoot: this.caddy.storage, caRoot: await this.caRoot() })).catch(() => this.caddy.stop());
      this.lastLoadedText = null;
      this.lastLoadedObj = null;
    }
    let parked: string[] = [];
    await this.d.records.journal.run('vip', { kind: 'vip-del', iface: c.iface, cidrs: c.cidrs }, async () => {
      parked = await handoffVip(c.iface, c.cidrs);
    }, {
      commit: () => [this.d.records.delVip(), this.d.records.putParked(parkable(c.cidrs))],
    });
    this.claimed = null;
    const g = this.guard;
    this.guard = null;
    if (g && g.exitCode === null && g.signalCode === null) {
      const gone = new Promise<void>((r) => g.once('exit', () => r()));
      g.kill('SIGUSR1');
      await Promise.race([gone, new Promise((r) => setTimeout(r, 2000))]);
    }
    this.d.log.info({ iface: c.iface, cidrs: c.cidrs, parked }, 'floating addresses released');
    if (closing) await this.dropParkedNow(parked);
    else {
      const t = setTimeout(() => void this.vipQueue.run(() => this.dropParkedNow(parked)).catch(() => undefined), this.d.settings.handoffMs);
      t.unref();
    }
  }

  private async dropParkedNow(addrs: string[]): Promise<void> {
    // A claim since then took the address back: its own claim removed the parked copy.
    if (this.claimed) return;
    await dropParked(addrs);
    await this.d.records.state.del('parked');
  }

  vipState(): { claimed: boolean; iface: string | null; cidrs: string[]; error: string | null } {
    return { claimed: !!this.claimed, iface: this.claimed?.iface ?? null, cidrs: this.claimed?.cidrs ?? [], error: this.vipError };
  }

  // ------------------------------------------------------------------ DNS

  private async reconcileDns(cfg: ProxyConfig): Promise<void> {
    const want = cfg.enabled ? this.d.settings.dnsListen : null;
    if (this.dns && (!want || this.dns.host !== want.host || this.dns.port !== want.port)) {
      await this.dns.stop();
      this.dns = null;
    }
    if (!want || this.dns) return;
    const r = new DnsResponder(want.host, want.port, { zone: (name) => this.zoneAnswer(name), upstreams: () => this.dnsUpstreams().allowed });
    try {
      await r.start();
      this.dns = r;
      this.dnsError = null;
    } catch (err) {
      this.dnsError = `cannot listen on ${want.host}:${want.port}: ${(err as Error).message}`;
    }
  }

  /** The configured forwarders this node's rules allow, and those they refuse (stored before the rules). */
  dnsUpstreams(list: string[] = this.config.config.dns_upstreams): { allowed: string[]; refused: Array<{ upstream: string; refusal: Refusal }> } {
    const allowed: string[] = [];
    const refused: Array<{ upstream: string; refusal: Refusal }> = [];
    for (const u of list) {
      const hp = parseHostPort(u);
      const r = hp ? dnsUpstreamRefusal(u, hp, this.rules) : null;
      if (r) refused.push({ upstream: u, refusal: r });
      else allowed.push(u);
    }
    return { allowed, refused };
  }

  /** What the responder answers for a name under a base domain. */
  zoneAnswer(name: string): { inZone: boolean; a: string[]; aaaa: string[] } {
    const cfg = this.config.config;
    const inZone = cfg.domains.some((d) => name === d.name || name.endsWith(`.${d.name}`));
    if (!inZone) return { inZone, a: [], aaaa: [] };
    if (cfg.vip) return { inZone, a: [cfg.vip.vip], aaaa: cfg.vip.vip6 ? [cfg.vip.vip6] : [] };
    const addr = this.holderAddress();
    return { inZone, a: addr && net.isIPv4(addr) ? [addr] : [], aaaa: addr && net.isIPv6(addr) ? [addr] : [] };
  }

  /** The holder's address: this node's `address` setting when it holds, else the holder's cluster address. */
  holderAddress(): string | null {
    if (this.holdsProxy()) {
      if (this.d.settings.address) return this.d.settings.address;
      const h = this.d.settings.dnsListen?.host;
      return h && h !== '0.0.0.0' && h !== '::' ? h : null;
    }
    const holder = this.lease().holder;
    const p = this.peersCache.find((x) => x.peer_id === holder);
    if (!p?.address) return null;
    const m = /^\[?([^\]]+?)\]?:\d+$/.exec(p.address);
    return m ? m[1] : p.address;
  }

  // ------------------------------------------------------------------ takeover

  private async watchHolder(): Promise<void> {
    const s = this.lease();
    const members = this.d.cluster.members();
    if (!this.config.config.enabled || !this.d.settings.autoTakeover || members.length <= 1 || s.holding || s.holder === null) {
      this.holderUnreachableSince = null;
      return;
    }
    const holder = this.peersCache.find((p) => p.peer_id === s.holder);
    if (!holder || holder.reachable) {
      this.holderUnreachableSince = null;
      return;
    }
    const now = Date.now();
    this.holderUnreachableSince ??= now;
    const candidates = this.peersCache.filter((p) => p.reachable && p.peer_id !== s.holder).map((p) => p.peer_id).sort();
    const rank = Math.max(0, candidates.indexOf(this.d.node.id));
    if (now - this.holderUnreachableSince < this.d.settings.takeoverGraceMs + rank * 1000 || this.takeoverInFlight) return;
    this.takeoverInFlight = true;
    const since = this.holderUnreachableSince;
    try {
      const r = await this.d.cluster.lease.takeover();
      if (r.holding) {
        this.d.log.warn({ previous: s.holder, epoch: r.epoch }, 'proxy taken over: the holder was unreachable');
        await this.noteTakeover(s.holder, r, { automatic: true, unreachable_for_ms: Date.now() - since });
      }
    } catch (err) {
      this.d.log.info({ err: errorBody(err).body.error }, 'proxy takeover not done');
    } finally {
      this.takeoverInFlight = false;
    }
  }

  /** Records a takeover (automatic, or through POST /proxy/move without peer_id). */
  async noteTakeover(previous: string | null, now: LeaseView, details: Record<string, unknown>): Promise<void> {
    await this.capture('takeover', `Proxy taken over by ${this.d.node.id} at epoch ${now.epoch} from ${previous ?? 'nobody'}`, { previous_holder: previous, ...details });
    void this.kick();
  }

  // ------------------------------------------------------------------ upstream checks

  /** TCP checks of every entry's upstream; `capture` records an incident when one starts failing. */
  async checkUpstreams(capture: boolean): Promise<UpstreamCheck[]> {
    if (!this.serving()) {
      this.upstreamChecks.clear();
      return [];
    }
    const dials = await this.dials(this.config.config);
    const out: UpstreamCheck[] = [];
    await Promise.all(
      [...dials].map(async ([entry, d]) => {
        const at = new Date().toISOString();
        const r = 'dial' in d ? await tcpCheck(d.dial) : { ok: false, error: d.error, latency_ms: null };
        const c: UpstreamCheck = { entry, dial: 'dial' in d ? d.dial : null, reachable: r.ok, error: r.error, latency_ms: r.latency_ms, checked_at: at };
        const before = this.upstreamChecks.get(entry);
        this.upstreamChecks.set(entry, c);
        // A refused entry is listed in host-status; it is not an upstream failure.
        if (capture && !r.ok && (!before || before.reachable) && !('refused' in d && d.refused)) {
          await this.capture('upstream_failed', `Upstream of ${entry} (${c.dial ?? 'unresolved'}) failed its check: ${r.error}`, { check: c });
        }
        out.push(c);
      }),
    );
    for (const k of [...this.upstreamChecks.keys()]) if (!dials.has(k)) this.upstreamChecks.delete(k);
    return out.sort((a, b) => a.entry.localeCompare(b.entry));
  }

  // ------------------------------------------------------------------ incidents

  private redactText(s: string): string {
    let out = s;
    for (const creds of this.credentials.values()) for (const v of Object.values(creds)) if (v.length >= 4) out = out.split(v).join('[redacted]');
    return out;
  }

  async capture(kind: IncidentKind, summary: string, details: Record<string, unknown>): Promise<Incident | null> {
    try {
      const snap = this.config;
      const l = this.lease();
      const raw = {
        kind,
        at: new Date().toISOString(),
        node_id: this.d.node.id,
        summary,
        lease: { holder: l.holder ?? (this.holdsProxy() ? this.d.node.id : null), epoch: l.epoch, holding: this.holdsProxy() },
        config_version: snap.version,
        config: validateProxyConfig(snap.config),
        caddy_config: redactCaddyConfig(this.lastLoadedObj),
        caddy_log: this.caddy.recent(100),
        details,
      };
      const clean = JSON.parse(this.redactText(JSON.stringify(raw))) as Omit<Incident, 'incident_id'>;
      const inc = await this.d.records.addIncident(clean);
      this.d.log.warn({ incident_id: inc.incident_id, kind }, `proxy incident: ${summary}`);
      return inc;
    } catch (err) {
      this.d.log.error({ err }, 'capturing a proxy incident failed');
      return null;
    }
  }

  loadedCaddyConfig(): unknown {
    return redactCaddyConfig(this.lastLoadedObj);
  }

  certDir(): string {
    return path.join(this.caddy.storage, 'certificates');
  }
}
