/**
 * What a daemon costs the host at rest: a fresh hostd with nothing to do
 * (default settings, its cluster listener open, no peers, no load) beside a
 * bare node:http server at rest (raw-server.js, the api section's baseline),
 * measured over the same window, side by side:
 *
 *   idle_cpu_ms_per_s           hostd's CPU (every thread) per second at rest
 *   idle_cpu_baseline_ms_per_s  the bare server's, same window (a server with
 *                               no timer spends nothing at rest: 0)
 *   idle_wakeups_per_s          times hostd's threads were put on a CPU, per second (schedstat)
 *   idle_wakeups_baseline_per_s the bare server's
 *   idle_get_cpu_ms             hostd's CPU for one GET /api/v1/folders, sequential
 *                               calls right after the window (the baseline of the ratio)
 *   idle_cpu_in_gets_per_s      idle_cpu_ms_per_s / idle_get_cpu_ms: being at rest
 *                               costs as much as answering this many GETs a second
 *
 * A quotient against the bare server would divide by zero, hence the GET.
 * CPU from /proc/<pid>/task/<tid>/schedstat (nanoseconds, every thread), not
 * /proc/<pid>/stat's 10 ms ticks: a bare server at rest spends less than a
 * tick a second. BENCH_IDLE_SECONDS sets the window (20).
 */
import fs from 'node:fs';
import { startDaemon } from '../helpers/daemon.js';
import { print, schedstat, settle, startRawServer } from './lib.js';

/** CPU nanoseconds and times scheduled of every thread of `pid` (a process this section started and has not stopped). */
const sched = (pid: number): { ns: number; runs: number } => {
  const s = schedstat(pid);
  if (!s) throw new Error(`no /proc/${pid}/task: the process under measure is gone`);
  return s;
};

export async function idleBench(): Promise<void> {
  if (!fs.existsSync(`/proc/${process.pid}/schedstat`)) {
    process.stdout.write('# idle skipped: no /proc/<pid>/schedstat on this kernel\n');
    return;
  }
  const seconds = Number(process.env.BENCH_IDLE_SECONDS ?? 20);
  const d = await startDaemon({ logToFile: true });
  const raw = startRawServer();
  try {
    await raw.port;
    await settle([d.proc.pid, raw.proc.pid]);
    const pids = [d.proc.pid!, raw.proc.pid!];
    const before = pids.map(sched);
    const t0 = process.hrtime.bigint();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    const [hostd, bare] = pids.map(sched).map((s, i) => ({ cpu: (s.ns - before[i].ns) / 1e6 / secs, runs: (s.runs - before[i].runs) / secs }));
    // One call's CPU on the same daemon: sequential GETs, each waited for, as a client at rest would send them.
    const token = await d.token('bench-idle', ['files.read']);
    const calls = 200;
    for (let i = 0; i < 20; i++) await d.request('GET', '/api/v1/folders', { token });
    const g0 = sched(d.proc.pid!).ns;
    for (let i = 0; i < calls; i++) {
      const r = await d.request('GET', '/api/v1/folders', { token });
      if (r.status !== 200) throw new Error(`GET /api/v1/folders answered ${r.status}`);
    }
    const getMs = (sched(d.proc.pid!).ns - g0) / 1e6 / calls;
    print('idle_cpu_ms_per_s', hostd.cpu, 2);
    print('idle_cpu_baseline_ms_per_s', bare.cpu, 2);
    print('idle_wakeups_per_s', hostd.runs, 0);
    print('idle_wakeups_baseline_per_s', bare.runs, 0);
    print('idle_get_cpu_ms', getMs, 3);
    print('idle_cpu_in_gets_per_s', hostd.cpu / getMs, 1);
  } finally {
    raw.proc.kill('SIGTERM');
    await d.stop();
  }
}
