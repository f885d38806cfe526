/**
 * Curves: how a cost grows with the work, at N = 1, 10, 100, 1,000
 * (BENCH_SCALE_MAX caps N), on one daemon, each step beside the N = 1 step of
 * the same run:
 *
 *   scale_folders_list_ms_n<N>     p50 of GET /folders with N folders (expected linear in N)
 *   scale_folders_get_ms_n<N>      p50 of GET /folders/{id}/contents of one folder (expected flat)
 *   scale_folders_create_per_s_n<N> folders created per second while growing to N, 4 clients (expected flat; from N = 10)
 *   scale_rss_mb_n<N>              the daemon's resident memory after the step
 *   scale_folders_create_per_s_c<C> creates per second with C = 1, 4, 16 clients in flight
 *                                  (expected rising up to the cores, then flat)
 *
 * and the ratios of each step to N = 1 (`..._ratio_n<N>`). Everything is made
 * in the daemon's own temp data dir and removed with it. Then the curves of
 * the other kinds (scale-curve.ts), each on a daemon of its own: running LXC
 * containers (scale-lxc.ts), stopped linked-clone VMs (scale-vms.ts), apps on
 * the private test engine (scale-apps.ts), and the cluster curve (2, 4 and 8
 * daemons, scale-cluster.ts: `cluster` on loopback, `cluster-moves` the
 * proxy move's gap in network namespaces). Sandbox tombstones are measured
 * in the sandboxes section, which has the warm state they need.
 *
 *   BENCH_SCALE_CURVES  the curves to run after the folders' (default all;
 *                       `none` for the folders' alone), e.g. `lxc,vms`
 *   BENCH_SCALE_ONLY    only the named curves, the folders' one included only
 *                       when named (`folders`), e.g. `cluster,cluster-moves`
 *                       for the cluster curve alone; overrides BENCH_SCALE_CURVES
 */
import fs from 'node:fs';
import http from 'node:http';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { pct, latencies, print, settle } from './lib.js';
import { clusterCurve, clusterMoveCurve } from './scale-cluster.js';
import { lxcCurve } from './scale-lxc.js';
import { vmsCurve } from './scale-vms.js';
import { appsCurve } from './scale-apps.js';

const STEPS = [1, 10, 100, 1000];

/** One keep-alive JSON call through node:http; rejects on a status other than `want` (0: any 2xx). */
export function caller(base: string, token: string): (method: string, path: string, body?: unknown, want?: number) => Promise<any> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  const u = new URL(base);
  return (method, path, body, want = 200) =>
    new Promise((resolve, reject) => {
      const text = body === undefined ? undefined : JSON.stringify(body);
      const headers: Record<string, string> = { authorization: `Bearer ${token}` };
      if (text !== undefined) headers['content-type'] = 'application/json';
      const req = http.request({ host: u.hostname, port: u.port, method, path, agent, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const out = Buffer.concat(chunks).toString('utf8');
          if (want === 0 ? !res.statusCode || res.statusCode >= 300 : res.statusCode !== want)
            reject(new Error(`${method} ${path}: ${res.statusCode} ${out.slice(0, 200)}`));
          else resolve(out ? JSON.parse(out) : undefined);
        });
      });
      req.on('error', reject);
      req.end(text);
    });
}

/** Resident memory of a process in MiB (Linux /proc). */
export function rssMb(pid: number | undefined): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

/** Runs `count` calls of `fn`, `clients` at a time; resolves with calls per second. */
export async function throughput(count: number, clients: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const t = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < count) await fn(next++);
    }),
  );
  return count / (Number(process.hrtime.bigint() - t) / 1e9);
}

