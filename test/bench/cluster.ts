/**
 * Cluster forwarding cost, measured in this run: two local nodes paired on
 * loopback; GET /api/v1/folders direct on node A against the same call on A
 * with peer_id naming B (forwarded over mutual-TLS gRPC, B runs it).
 *
 *   forward_overhead_ms = p50 forwarded - p50 direct   (sequential calls, target < 1)
 *   forward_rps_ratio   = direct rps / forwarded rps    (autocannon, target < 1.5)
 *   proxy_move_ms       = p50 of POST /proxy/move between the two live nodes (target < 500)
 *
 * Each figure is the median of 5 runs (BENCH_RUNS), each on a fresh pair of
 * nodes with its own direct baseline, with the spread of forward_rps_ratio
 * (_min, _max); a run is 3 latency rounds of 300 calls and 3 alternating
 * autocannon rounds of 2 s per side (BENCH_FORWARD_ROUNDS,
 * BENCH_FORWARD_SECONDS), the median round of each side.
 *
 * Beside them, the CPU time (user + system) each process spent per request
 * during the two autocannon runs (Linux /proc; the load generator is this
 * process): where the cores go when the ratio is far from 1.
 *
 *   cpu_us_direct_a, cpu_us_direct_loadgen
 *   cpu_us_forwarded_a, cpu_us_forwarded_b, cpu_us_forwarded_loadgen
 */
import fs from 'node:fs';
import http from 'node:http';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { pair } from '../cluster/util.js';
import { load, median, overRuns, p50Of, settle, type LoadResult } from './lib.js';

