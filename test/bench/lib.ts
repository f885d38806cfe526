/**
 * Benchmark helpers: autocannon runs against loopback only, each figure
 * reported beside a baseline measured in the same run.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

export async function load(
  url: string,
  opts: { headers?: Record<string, string>; method?: string; body?: string; duration?: number; connections?: number } = {},
): Promise<LoadResult> {
  const u = new URL(url);
  if (u.hostname !== '127.0.0.1' && u.hostname !== 'localhost' && u.hostname !== '[::1]') throw new Error(`benchmarks target loopback only, not ${u.hostname}`);
  const r = await autocannon({
    url,
    method: (opts.method ?? 'GET') as 'GET',
    headers: opts.headers,
    body: opts.body,
    duration: opts.duration ?? Number(process.env.BENCH_SECONDS ?? 5),
    connections: opts.connections ?? 10,
    pipelining: 1,
  });
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors, non2xx: r.non2xx };
}

/** Durations of `n` sequential calls of an async function, in milliseconds, sorted. */
export async function latencies(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await fn();
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return times.sort((a, b) => a - b);
}

/** The q-quantile of sorted values. */
export const pct = (sorted: number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))];

export const median = (xs: number[]): number =>
  pct(
    [...xs].sort((a, b) => a - b),
    0.5,
  );

/** p50 of `n` sequential calls of an async function, in milliseconds. */
export async function p50Of(n: number, fn: () => Promise<unknown>): Promise<number> {
  return pct(await latencies(n, fn), 0.5);
}

/** Every figure printed in this run, by section (for `--report`). */
export const figures: Record<string, Record<string, number>> = {};
let section = 'bench';

/** Names the section whose figures `print` records next. */
export function inSection(name: string): void {
  section = name;
}

export function print(key: string, value: number, digits = 3): void {
  process.stdout.write(`${key}=${value.toFixed(digits)}\n`);
  (figures[section] ??= {})[key] = Number(value.toFixed(digits));
}

/**
 * CPU nanoseconds and times put on a CPU so far, summed over every thread of
 * process `pid` (each thread's schedstat under /proc: nanoseconds, unlike
 * /proc/<pid>/stat's 10 ms ticks); undefined without /proc.
 */
export function schedstat(pid: number | undefined): { ns: number; runs: number } | undefined {
  if (pid === undefined) return undefined;
  try {
    let ns = 0;
    let runs = 0;
    for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
      try {
        const [cpu, , slices] = fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').trim().split(' ').map(Number);
        ns += cpu;
        runs += slices;
      } catch {
        /* a thread that ended meanwhile */
      }
    }
    return { ns, runs };
  } catch {
    return undefined;
  }
}

/**
 * The api baseline (raw-server.js: a bare node:http server answering
 * `payload`) in its own process. `proc` is there at once, so that a caller
 * can kill it whatever happens next; `port` once it listens.
 */
export function startRawServer(payload?: string): { proc: ChildProcess; port: Promise<number> } {
  const proc = spawn(process.execPath, [path.join(path.dirname(fileURLToPath(import.meta.url)), 'raw-server.js')], {
    env: payload === undefined ? process.env : { ...process.env, BENCH_PAYLOAD: payload },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = new Promise<number>((resolve) => {
    readline.createInterface({ input: proc.stdout! }).once('line', (l) => resolve(JSON.parse(l).port));
  });
  return { proc, port };
}

/** CPU time (user + system) of process `pid` so far, in milliseconds; undefined without /proc. */
export function cpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10; // utime + stime, in clock ticks of 10 ms
  } catch {
    return undefined;
  }
}

/**
 * Waits until each process is idle: under 3% of a core over a second. A
 * fresh daemon does one-time work after it answers (the proxy CA's root, made
 * in pure JS in slices of the event loop, about 2 s of CPU, and again after it
 * joins a cluster): measured under load, that work would be counted as
 * per-request overhead. Bounded: a process that never settles is measured as
 * it is, and the bench says so.
 */
export async function settle(pids: Array<number | undefined>, boundMs = 120_000): Promise<void> {
  // BENCH_SETTLE=0: measure at once, as before (to compare).
  if (process.env.BENCH_SETTLE === '0') return;
  const started = Date.now();
  let last = pids.map(cpuMs);
  while (Date.now() - started < boundMs) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = pids.map(cpuMs);
    if (now.every((c, i) => c === undefined || last[i] === undefined || c - last[i]! <= 30)) return;
    last = now;
  }
  process.stdout.write(`# processes ${pids.join(', ')} still busy after ${boundMs} ms; measuring anyway\n`);
}

/** Digits a figure is printed with, from its name (rates as integers, CPU µs to 0.1). */
const digitsOf = (key: string): number => (/_rps$/.test(key) ? 0 : /^cpu_us_/.test(key) ? 1 : 3);

/**
 * Runs a whole measurement `runs` times (BENCH_RUNS overrides), each run with
 * its own daemons and its own baseline, and prints the median of each figure
 * over the runs; for each key of `spread`, also its min and max over the runs
 * (`<key>_min`, `<key>_max`) and each run's value on a comment line. A single
 * run on a shared machine can land anywhere in a wide band: the median of runs
 * is the figure, the spread says how far to trust it.
 */
export async function overRuns(
  spread: string[],
  fn: (run: number) => Promise<Record<string, number>>,
  runs = Number(process.env.BENCH_RUNS ?? 5),
): Promise<void> {
  const all: Array<Record<string, number>> = [];
  for (let i = 0; i < runs; i++) {
    const r = await fn(i);
    all.push(r);
    process.stdout.write(`# run ${i + 1}/${runs}: ${spread.map((k) => `${k}=${r[k]?.toFixed(3)}`).join(' ')}\n`);
  }
  for (const key of Object.keys(all[0])) print(key, median(all.map((r) => r[key])), digitsOf(key));
  for (const key of spread) {
    const xs = all.map((r) => r[key]);
    print(`${key}_min`, Math.min(...xs));
    print(`${key}_max`, Math.max(...xs));
  }
  print('runs', runs, 0);
}
