/**
 * apps_stats: resource use of each container of an app (as `docker stats`
 * reads it), and the totals. A container that is not running has null stats.
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
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
  const totals: Result['totals'] = { cpu_percent: 0, memory_usage_bytes: 0, network_rx_bytes: 0, network_tx_bytes: 0, block_read_bytes: 0, block_write_bytes: 0, pids: 0 };
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
