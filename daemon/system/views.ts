/** The system domain's answers, as the registry's result schemas define them. */
import type { ResultOf } from '../../api/registry/index.js';
import type { DiskUsage } from './driver.js';

export type HealthReport = ResultOf<'system_health'>;
export type HealthStatus = HealthReport['status'];
export type AllocationReport = ResultOf<'system_allocation'>;
export type PoolUsage = HealthReport['pools'][number];

/**
 * Used share as df reports it: used / (used + available), so blocks reserved
 * for root count as neither used nor available. 0 for an empty filesystem.
 */
export function diskUsedPercent(d: DiskUsage): number {
  const used = d.total_bytes - d.free_bytes;
  const denom = used + d.available_bytes;
  if (!(denom > 0)) return 0;
  return percent((used / denom) * 100);
}

export const round2 = (n: number): number => Math.round(n * 100) / 100;
/** A share as a percentage to two decimals, within 0-100. */
export const percent = (n: number): number => Math.min(100, Math.max(0, round2(n)));
