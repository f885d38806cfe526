/**
 * GET /system/health: the host's figures read at request time (CPU usage from
 * the background sampler), and a status judged by pure rules so they can be
 * tested with made-up figures.
 */
import type { SystemContext } from './context.js';
import { round2, type HealthReport, type HealthStatus } from './views.js';

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

export async function health(c: SystemContext): Promise<HealthReport> {
  const cpu = c.probe.cpu();
  const [usage, memory, uptime, pools, domains] = await Promise.all([
    c.probe.cpuUsagePercent(),
    c.probe.memory(),
    c.probe.uptimeSeconds(),
    c.poolUsage(),
    c.opts.domains?.() ?? [],
  ]);
  const load = c.probe.load();
  const used = memory.total_bytes > 0 ? round2(((memory.total_bytes - memory.available_bytes) / memory.total_bytes) * 100) : 0;
  const { status, reasons } = assessHealth({ memory, pools, load1: load[0], cores: cpu.cores });
  return {
    node: { id: c.opts.nodeId, name: c.opts.nodeName },
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
