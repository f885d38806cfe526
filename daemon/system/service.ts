/**
 * System domain: host health (CPU, memory, load, uptime, storage pools) and the
 * CPU/memory the daemon's VMs, sandboxes and containers hold against capacity.
 * Every figure is read from the host at request time, except CPU usage, which a
 * background sampler keeps current while the service is started.
 */
import type { PoolConfig } from '../config.js';
import type { DomainInfo } from '../domain.js';
import {
  CpuSampler,
  cpuInfo,
  diskUsage,
  diskUsedPercent,
  loadAverages,
  measureCpuUsage,
  readMemory,
  readUptime,
  round2,
} from './probe.js';

export type HealthStatus = 'ok' | 'degraded' | 'critical';

export interface PoolUsage {
  storage_id: string;
  path: string;
  /** null when the pool's directory could not be read (see `error`). */
  total_bytes: number | null;
  available_bytes: number | null;
  used_percent: number | null;
  /** Why the figures are missing, e.g. the directory does not exist. */
  error?: string;
}

export interface HealthReport {
  node: { id: string; name: string };
  status: HealthStatus;
  /** Which rules set the status; empty when it is 'ok'. */
  reasons: string[];
  cpu: { cores: number; model: string; usage_percent: number; load: [number, number, number] };
  memory: { total_bytes: number; available_bytes: number; used_percent: number };
  uptime_seconds: number;
  pools: PoolUsage[];
  /**
   * Each domain of this build: whether it is built, and the host programs it
   * drives with their availability (an unavailable one makes its domain's
   * calls answer 503; it does not change `status`, which is about the host).
   */
  domains: DomainInfo[];
  checked_at: string;
}

export interface CountPair {
  count: number;
  running: number;
}

export interface AllocationReport {
  capacity: { cpu_cores: number; memory_mb: number };
  allocated: { cpu_cores: number; memory_mb: number; vms: CountPair; containers: CountPair };
  /** What guests in state 'running' hold. */
  running: { cpu_cores: number; memory_mb: number };
  /** allocated / capacity (over 1 when overcommitted; 0 when capacity is unknown). */
  ratio: { cpu: number; memory: number };
  pools: PoolUsage[];
}

// ------------------------------------------------------- status rules

export interface HealthInput {
  memory: { total_bytes: number; available_bytes: number };
  /** Pool used percentages; null for a pool that could not be read. */
  pools: Array<{ storage_id?: string; used_percent: number | null }>;
  load1: number;
  cores: number;
}

/** Thresholds of the status rules. */
export const HEALTH_LIMITS = {
  memoryAvailableCriticalPercent: 5,
  memoryAvailableDegradedPercent: 10,
  poolUsedCriticalPercent: 98,
  poolUsedDegradedPercent: 90,
  loadPerCoreDegraded: 2,
} as const;

/**
 * The status rules, pure so they can be tested with made-up figures:
 * - critical: memory available < 5% of total, or any pool > 98% used;
 * - degraded: memory available < 10%, any pool > 90% used, 1-minute load > 2x the
 *   CPU count, or a pool that could not be read;
 * - ok otherwise.
 */
export function assessHealth(h: HealthInput): { status: HealthStatus; reasons: string[] } {
  const critical: string[] = [];
  const degraded: string[] = [];
  const L = HEALTH_LIMITS;

  if (h.memory.total_bytes > 0) {
    const availPct = (h.memory.available_bytes / h.memory.total_bytes) * 100;
    const shown = round2(availPct);
    if (availPct < L.memoryAvailableCriticalPercent) critical.push(`memory available ${shown}% < ${L.memoryAvailableCriticalPercent}%`);
    else if (availPct < L.memoryAvailableDegradedPercent) degraded.push(`memory available ${shown}% < ${L.memoryAvailableDegradedPercent}%`);
  }

  for (const [i, p] of h.pools.entries()) {
    const name = p.storage_id ?? `#${i}`;
    if (p.used_percent === null) degraded.push(`pool ${name} unreadable`);
    else if (p.used_percent > L.poolUsedCriticalPercent) critical.push(`pool ${name} ${p.used_percent}% used > ${L.poolUsedCriticalPercent}%`);
    else if (p.used_percent > L.poolUsedDegradedPercent) degraded.push(`pool ${name} ${p.used_percent}% used > ${L.poolUsedDegradedPercent}%`);
  }

  if (h.cores > 0 && h.load1 > L.loadPerCoreDegraded * h.cores) {
    degraded.push(`1-minute load ${h.load1} > ${L.loadPerCoreDegraded}x ${h.cores} cores`);
  }

  if (critical.length) return { status: 'critical', reasons: [...critical, ...degraded] };
  if (degraded.length) return { status: 'degraded', reasons: degraded };
  return { status: 'ok', reasons: [] };
}

