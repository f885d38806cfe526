/**
 * api_overhead_ratio: GET /api/v1/folders on hostd against a raw node:http
 * server answering the same JSON, measured in the same run: the median of 5
 * runs (BENCH_RUNS), each with a fresh daemon and raw server, 3 alternating
 * rounds of 2 s each (BENCH_ROUNDS, BENCH_ROUND_SECONDS), with the spread
 * (api_overhead_ratio_min, _max). Reads write
 * nothing, so syncing writes (docs/durability.md) does not enter it.
 *
 * Beside it, the CPU time (user + system, from /proc) each server spent per
 * request over its rounds, and their quotient: on a shared 2-core machine
 * where the load generator runs beside the servers, rps swings with whatever
 * else runs, while CPU per request says what each server's work costs.
 *
 *   cpu_us_raw, cpu_us_hostd, api_cpu_per_request_ratio
 *
 * What syncing costs a mutating call: p50 of sequential POST /api/v1/folders
 * (an intent, the folder, its record and its activity row: three synced
 * writes) on a daemon that syncs (the default) against one started with
 * HOSTD_STORE_SYNC=0, which syncs nothing (a measuring knob, never for a
 * real host):
 *
 *   write_p50_ms, write_unsynced_p50_ms, durability_write_ratio
 */
import { startDaemon } from '../helpers/daemon.js';
import { cpuMs, latencies, load, median, overRuns, pct, print, settle, startRawServer, type LoadResult } from './lib.js';

export async function apiOverhead(): Promise<void> {
  await overRuns(['api_overhead_ratio'], apiRun);
  await durabilityCost();
}

/** One run: a fresh daemon and a fresh raw server, alternating rounds, the median round of each. */
async function apiRun(): Promise<Record<string, number>> {
  const d = await startDaemon({ env: { HOSTD_LOG_LEVEL: 'info' }, logToFile: true });
  let raw: ReturnType<typeof startRawServer> | undefined;
  try {
    const token = await d.token('bench', ['files.read', 'files.manage']);
    for (const name of ['media', 'backups', 'projects']) {
      await d.request('POST', '/api/v1/folders', { token, body: { storage_id: 'default', name } });
    }
    await settle([d.proc.pid]);
    const sample = await d.request('GET', '/api/v1/folders', { token });
    const payload = sample.text;
    raw = startRawServer(payload);
    const rawPort = await raw.port;
    const rawUrl = `http://127.0.0.1:${rawPort}/api/v1/folders`;
    const headers = { authorization: `Bearer ${token}` };
    // Warm both up, then alternate baseline and hostd rounds so that noise from
    // a shared machine falls on both; the median round of each.
    await load(rawUrl, { headers, duration: 1 });
    await load(d.url + '/api/v1/folders', { headers, duration: 1 });
    // Shorter than the single run of before (5 rounds of 3 s): five runs must fit the bench's budget.
    const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
    const seconds = Number(process.env.BENCH_ROUND_SECONDS ?? 2);
    const raws: LoadResult[] = [];
    const hostds: LoadResult[] = [];
    const cpu = { raw: [] as number[], hostd: [] as number[] };
    // One round, and the CPU microseconds per request the server process spent in it.
    const round = async (url: string, pid: number | undefined, cpuPerReq: number[]) => {
      const before = cpuMs(pid);
      const r = await load(url, { headers, duration: seconds });
      const after = cpuMs(pid);
      if (before !== undefined && after !== undefined && r.rps > 0) cpuPerReq.push(((after - before) * 1000) / (r.rps * seconds));
      return r;
    };
    for (let i = 0; i < rounds; i++) {
      raws.push(await round(rawUrl, raw.proc.pid, cpu.raw));
      hostds.push(await round(d.url + '/api/v1/folders', d.proc.pid, cpu.hostd));
    }
    const lat = async (url: string) => {
      const times = await latencies(400, () => fetch(url, { headers }).then((r) => r.arrayBuffer()));
      return { p50: pct(times, 0.5), p99: pct(times, 0.99) };
    };
    const rawLat = await lat(rawUrl);
    const hostdLat = await lat(d.url + '/api/v1/folders');
    for (const h of hostds) if (h.non2xx || h.errors) throw new Error(`hostd answered ${h.non2xx} non-2xx and ${h.errors} errors`);
    const base = median(raws.map((r) => r.rps));
    const hostd = median(hostds.map((r) => r.rps));
    return {
      raw_rps: base,
      raw_p50_ms: rawLat.p50,
      raw_p99_ms: rawLat.p99,
      hostd_rps: hostd,
      hostd_p50_ms: hostdLat.p50,
      hostd_p99_ms: hostdLat.p99,
      api_overhead_ratio: base / hostd,
      ...(cpu.raw.length && cpu.hostd.length
        ? { cpu_us_raw: median(cpu.raw), cpu_us_hostd: median(cpu.hostd), api_cpu_per_request_ratio: median(cpu.hostd) / median(cpu.raw) }
        : {}),
    };
  } finally {
    raw?.proc.kill('SIGTERM');
    await d.stop();
  }
}

async function durabilityCost(): Promise<void> {
  const p50: Record<string, number[]> = { synced: [], unsynced: [] };
  // Alternate the two kinds of daemon so that drift on a shared machine falls on both.
  for (let round = 0; round < 3; round++) {
    for (const kind of ['synced', 'unsynced'] as const) {
      const d = await startDaemon({ env: { HOSTD_LOG_LEVEL: 'info', HOSTD_STORE_SYNC: kind === 'synced' ? '1' : '0' }, logToFile: true });
      try {
        const token = await d.token('bench', ['files.manage']);
        let n = 0;
        const create = async () => {
          const r = await fetch(`${d.url}/api/v1/folders`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ storage_id: 'default', name: `w${round}-${n++}` }),
          });
          if (r.status !== 201) throw new Error(`folder create: ${r.status} ${await r.text()}`);
        };
        for (let i = 0; i < 20; i++) await create();
        p50[kind].push(pct(await latencies(150, create), 0.5));
      } finally {
        await d.stop();
      }
    }
  }
  const synced = median(p50.synced);
  const unsynced = median(p50.unsynced);
  print('write_p50_ms', synced);
  print('write_unsynced_p50_ms', unsynced);
  print('durability_write_ratio', synced / unsynced);
}
