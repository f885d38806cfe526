/**
 * The cluster curve: clusters of 2, 4 and 8 daemons on loopback (one grows
 * into the next: members join the first), and at each size, from member A:
 *
 *   scale_cluster_direct_p50_ms_m<M>    p50 of GET /folders on A itself
 *   scale_cluster_forward_p50_ms_m<M>   p50 of the same call with peer_id, over every other member (median of theirs)
 *   scale_cluster_forward_p99_ms_m<M>   the worst member's p99
 *   scale_cluster_rss_mb_a_m<M>         A's resident memory (it holds a connection to each member)
 *   scale_cluster_forward_p50_ratio_m<M> forwarded p50 at M over forwarded p50 at 2 (expected flat: a forward is one hop, whatever the size)
 *
 * BENCH_CLUSTER_MAX caps the size. Calls are sequential, so that a figure is
 * the latency of one call, not the machine's throughput shared by members.
 */
import fs from 'node:fs';
import { allReachable, joinTo } from '../cluster/util.js';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { getter } from './cluster.js';
import { latencies, median, pct, print, settle } from './lib.js';

const SIZES = [2, 4, 8];

const rssMb = (pid: number | undefined): number => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;

export async function clusterCurve(): Promise<void> {
  const max = Number(process.env.BENCH_CLUSTER_MAX ?? 8);
  const calls = Number(process.env.BENCH_CLUSTER_CALLS ?? 200);
  const nodes: TestDaemon[] = [];
  try {
    const start = (i: number) => startDaemon({ env: { HOSTD_LOG_LEVEL: 'info', HOSTD_NODE_NAME: `curve-${i}` }, logToFile: true });
    const a = await start(0);
    nodes.push(a);
    const init = await a.admin.request('POST', '/admin/cluster/init', {});
    if (init.status !== 201) throw new Error(`init: ${init.status} ${JSON.stringify(init.body)}`);
    const token = await a.token('bench-curve', ['files.read']);
    const get = getter(a.url, token);
    let base: number | undefined;
    for (const size of SIZES.filter((s) => s <= max)) {
      while (nodes.length < size) {
        const n = await start(nodes.length);
        nodes.push(n);
        await joinTo(a, n);
        await allReachable(nodes, 120_000);
      }
      await settle(nodes.map((n) => n.proc.pid));
      // Warm every path (JIT, each member's connection) before timing.
      for (const m of nodes) for (let i = 0; i < 50; i++) await get(`/api/v1/folders${m === a ? '' : `?peer_id=${encodeURIComponent(m.nodeId)}`}`);
      const direct = await latencies(calls, () => get('/api/v1/folders'));
      const p50s: number[] = [];
      const p99s: number[] = [];
      for (const m of nodes.slice(1)) {
        const l = await latencies(calls, () => get(`/api/v1/folders?peer_id=${encodeURIComponent(m.nodeId)}`));
        p50s.push(pct(l, 0.5));
        p99s.push(pct(l, 0.99));
      }
      const fwd = median(p50s);
      print(`scale_cluster_direct_p50_ms_m${size}`, pct(direct, 0.5));
      print(`scale_cluster_forward_p50_ms_m${size}`, fwd);
      print(`scale_cluster_forward_p99_ms_m${size}`, Math.max(...p99s));
      print(`scale_cluster_rss_mb_a_m${size}`, rssMb(a.proc.pid), 1);
      if (base === undefined) base = fwd;
      else print(`scale_cluster_forward_p50_ratio_m${size}`, fwd / base);
    }
  } finally {
    await Promise.all(nodes.map((n) => n.stop()));
  }
}