// --------------------------------------------------- allocation sums

/** What the allocation sums need of a guest (the domains that own guests report them). */
export interface GuestLoad {
  kind: 'vm' | 'lxc' | 'app' | 'sandbox';
  cpu_cores: number;
  memory_mb: number;
  running: boolean;
}

export interface SystemServiceOptions {
  nodeId: string;
  nodeName: string;
  /** Background CPU sampling period; default 2000 ms. */
  sampleIntervalMs?: number;
  /** The guests the VM, sandbox and LXC domains run (none when omitted). */
  guests?: () => Promise<GuestLoad[]>;
  /** What the domains of this build say about themselves (none when omitted). */
  domains?: () => Promise<DomainInfo[]>;
}

export class SystemService {
  /** Background CPU sampler; started and stopped with the service. */
  readonly sampler: CpuSampler;

  constructor(
    private readonly pools: PoolConfig[],
    private readonly opts: SystemServiceOptions,
  ) {
    this.sampler = new CpuSampler(opts.sampleIntervalMs ?? 2000);
  }

  /** Starts the background CPU sampler (idempotent). */
  start(): void {
    this.sampler.start();
  }

  /** Stops the sampler; health still works, measuring CPU on demand. */
  stop(): void {
    this.sampler.stop();
  }

  async health(): Promise<HealthReport> {
    const cpu = cpuInfo();
    const sampled = this.sampler.running ? this.sampler.usagePercent : null;
    const [usage, memory, uptime, pools, domains] = await Promise.all([
      sampled ?? measureCpuUsage(100),
      readMemory(),
      readUptime(),
      this.poolUsage(),
      this.opts.domains?.() ?? [],
    ]);
    const load = loadAverages();
    const used = memory.total_bytes > 0 ? round2(((memory.total_bytes - memory.available_bytes) / memory.total_bytes) * 100) : 0;
    const { status, reasons } = assessHealth({ memory, pools, load1: load[0], cores: cpu.cores });
    return {
      node: { id: this.opts.nodeId, name: this.opts.nodeName },
      status,
      reasons,
      cpu: { cores: cpu.cores, model: cpu.model, usage_percent: usage, load },
      memory: { total_bytes: memory.total_bytes, available_bytes: memory.available_bytes, used_percent: used },
      uptime_seconds: uptime,
      pools,
      domains,
      checked_at: new Date().toISOString(),
    };
  }

  async allocation(): Promise<AllocationReport> {
    const [memory, pools, guests] = await Promise.all([readMemory(), this.poolUsage(), this.opts.guests?.() ?? []]);
    // Sandboxes are VMs; apps hold no reserved CPU or memory.
    const vmGuests = guests.filter((g) => g.kind === 'vm' || g.kind === 'sandbox');
    const ctGuests = guests.filter((g) => g.kind === 'lxc');
    const all = [...vmGuests, ...ctGuests];
    const sum = (gs: GuestLoad[], k: 'cpu_cores' | 'memory_mb') => gs.reduce((n, g) => n + g[k], 0);
    const running = all.filter((g) => g.running);

    const capacity = { cpu_cores: cpuInfo().cores, memory_mb: Math.floor(memory.total_bytes / (1024 * 1024)) };
    const allocated = { cpu_cores: sum(all, 'cpu_cores'), memory_mb: sum(all, 'memory_mb') };
    const ratio = (a: number, c: number) => (c > 0 ? Math.round((a / c) * 10000) / 10000 : 0);

    return {
      capacity,
      allocated: {
        ...allocated,
        vms: { count: vmGuests.length, running: vmGuests.filter((g) => g.running).length },
        containers: { count: ctGuests.length, running: ctGuests.filter((g) => g.running).length },
      },
      running: { cpu_cores: sum(running, 'cpu_cores'), memory_mb: sum(running, 'memory_mb') },
      ratio: { cpu: ratio(allocated.cpu_cores, capacity.cpu_cores), memory: ratio(allocated.memory_mb, capacity.memory_mb) },
      pools,
    };
  }

  private poolUsage(): Promise<PoolUsage[]> {
    return Promise.all(
      this.pools.map(async (p): Promise<PoolUsage> => {
        try {
          const d = await diskUsage(p.path);
          return {
            storage_id: p.id,
            path: p.path,
            total_bytes: d.total_bytes,
            available_bytes: d.available_bytes,
            used_percent: diskUsedPercent(d),
          };
        } catch (err) {
          const e = err as NodeJS.ErrnoException;
          const error = e?.code === 'ENOENT' ? 'pool directory does not exist' : `cannot read pool: ${e?.message ?? String(err)}`;
          return { storage_id: p.id, path: p.path, total_bytes: null, available_bytes: null, used_percent: null, error };
        }
      }),
    );
  }
}
