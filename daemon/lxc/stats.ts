/**
 * A container's resource usage: CPU over a short sample, memory and pids
 * from its cgroup files, network from its namespace, disk from statfs of its
 * root, its ext4 image's superblock, or du (docs/lxc.md, Stats).
 */
import type { ResultOf } from '../../api/registry/index.js';
import type { LxcContext } from './context.js';
import { lxcNameOf } from './naming.js';

type Stats = ResultOf<'lxc_stats'>['stats'];

/** How long CPU usage is sampled for usage_percent. */
const CPU_SAMPLE_MS = 200;

export class StatsReader {
  constructor(private readonly ctx: LxcContext) {}

  async stats(lxcid: number): Promise<ResultOf<'lxc_stats'>> {
    const { ctx: c } = this;
    const rec = await c.record(lxcid);
    const name = lxcNameOf(lxcid);
    const state = await c.state(rec);
    const cg = c.driver.cgroups;
    const running = state === 'running' || state === 'frozen';
    let cpu: Stats['cpu'] = { usage_seconds: null, usage_percent: null, cores_limit: rec.cpu_cores };
    if (running) {
      const t0 = performance.now();
      const u0 = cg.cpuUsageNs(name);
      await new Promise((r) => setTimeout(r, CPU_SAMPLE_MS));
      const u1 = cg.cpuUsageNs(name);
      const dt = (performance.now() - t0) * 1e6;
      cpu = {
        usage_seconds: u1 === null ? null : Math.round(u1 / 1e6) / 1000,
        usage_percent: u0 !== null && u1 !== null ? Math.round(((u1 - u0) / dt) * 10000) / 100 : null,
        cores_limit: rec.cpu_cores,
      };
    }
    const mem = running ? cg.memory(name) : { used_bytes: null, limit_bytes: null, cache_bytes: null };
    const net = running ? c.driver.tools.network(name) : null;
    const ifaces = net?.interfaces ?? [];
    return {
      stats: {
        lxcid,
        state,
        cpu,
        memory: { used_bytes: mem.used_bytes, limit_bytes: mem.limit_bytes ?? (running ? null : rec.memory_mb * 1024 * 1024), cache_bytes: mem.cache_bytes },
        disk: await this.disk(rec, running),
        network: {
          rx_bytes: ifaces.reduce((n, i) => n + i.rx_bytes, 0),
          tx_bytes: ifaces.reduce((n, i) => n + i.tx_bytes, 0),
          interfaces: ifaces,
          addresses: net?.addresses ?? [],
        },
        pids: running ? cg.pids(name) : 0,
        sampled_at: c.now(),
      },
    };
  }

  private async disk(rec: Parameters<LxcContext['paths']>[0], running: boolean): Promise<Stats['disk']> {
    const { ctx: c } = this;
    const p = c.paths(rec);
    const s = c.driver.storage;
    const limit = rec.disk_size_bytes || null;
    if (rec.rootfs_kind === 'dir')
      return { used_bytes: await s.treeUsage(p.rootfs), limit_bytes: null, total_bytes: null, available_bytes: null, source: 'du' };
    const sf = running ? await c.driver.tools.rootStatfs(lxcNameOf(rec.lxcid)) : null;
    if (sf)
      return { used_bytes: sf.total_bytes - sf.free_bytes, limit_bytes: limit, total_bytes: sf.total_bytes, available_bytes: sf.free_bytes, source: 'statfs' };
    if (rec.rootfs_kind === 'loop') {
      const u = await s.imageUsage(p.img);
      return {
        used_bytes: u?.used_bytes ?? null,
        limit_bytes: limit,
        total_bytes: u?.total_bytes ?? null,
        available_bytes: u ? u.total_bytes - u.used_bytes : null,
        source: 'ext4 superblock',
      };
    }
    return { used_bytes: await s.treeUsage(p.rootfs), limit_bytes: limit, total_bytes: null, available_bytes: null, source: 'du' };
  }
}
