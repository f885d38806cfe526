/**
 * The daemon's metrics: what it counts as it goes (requests, tasks, holder
 * changes), what it reads when scraped (members, the proxy lease, runtimes),
 * and the exposition. Reading at scrape time is cached briefly, so that a
 * scraper polling every second costs each runtime probe at most once per
 * cache period, and nothing is read on the path of another call.
 */
import type { RequestLog, RequestLine } from '../logger.js';
import type { TaskRecord, Tasks, TaskStart, TaskWork } from '../lib/tasks.js';
import type {
  DomainInfo,
  GuestInfo,
  GuestSource,
  LeasePort,
  MountStates,
  PeerInfo,
  ProxyFigures,
  ResourceUsage,
  SandboxStarts,
  UsageSource,
  WarmResumes,
} from '../domain.js';
import client from 'prom-client';
import type { BatchParticipant } from '../store/store.js';
import type { NewEvent } from '../events/types.js';
import { Families, openMetricsRegistry } from './families.js';
import { RequestTally } from './request-tally.js';
import { BoundedRead } from './bounded-read.js';
import { RESOURCE_KINDS, ResourceFamilies, type KindSnapshot, type ResourceKind } from './resources.js';

/** How long what a scrape read stays good for the next one. */
const SCRAPE_CACHE_MS = 5_000;
/** How long a scrape waits for one runtime's figures before it serves the last ones (a hung runtime never holds it longer). */
export const READ_WAIT_MS = 2_000;
/** Figures older than this are not served while their runtime's read hangs (the series go away instead). */
const STALE_MS = 60_000;

export interface ScrapeSources {
  nodeId: string;
  nodeName: string;
  version: string;
  lease: LeasePort;
  peers(): Promise<PeerInfo[]>;
  domainInfo(): Promise<DomainInfo[]>;
  /** Every guests port (each resource's id, name, state) and every usage port (running resources' figures). */
  guests(): GuestSource[];
  usage(): UsageSource[];
  /** The locations' and the proxy's read-only views (absent: that domain is not in this build). */
  mountStates(): MountStates[];
  proxyFigures(): ProxyFigures[];
  /** Where sandbox starts and warm-state resumes are heard as they end (absent: no such domain in this build). */
  sandboxStarts?(): SandboxStarts[];
  warmResumes?(): WarmResumes[];
}

/** A member a call can be forwarded to, as dispatch's forwarder resolves it. */
export interface ForwardRoute {
  forward(...args: any[]): Promise<unknown>;
}

export type MetricsFormat = 'prometheus' | 'openmetrics';

/**
 * Which series an exposition holds: `aggregates` (the token-less listener)
 * only the daemon's and host's; a caller's scopes add each kind of
 * per-resource series whose read scope they hold.
 */
export type Audience = 'aggregates' | { scopes: readonly string[] };

export class MetricsService {
  readonly families = new Families();
  private unsubscribe: (() => void) | null = null;
  /** Families a caller sees only with a scope beside system.read (never on the token-less listener). */
  private scoped: Array<{ scope: string; text: client.Registry; open: client.Registry }> = [];

  /** A request log that also counts each call (MCP batches count each tool once). */
  observeRequests(inner: RequestLog): RequestLog {
    const tally = this.families.requestTally;
    return {
      write(line: RequestLine) {
        inner.write(line);
        const transport = line.transport ?? 'api';
        const seconds = line.ms / 1000;
        const op = line.op;
        if (!op) tally.note('none', transport, line.status, seconds);
        else if (op.indexOf(',') === -1) tally.note(op, transport, line.status, seconds);
        else for (const operation of op.split(',')) tally.note(operation, transport, line.status, seconds);
      },
    };
  }

  /** The task runner as domains see it, counting each task's start, end and duration. */
  observeTasks<T extends Tasks>(inner: T): Tasks {
    const f = this.families;
    return {
      start(what: TaskStart, work: TaskWork): TaskRecord {
        const rec = inner.start(what, work);
        const kind = what.kind;
        f.tasksStarted.inc({ kind });
        f.tasksActive.inc({ kind });
        const began = process.hrtime.bigint();
        void inner.settled(rec.task_id).then(
          (end) => {
            f.tasksActive.dec({ kind });
            f.tasksEnded.inc({ kind, state: end.state });
            f.taskSeconds.observe({ kind }, Number(process.hrtime.bigint() - began) / 1e9);
          },
          () => f.tasksActive.dec({ kind }),
        );
        return rec;
      },
      get: (id) => inner.get(id),
      settled: (id) => inner.settled(id),
    };
  }