/** One keep-alive GET through node:http, body drained; rejects on a non-2xx. */
export function getter(base: string, token: string): (path: string) => Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const u = new URL(base);
  return (path) =>
    new Promise((resolve, reject) => {
      const req = http.request({ host: u.hostname, port: u.port, path, agent, headers: { authorization: `Bearer ${token}` } }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode && res.statusCode < 300 ? resolve() : reject(new Error(`${path}: ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end();
    });
}

/** CPU time (user + system) of process `pid` so far, in microseconds; undefined without /proc. */
function cpuMicros(pid: number | undefined): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * (1e6 / 100); // utime + stime, in clock ticks of 10 ms
  } catch {
    return undefined;
  }
}

/** Runs `fn` (an autocannon load) and gives the CPU microseconds per request of each process in `pids` and of this one. */
async function withCpu(
  pids: Array<number | undefined>,
  seconds: number,
  fn: () => Promise<LoadResult>,
): Promise<{ r: LoadResult; perReq: Array<number | undefined>; self: number }> {
  const before = pids.map(cpuMicros);
  const self0 = process.cpuUsage();
  const r = await fn();
  const self = process.cpuUsage(self0);
  const n = r.rps * seconds;
  const perReq = pids.map((p, i) => {
    const a = before[i];
    const b = cpuMicros(p);
    return a === undefined || b === undefined ? undefined : (b - a) / n;
  });
  return { r, perReq, self: (self.user + self.system) / n };
}

export async function clusterForwarding(): Promise<void> {
  await overRuns(['forward_rps_ratio'], forwardingRun);
}

/** One run: a fresh pair of nodes, its own direct baseline. */
async function forwardingRun(): Promise<Record<string, number>> {
  const nodes: TestDaemon[] = [];
  try {
    const env = { HOSTD_LOG_LEVEL: 'info' };
    nodes.push(await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'bench-a' }, logToFile: true }));
    nodes.push(await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'bench-b' }, logToFile: true }));
    const [a, b] = nodes;
    await pair([a, b]);
    const token = await a.token('bench', ['files.read', 'files.manage', 'proxy.read', 'proxy.manage']);
    for (const name of ['media', 'backups', 'projects']) {
      for (const peer of [a.nodeId, b.nodeId]) {
        const r = await a.request('POST', '/api/v1/folders', { token, body: { storage_id: 'default', name, peer_id: peer } });
        if (r.status !== 201) throw new Error(`folder create on ${peer}: ${r.status} ${r.text}`);
      }
    }
    const direct = '/api/v1/folders';
    const forwarded = `/api/v1/folders?peer_id=${b.nodeId}`;
    const get = getter(a.url, token);
    // Joining the cluster changed the proxy CA's seed: both nodes make its root again before they idle.
    await settle([a.proc.pid, b.proc.pid]);

    // Latency: sequential calls, warmed up, measured in alternating rounds so drift hits both.
    // Shorter than the single run of before (4 rounds of 500): five runs must fit the bench's budget.
    await p50Of(300, () => get(direct));
    await p50Of(300, () => get(forwarded));
    const rounds = 3;
    const d50: number[] = [];
    const f50: number[] = [];
    for (let i = 0; i < rounds; i++) {
      d50.push(await p50Of(300, () => get(direct)));
      f50.push(await p50Of(300, () => get(forwarded)));
    }
    const directP50 = median(d50);
    const forwardedP50 = median(f50);

    // Throughput: autocannon, direct and forwarded in alternating rounds
    // (BENCH_FORWARD_ROUNDS of BENCH_FORWARD_SECONDS each side), the median
    // round of each side; CPU per request over all rounds of a side. (Before:
    // one 3 s run per side, back to back: a burst of other work on the shared
    // machine during either one moved a run's ratio from 1.4 to 4.2.)
    const headers = { authorization: `Bearer ${token}` };
    await load(a.url + forwarded, { headers, duration: 1 });
    const pids = [a.proc.pid, b.proc.pid];
    const seconds = Number(process.env.BENCH_FORWARD_SECONDS ?? 2);
    const loadRounds = Number(process.env.BENCH_FORWARD_ROUNDS ?? 3);
    const sides = { direct: [] as Array<Awaited<ReturnType<typeof withCpu>>>, forwarded: [] as Array<Awaited<ReturnType<typeof withCpu>>> };
    for (let i = 0; i < loadRounds; i++) {
      sides.direct.push(await withCpu(pids, seconds, () => load(a.url + direct, { headers, duration: seconds })));
      sides.forwarded.push(await withCpu(pids, seconds, () => load(a.url + forwarded, { headers, duration: seconds })));
    }
    for (const [side, rs] of Object.entries(sides)) {
      for (const { r } of rs) if (r.non2xx || r.errors) throw new Error(`non-2xx or errors, ${side}: ${r.non2xx}/${r.errors}`);
    }
    /** The median round's figures, and CPU per request over every round of the side (requests-weighted). */
    const summary = (rs: typeof sides.direct) => {
      const byRps = [...rs].sort((x, y) => x.r.rps - y.r.rps);
      const mid = byRps[Math.floor(byRps.length / 2)].r;
      const n = rs.reduce((acc, x) => acc + x.r.rps * seconds, 0);
      const cpuOf = (i: number) =>
        rs.every((x) => x.perReq[i] !== undefined) ? rs.reduce((acc, x) => acc + x.perReq[i]! * x.r.rps * seconds, 0) / n : undefined;
      return { r: mid, perReq: [cpuOf(0), cpuOf(1)], self: rs.reduce((acc, x) => acc + x.self * x.r.rps * seconds, 0) / n };
    };
    const d = summary(sides.direct);
    const f = summary(sides.forwarded);
    const dl = d.r;
    const fl = f.r;

    // The proxy-holder lease: POST /proxy/move back and forth between the two live nodes.
    let target = 0;
    const moveTimes = await p50Of(21, async () => {
      target = 1 - target;
      const r = await a.request('POST', '/api/v1/proxy/move', { token, body: { peer_id: nodes[target].nodeId } });
      if (r.status !== 200) throw new Error(`proxy move: ${r.status} ${r.text}`);
    });

    const out: Record<string, number> = {
      direct_p50_ms: directP50,
      forwarded_p50_ms: forwardedP50,
      direct_rps: dl.rps,
      forwarded_rps: fl.rps,
      forwarded_p99_ms: fl.p99,
      forward_overhead_ms: forwardedP50 - directP50,
      forward_rps_ratio: dl.rps / fl.rps,
      proxy_move_ms: moveTimes,
    };
    const cpu = (k: string, v: number | undefined) => {
      if (v !== undefined) out[k] = v;
    };
    cpu('cpu_us_direct_a', d.perReq[0]);
    cpu('cpu_us_direct_loadgen', d.self);
    cpu('cpu_us_forwarded_a', f.perReq[0]);
    cpu('cpu_us_forwarded_b', f.perReq[1]);
    cpu('cpu_us_forwarded_loadgen', f.self);
    return out;
  } finally {
    await Promise.all(nodes.map((d) => d.stop()));
  }
}