export async function scaleBench(): Promise<void> {
  // Built here, not at the module's top: the curves' modules import this one back.
  const CURVES = [
    ['lxc', lxcCurve],
    ['vms', vmsCurve],
    ['apps', appsCurve],
    ['cluster', clusterCurve],
    ['cluster-moves', clusterMoveCurve],
  ] as const;
  const only = process.env.BENCH_SCALE_ONLY?.split(',').map((s) => s.trim());
  const known = ['folders', ...CURVES.map(([name]) => name)];
  const unknown = only?.filter((n) => !known.includes(n));
  if (unknown?.length) throw new Error(`BENCH_SCALE_ONLY: no curve ${unknown.join(', ')} (${known.join(', ')})`);
  if (!only || only.includes('folders')) await foldersCurve();
  // Each curve on its own daemon; one that fails does not keep the others from running.
  const named = only ?? process.env.BENCH_SCALE_CURVES?.split(',').map((s) => s.trim());
  const failed: string[] = [];
  for (const [name, curve] of CURVES) {
    if (named && !named.includes(name)) continue;
    try {
      await curve();
    } catch (err) {
      failed.push(name);
      process.stdout.write(`# scale ${name} failed: ${(err as Error).message}\n`);
    }
  }
  if (failed.length) throw new Error(`curves failed: ${failed.join(', ')}`);
}

/** The folders' curve (see the top of this file). */
async function foldersCurve(): Promise<void> {
  const max = Number(process.env.BENCH_SCALE_MAX ?? 1000);
  const d: TestDaemon = await startDaemon({ env: { HOSTD_LOG_LEVEL: 'info' }, logToFile: true });
  try {
    const token = await d.token('bench', ['files.read', 'files.manage']);
    const call = caller(d.url, token);
    await settle([d.proc.pid]);
    let made = 0;
    let first = '';
    const create = async (prefix: string, i: number) => {
      const f = await call('POST', '/api/v1/folders', { storage_id: 'default', name: `${prefix}-${i}` }, 201);
      if (!first) first = f.folder_id ?? f.folder?.folder_id;
      if (!first) throw new Error(`folder create answered no folder_id: ${JSON.stringify(f).slice(0, 200)}`);
      made++;
    };
    const base: Record<string, number> = {};
    for (const n of STEPS.filter((s) => s <= max)) {
      // Too few creates to time (the first step): made, not measured.
      const todo = n - made;
      const from = made;
      const rate = await throughput(todo, 4, (i) => create('s', from + i));
      const measured = todo >= 9 ? rate : NaN;
      // Warm up (JIT, connections) before the first step's figures, which are every curve's baseline.
      if (n === STEPS[0]) {
        for (let i = 0; i < 200; i++) {
          await call('GET', '/api/v1/folders');
          await call('GET', `/api/v1/folders/${encodeURIComponent(first)}/contents`);
        }
      }
      const list = await latencies(60, () => call('GET', '/api/v1/folders'));
      const get = await latencies(60, () => call('GET', `/api/v1/folders/${encodeURIComponent(first)}/contents`));
      const figures: Record<string, number> = {
        folders_list_ms: pct(list, 0.5),
        folders_get_ms: pct(get, 0.5),
        folders_create_per_s: measured,
        rss_mb: rssMb(d.proc.pid),
      };
      for (const [k, v] of Object.entries(figures)) {
        if (!Number.isFinite(v)) continue;
        print(`scale_${k}_n${n}`, v, k === 'rss_mb' ? 1 : 3);
        if (base[k] === undefined || !Number.isFinite(base[k])) base[k] = v;
        else if (Number.isFinite(v) && Number.isFinite(base[k])) print(`scale_${k}_ratio_n${n}`, v / base[k]);
      }
    }
    // Creates with 1, 4 and 16 clients in flight (on top of what is there; flat in N above).
    const per = Number(process.env.BENCH_SCALE_CREATES ?? 48);
    for (const c of [1, 4, 16]) {
      print(`scale_folders_create_per_s_c${c}`, await throughput(per, c, (i) => create(`c${c}`, i)), 1);
    }
  } finally {
    await d.stop();
  }
}