  /**
   * The event log as the activity log joins it: each activity row's event,
   * once its batch is stored, counts one row written (by severity: info,
   * warning, error; bounded).
   */
  observeActivity(inner: BatchParticipant<NewEvent | NewEvent[]>): BatchParticipant<NewEvent | NewEvent[]> {
    const rows = new client.Counter({
      name: 'hostd_activity_rows_total',
      help: 'Activity log rows written on this member, by severity.',
      labelNames: ['severity'] as const,
      registers: [this.families.text, this.families.open],
    });
    return {
      async join(item, write) {
        const done = await inner.join(item, write);
        for (const e of Array.isArray(item) ? item : [item]) {
          if (e.type === 'activity') rows.inc({ severity: String((e.data as { severity?: unknown }).severity ?? 'info') });
        }
        return done;
      },
    };
  }

  /**
   * The cluster's forwarder as dispatch sees it, timing each forwarded call
   * by the member it went to (the peer's node id: bounded by the
   * membership) and its status (the peer's 4xx, 502 when it could not be
   * reached). The families appear once the daemon hands its forwarder here.
   */
  observeForwarder<R extends ForwardRoute, F extends { resolve(peerId: string): 'self' | R | undefined }>(inner: F): F {
    const f = this.families;
    // Counted as the API's calls are (request-tally.ts): no label hashing on the call's path.
    const tally = new RequestTally([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60], 'peer', null);
    tally.counter('hostd_forwarded_calls_total', "Calls this member forwarded to another (peer_id), by that member's node id and the status the caller got.", [
      f.text,
      f.open,
    ]);
    tally.histogram('hostd_forwarded_call_duration_seconds', "Time from handing a call to another member to its answer, by that member's node id.", [
      f.text,
      f.open,
    ]);
    return {
      ...inner,
      resolve(peerId: string) {
        const where = inner.resolve(peerId);
        if (where === undefined || where === 'self') return where;
        return {
          ...where,
          async forward(...a: unknown[]) {
            const began = performance.now();
            const done = (status: number) => tally.note(peerId, '', status, (performance.now() - began) / 1000);
            try {
              const out = await where.forward(...a);
              done(200);
              return out;
            } catch (err) {
              const status = (err as { status?: unknown }).status;
              done(typeof status === 'number' ? status : 500);
              throw err;
            }
          },
        };
      },
    } as F;
  }

  /** Registers what is read at scrape time; called once the domains and the cluster are there. */
  attach(src: ScrapeSources): void {
    const f = this.families;
    const cached = <T>(read: () => Promise<T>) => {
      let at = 0;
      let value: Promise<T> | null = null;
      return () => {
        if (!value || Date.now() - at > SCRAPE_CACHE_MS) {
          at = Date.now();
          value = read().catch((err) => {
            value = null;
            throw err;
          });
        }
        return value;
      };
    };
    const peers = cached(() => src.peers());
    const domains = cached(() => src.domainInfo());
    f.gauge('hostd_build_info', 'Always 1; the labels say which build runs on which member.', ['version', 'node_id', 'node_name'], (g) => {
      g.set({ version: src.version, node_id: src.nodeId, node_name: src.nodeName }, 1);
    });
    f.gauge('hostd_cluster_members', "Members of this member's cluster (itself included) by reachability as this member sees it.", ['state'], async (g) => {
      const list = await peers();
      g.set({ state: 'reachable' }, list.filter((p) => p.reachable || p.is_self).length);
      g.set({ state: 'unreachable' }, list.filter((p) => !p.reachable && !p.is_self).length);
    });
    f.gauge('hostd_proxy_holder', '1 when this member holds the proxy lease (serves the reverse proxy), else 0.', [], (g) => {
      g.set(src.lease.state().holding ? 1 : 0);
    });
    f.gauge('hostd_proxy_lease_epoch', 'Epoch of the proxy lease as this member knows it (it grows with every move or takeover).', [], (g) => {
      g.set(src.lease.state().epoch);
    });
    f.gauge(
      'hostd_runtime_available',
      '1 when the host program a domain drives is there and usable, else 0 (the reason is in GET /system/health).',
      ['domain', 'runtime'],
      async (g) => {
        g.reset();
        for (const d of await domains()) for (const r of d.runtimes) g.set({ domain: d.name, runtime: r.name }, r.available ? 1 : 0);
      },
    );
    this.attachResources(src);
    this.attachStarts(src);
    let holder = src.lease.state().holder;
    this.unsubscribe = src.lease.onChange((s) => {
      if (s.holder !== holder) f.holderChanges.inc();
      holder = s.holder;
    });
  }

