/**
 * The cluster curve: clusters of 2, 4 and 8 daemons (one grows into the
 * next: members join the first). Two parts, each a curve of its own in the
 * scale section (`cluster` and `cluster-moves`, see scale.ts).
 *
 * `cluster`, on loopback, at each size, from member A:
 *
 *   scale_cluster_direct_p50_ms_m<M>    p50 of GET /folders on A itself
 *   scale_cluster_forward_p50_ms_m<M>   p50 of the same call with peer_id, over every other member (median of theirs)
 *   scale_cluster_forward_p99_ms_m<M>   the worst member's p99
 *   scale_cluster_rss_mb_a_m<M>         A's resident memory (it holds a connection to each member)
 *   scale_cluster_forward_p50_ratio_m<M> forwarded p50 at M over forwarded p50 at 2 (expected flat: a forward is one hop, whatever the size)
 *   scale_cluster_all_delivery_ratio_m<M> a members=all stream on A, folder creates spread in turn over
 *                                       the other members: p99 from a create's send to its event on the
 *                                       stream, over the creates' own p99 (events_delivery_ratio_all_2's
 *                                       definition, events.ts `delivery()`; median of the rounds)
 *   scale_cluster_all_delivery_ratio_baseline_m<M> the same with A's own stream and the creates on A
 *   scale_cluster_all_delivery_p99_ms_m<M>, scale_cluster_all_mutation_p99_ms_m<M>
 *                                       the two p99s of the members=all ratio (medians of the rounds)
 *
 * (expected: the delivery ratio flat, or rising slowly with the members: the
 * stream merges one forwarded part per member). The creates are deleted
 * after each size, so that the next size's GET /folders lists as few.
 *
 * `cluster-moves`, in network namespaces the bench makes (the floating
 * address needs a LAN of its own; proxy-gap.ts, shared with the proxy
 * section), at each size:
 *
 *   scale_cluster_move_gap_ms_m<M>      median client-observed gap of a proxy move, over moves round the
 *                                       members (each to the next; at least 6, a whole number of rounds)
 *   scale_cluster_move_gap_max_ms_m<M>  the longest of them
 *   scale_cluster_client_interval_ms    the client's request interval (the gap's resolution)
 *   scale_cluster_moves_idle_cpu_ms_per_s_m<M> the members' CPU, summed, per second at rest before the moves
 *                                       (health probes every 500 ms between every two members, the holder's
 *                                       proxy tick): the share of the two cores the moves do not get
 *
 * (expected flat in the size: a move is between two members whatever the
 * others). BENCH_CLUSTER_MAX caps the size; BENCH_CLUSTER_CALLS (200) the
 * forwarded calls per member; BENCH_CLUSTER_DELIVERY_ROUNDS (3) the rounds
 * of 200 creates per side; BENCH_CLUSTER_MOVES the moves per size. Calls are
 * sequential, so that a figure is the latency of one call, not the machine's
 * throughput shared by members.
 */
import fs from 'node:fs';
import { allReachable, joinTo } from '../cluster/util.js';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { getter } from './cluster.js';
import { delivery, tokenKnownOn, type Delivery } from './events.js';
import { cpuMs, latencies, median, pct, print, settle } from './lib.js';
import { GapCluster, type MovePhases } from './proxy-gap.js';

const SIZES = [2, 4, 8];
const sizesUpTo = (): number[] => SIZES.filter((s) => s <= Number(process.env.BENCH_CLUSTER_MAX ?? 8));

const rssMb = (pid: number | undefined): number => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;

const EVENT_SCOPES = ['files.read', 'files.manage', 'system.read'];

