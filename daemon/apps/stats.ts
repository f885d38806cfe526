/**
 * apps_stats: resource use of each container of an app (as `docker stats`
 * reads it), and the totals. A container that is not running has null stats.
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { ResourceUsage } from '../domain.js';
import { ensureAvailable } from '../lib/availability.js';
import type { AppsContext } from './context.js';
import { ENGINE } from './driver.js';

type Result = ResultOf<'apps_stats'>;

export async function appStats(c: AppsContext, args: ArgsOf<'apps_stats'>): Promise<Result> {
  await c.ready([ENGINE]);
  const r = c.record(args.app_id);
  const cs = (await c.driver.containers({ project: r.project })).sort((a, b) => (a.service ?? '').localeCompare(b.service ?? ''));
  const containers: Result['containers'] = await Promise.all(
    cs.map(async (x) => {
      const base = { service: x.service ?? '', container_id: x.container_id, name: x.name, state: x.state };
      if (x.state !== 'running') return { ...base, stats: null };
      // A container that stopped or went away since the listing has no stats.
      const stats = await c.driver.stats(x.container_id).catch((err) => {
        if ([404, 409].includes((err as { statusCode?: number }).statusCode ?? 0)) return null;
        throw err;
      });
      return { ...base, stats };
    }),
  );
  const totals: Result['totals'] = {
    cpu_percent: 0,
    memory_usage_bytes: 0,
    network_rx_bytes: 0,
    network_tx_bytes: 0,
    block_read_bytes: 0,
    block_write_bytes: 0,
    pids: 0,
  };
  for (const { stats: s } of containers) {
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
  return { app_id: r.app_id, containers, totals };
}

/**
 * The usage port (metrics): each app with a running container, its
 * containers' figures summed as the engine's stats give them. No engine: no
 * figures (the state families say so).
 */
export async function appsUsage(c: AppsContext): Promise<ResourceUsage[]> {
  try {
    await ensureAvailable(c.driver, [ENGINE]);
  } catch {
    return [];
  }
  const known = new Set(c.records.all().map((r) => r.app_id));
  const running = (await c.driver.containers({})).filter((x) => x.app_id && known.has(x.app_id) && x.state === 'running');
  const byApp = new Map<string, ResourceUsage>();
  await Promise.all(
    running.map(async (x) => {
      const s = await c.driver.stats(x.container_id).catch(() => null);
      if (!s) return;
      const u = byApp.get(x.app_id!) ?? {
        id: x.app_id!,
        cpu_seconds: 0,
        memory_bytes: 0,
        disk_read_bytes: 0,
        disk_written_bytes: 0,
        network_received_bytes: 0,
        network_transmitted_bytes: 0,
      };
      u.cpu_seconds! += s.cpu_total_ns / 1e9;
      u.memory_bytes! += s.memory.usage_bytes;
      u.disk_read_bytes! += s.block_io.read_bytes;
      u.disk_written_bytes! += s.block_io.write_bytes;
      u.network_received_bytes! += s.network.rx_bytes;
      u.network_transmitted_bytes! += s.network.tx_bytes;
      byApp.set(x.app_id!, u);
    }),
  );
  return [...byApp.values()];
}