  /**
   * Per-resource series and the sandbox aggregates, read through the guests
   * and usage ports: each port is read at most once per cache period, and a
   * scrape waits for a port at most READ_WAIT_MS.
   */
  private attachResources(src: ScrapeSources): void {
    const f = this.families;
    const reads = new WeakMap<object, BoundedRead<unknown>>();
    const bounded = <T>(port: object, source: string, read: () => Promise<T>): Promise<T | null> => {
      let r = reads.get(port) as BoundedRead<T> | undefined;
      if (!r) {
        r = new BoundedRead(read, { freshMs: SCRAPE_CACHE_MS, waitMs: READ_WAIT_MS, staleMs: STALE_MS, onLate: () => f.readsLate.inc({ source }) });
        reads.set(port, r);
      }
      return r.get();
    };
    const guests = async (): Promise<GuestInfo[]> => {
      const lists = await Promise.all(src.guests().map((g) => bounded(g, 'guests', () => g.guests())));
      return lists.flatMap((l) => l ?? []);
    };
    const usage = async (kind: ResourceKind): Promise<ResourceUsage[]> => {
      const lists = await Promise.all(
        src
          .usage()
          .filter((u) => u.kind === kind)
          .map((u) => bounded(u, `${kind}`, () => u.usage())),
      );
      return lists.flatMap((l) => l ?? []);
    };
    const snapshot = async (kind: ResourceKind): Promise<KindSnapshot> => {
      const [all, figures] = await Promise.all([guests(), usage(kind)]);
      return { guests: all.filter((g) => g.kind === kind), usage: new Map(figures.map((u) => [u.id, u])) };
    };
    this.scoped = RESOURCE_KINDS.map((def) => {
      const r = new ResourceFamilies(def, () => snapshot(def.kind), openMetricsRegistry);
      return { scope: def.scope, text: r.text, open: r.open };
    });
    this.attachProxyAndLocations(src);
    f.gauge('hostd_sandboxes', "Sandboxes on this member by state (counts only: never a sandbox's id or owner).", ['state'], async (g) => {
      g.reset();
      const counts = new Map<string, number>();
      for (const s of (await guests()).filter((x) => x.kind === 'sandbox')) counts.set(s.state, (counts.get(s.state) ?? 0) + 1);
      for (const [state, n] of counts) g.set({ state }, n);
    });
  }

  /**
   * Sandbox start and warm-resume latencies, observed as each ends (a scrape
   * would miss the ones between two scrapes): a method label and no more,
   * never a sandbox's or VM's id. The resume histogram is in the VM
   * families (vm.read), as everything named `hostd_vm_`; the sandbox starts
   * are aggregates, as the sandbox counts.
   */
  private attachStarts(src: ScrapeSources): void {
    const f = this.families;
    const starts = new client.Histogram({
      name: 'hostd_sandbox_start_seconds',
      help: "Sandboxes' first starts, from the create call to running, by method (warm: a resumed warm state; cold: a boot).",
      labelNames: ['method'] as const,
      buckets: [0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300, 600],
      registers: [f.text, f.open],
    });
    // Both methods from the first scrape: a dashboard shows 0 cold starts rather than nothing.
    for (const method of ['warm', 'cold'] as const) starts.zero({ method });
    for (const p of src.sandboxStarts?.() ?? []) p.onStart((method, seconds) => starts.observe({ method }, seconds));
    const resumes = new client.Histogram({
      name: 'hostd_vm_warm_resume_seconds',
      help: 'VM resumes from a warm state (VMs of /vms and sandboxes): linked clone, seed and QEMU loading the saved memory.',
      buckets: [0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30],
      registers: this.scoped.filter((r) => r.scope === 'vm.read').flatMap((r) => [r.text, r.open]),
    });
    for (const p of src.warmResumes?.() ?? []) p.onResume((seconds) => resumes.observe(seconds));
  }