export async function clusterCurve(): Promise<void> {
  const calls = Number(process.env.BENCH_CLUSTER_CALLS ?? 200);
  const rounds = Number(process.env.BENCH_CLUSTER_DELIVERY_ROUNDS ?? 3);
  const nodes: TestDaemon[] = [];
  // Each member's token for the creates of the delivery figures.
  const creators = new Map<TestDaemon, string>();
  try {
    const start = (i: number) => startDaemon({ env: { HOSTD_LOG_LEVEL: 'info', HOSTD_NODE_NAME: `curve-${i}` }, logToFile: true });
    const a = await start(0);
    nodes.push(a);
    const init = await a.admin.request('POST', '/admin/cluster/init', {});
    if (init.status !== 201) throw new Error(`init: ${init.status} ${JSON.stringify(init.body)}`);
    const token = await a.token('bench-curve', ['files.read']);
    const reader = await a.token('bench-curve-events', EVENT_SCOPES);
    creators.set(a, reader);
    const get = getter(a.url, token);
    let base: number | undefined;
    for (const size of sizesUpTo()) {
      while (nodes.length < size) {
        const n = await start(nodes.length);
        nodes.push(n);
        await joinTo(a, n);
        await allReachable(nodes, 120_000);
        creators.set(n, await n.token('bench-curve-creates', EVENT_SCOPES));
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

      // members=all delivery, alternating rounds with the baseline (A's own stream, creates on A).
      await tokenKnownOn(a, reader, nodes.slice(1));
      const others = nodes.slice(1).map((d) => ({ d, token: creators.get(d)! }));
      const own: Delivery[] = [];
      const all: Delivery[] = [];
      for (let round = 0; round < rounds; round++) {
        own.push(await delivery(a, reader, 1, round, { tag: `m${size}-base-` }));
        all.push(await delivery(a, reader, 1, round, { on: others, query: '?members=all&types=activity', tag: `m${size}-all-` }));
      }
      print(`scale_cluster_all_delivery_ratio_m${size}`, median(all.map((r) => r.ratio)));
      print(`scale_cluster_all_delivery_ratio_baseline_m${size}`, median(own.map((r) => r.ratio)));
      print(`scale_cluster_all_delivery_p99_ms_m${size}`, median(all.map((r) => r.deliveryP99)));
      print(`scale_cluster_all_mutation_p99_ms_m${size}`, median(all.map((r) => r.tripP99)));
      for (const n of nodes) await deleteBenchFolders(n, creators.get(n)!);
    }
  } finally {
    await Promise.all(nodes.map((n) => n.stop()));
  }
}

/** Deletes the folders the delivery figures made on `d` (named bench-...), four calls at a time. */
async function deleteBenchFolders(d: TestDaemon, token: string): Promise<void> {
  const list = await d.request('GET', '/api/v1/folders', { token });
  if (list.status !== 200) throw new Error(`list folders: ${list.status} ${list.text}`);
  const ids: string[] = list.body.folders.filter((f: { name: string }) => f.name.startsWith('bench-')).map((f: { folder_id: string }) => f.folder_id);
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < ids.length) {
        const id = ids[next++];
        const r = await d.request('DELETE', `/api/v1/folders/${encodeURIComponent(id)}`, { token });
        if (r.status >= 300) throw new Error(`delete folder ${id}: ${r.status} ${r.text}`);
      }
    }),
  );
}

/** The proxy move's gap at each size, in network namespaces (see the top of this file). */
export async function clusterMoveCurve(): Promise<void> {
  const sizes = sizesUpTo();
  if (!sizes.length) return;
  const g = await GapCluster.open(sizes[sizes.length - 1], { probeMs: 500, intervalMs: 20 });
  try {
    print('scale_cluster_client_interval_ms', g.intervalMs, 0);
    for (const size of sizes) {
      await g.grow(size, { quiet: true });
      // What the members themselves use at rest (probes, the holder's tick): the machine the moves share.
      const pids = g.nodes.map((n) => n.proc.pid);
      const c0 = pids.map(cpuMs);
      const w0 = Date.now();
      await new Promise((r) => setTimeout(r, 5000));
      const idle = pids.map(cpuMs).reduce((sum: number, c, i) => sum + (c ?? 0) - (c0[i] ?? 0), 0) / ((Date.now() - w0) / 1000);
      const k = process.env.BENCH_CLUSTER_MOVES ? Number(process.env.BENCH_CLUSTER_MOVES) : size * Math.ceil(6 / size);
      const before = g.phases.length;
      const gaps = await g.moves(k);
      const phases = g.phases.slice(before);
      process.stdout.write(`# move gaps at ${size} members (ms): ${gaps.map((x) => x.toFixed(0)).join(' ')}\n`);
      // Medians of where each move's time went (see MovePhases in proxy-gap.ts).
      const at = (key: keyof MovePhases) => median(phases.map((p) => p[key]).filter(Number.isFinite)).toFixed(0);
      process.stdout.write(
        `# move phases at ${size} (median ms after the call): answered ${at('answered')}, released ${at('released')}, claimed ${at('claimed')}, served ${at('served')}\n`,
      );
      print(`scale_cluster_move_gap_ms_m${size}`, median(gaps), 1);
      print(`scale_cluster_move_gap_max_ms_m${size}`, Math.max(...gaps), 1);
      print(`scale_cluster_moves_idle_cpu_ms_per_s_m${size}`, idle, 0);
    }
  } finally {
    await g.close();
  }
}