  /** Locations by status and the proxy's configuration (aggregates); certificate expiry by base domain (proxy.read). */
  private attachProxyAndLocations(src: ScrapeSources): void {
    const f = this.families;
    f.gauge(
      'hostd_locations',
      'Locations (SMB shares) by status: mounted, unavailable (wanted but not mounted: unreachable, or a stale mount the monitor took down), disconnected.',
      ['status'],
      (g) => {
        g.reset();
        const counts = new Map<string, number>([
          ['mounted', 0],
          ['unavailable', 0],
          ['disconnected', 0],
        ]);
        for (const m of src.mountStates()) for (const st of m.statuses()) counts.set(st, (counts.get(st) ?? 0) + 1);
        if (src.mountStates().length) for (const [status, n] of counts) g.set({ status }, n);
      },
    );
    const proxy = () => src.proxyFigures()[0];
    f.gauge('hostd_proxy_config_version', 'Version of the proxy configuration replicated to this member (0: none yet).', [], (g) => {
      g.reset();
      const p = proxy();
      if (p) g.set(p.config().version);
    });
    f.gauge(
      'hostd_proxy_config_applied_version',
      "Version of the proxy configuration this member's Caddy runs (0 before the first apply); behind hostd_proxy_config_version while an apply is due or failed.",
      [],
      (g) => {
        g.reset();
        const v = proxy()?.config().applied_version;
        if (v !== null && v !== undefined) g.set(v);
      },
    );
    f.gauge(
      'hostd_proxy_config_apply_failed',
      "1 when this member's last apply of the proxy configuration failed (the error: GET /proxy/status), else 0.",
      [],
      (g) => {
        g.reset();
        const p = proxy();
        if (p) g.set(p.config().apply_failed ? 1 : 0);
      },
    );
    // Observed as they happen (a scrape would miss the loads between two scrapes).
    const applies = new client.Histogram({
      name: 'hostd_proxy_config_apply_duration_seconds',
      help: "Loads of a proxy configuration into this member's Caddy, by result (loaded; refused by Caddy, which keeps the last good one; failed to reach Caddy), and how long each took.",
      labelNames: ['result'] as const,
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [f.text, f.open],
    });
    for (const p of src.proxyFigures()) p.onApply((result, seconds) => applies.observe({ result }, seconds));
    const text = new client.Registry();
    const open = openMetricsRegistry();
    new client.Gauge({
      name: 'hostd_proxy_certificate_expiry_timestamp_seconds',
      help: "End of validity (Unix time) of each base domain's wildcard certificate as this member's Caddy storage holds it (the holder's is the one served); absent when none is stored.",
      labelNames: ['domain'],
      registers: [text, open],
      collect() {
        this.reset();
        for (const c of proxy()?.certificates() ?? []) {
          const t = c.not_after ? Date.parse(c.not_after) : NaN;
          if (Number.isFinite(t)) this.set({ domain: c.domain }, t / 1000);
        }
      },
    });
    this.scoped.push({ scope: 'proxy.read', text, open });
  }

  /**
   * One exposition at a time: prom-client renders OpenMetrics by renaming each
   * counter object (`x_total` to `x`), and both formats share the objects, so
   * a text exposition rendered meanwhile, or after, would name its counters
   * without `_total`. The names are put back once the OpenMetrics text is made.
   */
  expose(format: MetricsFormat = 'prometheus', audience: Audience = 'aggregates'): Promise<{ content_type: string; text: string }> {
    const run = this.rendering.then(() => this.render(format, audience));
    this.rendering = run.catch(() => undefined);
    return run;
  }

  private rendering: Promise<unknown> = Promise.resolve();

  private async render(format: MetricsFormat, audience: Audience): Promise<{ content_type: string; text: string }> {
    const pick = (r: { text: client.Registry; open: client.Registry }) => (format === 'openmetrics' ? r.open : r.text);
    const scopes = audience === 'aggregates' ? [] : audience.scopes;
    const shown = this.scoped.filter((r) => scopes.includes(r.scope));
    const reg = shown.length ? client.Registry.merge([pick(this.families), ...shown.map(pick)]) : pick(this.families);
    const names = reg.getMetricsAsArray().map((m) => [m, m.name] as const);
    try {
      return { content_type: reg.contentType, text: await reg.metrics() };
    } finally {
      for (const [m, name] of names) (m as { name: string }).name = name;
    }
  }

  close(): void {
    this.unsubscribe?.();
    this.unsubscribe = null;
  }
}
