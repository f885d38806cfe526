/**
 * Sandbox figures, on the test guest under whatever accelerator the host has
 * (TCG here), through the HTTP API with a sandbox-only token:
 *   sandbox_cold_create_to_running_ms      POST /sandboxes with no warm state until POST .../wait says
 *                                          running (the guest agent answers): the baseline
 *   sandbox_create_to_running_ms p50, p95  the same from a warm state (hostctl sandbox warm), 10 in a row
 *   sandbox_cold_vs_warm_ratio             cold over warm p50 (target >= 5 under TCG)
 *   sandboxes_per_minute                   create, wait, exec `true` (POST /sandboxes/{id}/exec), destroy,
 *                                          in a loop with BENCH_SANDBOX_INFLIGHT (default 4) in flight for
 *                                          BENCH_SANDBOX_SECONDS (default 60)
 *   sandbox_exec_ms_p50, _direct_ms_p50    exec `true` through the API, and the same guest work (the exec
 *   sandbox_exec_ratio                     prelude and wrapper) through the guest agent's socket directly
 *                                          while hostd is down (QEMU serves one agent client): API over direct
 *   sandbox_file_put_mib_s, _get_mib_s     4 MiB in 512 KiB pieces through PUT/GET /sandboxes/{id}/files,
 *   ..._direct_mib_s, ..._ratio            and the same bytes through the agent's file commands directly
 *   sandbox_fork1_to_running_ms            POST .../fork count 1 (2) until every copy runs, each over the
 *   sandbox_fork2_to_running_ms            warm create p50 (sandbox_fork_ratio, sandbox_fork2_ratio)
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { GuestAgent } from '../../daemon/vms/qemu/agent.js';
import { guestExec } from '../../daemon/vms/qemu/exec.js';
import { FILE_CHUNK_BYTES, GuestFiles, SCRIPT_TIMEOUT_MS } from '../../daemon/vms/qemu/files.js';
import { killGuests, missingRuntime, type VmsEnv } from '../helpers/vms-fixture.js';
import { call, importImages, startSandboxDaemon, startWarm, untilRunning, warmDone } from '../helpers/sandboxes-fixture.js';
import { pct, print } from './lib.js';
import { measureCurve, stepsUpTo } from './scale-curve.js';

async function cycle(e: VmsEnv, token: string, exec: boolean): Promise<number> {
  const t0 = performance.now();
  const c = await call(e, token, 'POST', '/sandboxes', { image_id: 'bench' });
  if (c.status !== 201) throw new Error(`create: ${c.status} ${c.text}`);
  const id = c.body.sandbox.id;
  try {
    await untilRunning(e, token, id, 1800);
    const ms = performance.now() - t0;
    if (exec) {
      const x = await call(e, token, 'POST', `/sandboxes/${id}/exec`, { command: 'true' });
      if (x.status !== 200 || x.body.exit_code !== 0) throw new Error(`exec in ${id}: ${x.status} ${x.text}`);
    }
    return ms;
  } finally {
    await call(e, token, 'DELETE', `/sandboxes/${id}`);
  }
}

const MiB = 1024 * 1024;
const PIECE = 512 * 1024;
const EXEC_RUNS = 20;

async function ok(e: VmsEnv, token: string, method: string, p: string, body?: unknown): Promise<any> {
  const r = await call(e, token, method, p, body);
  if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${r.text}`);
  return r.body;
}

async function untilAllRunning(e: VmsEnv, token: string, ids: string[]): Promise<void> {
  // In calls of at most a minute each (untilRunning): one request held for a whole boot meets the client's header timeout on a loaded machine.
  for (const id of ids) await untilRunning(e, token, id, 1800);
}

/** Exec and file figures through the API against the same through the agent directly (hostd down meanwhile). */
async function agentFigures(env: VmsEnv, token: string, restart: (e: VmsEnv) => Promise<VmsEnv>): Promise<{ e: VmsEnv; id: string }> {
  let e = env;
  const c = await ok(e, token, 'POST', '/sandboxes', { image_id: 'bench' });
  const id = c.sandbox.id;
  await untilAllRunning(e, token, [id]);
  const vmid = (await ok(e, token, 'GET', `/sandboxes/${id}`)).sandbox.vmid as number;
  const data = crypto.randomBytes(4 * MiB);

  const api: number[] = [];
  for (let i = 0; i < EXEC_RUNS; i++) {
    const t0 = performance.now();
    const x = await ok(e, token, 'POST', `/sandboxes/${id}/exec`, { command: 'true' });
    if (x.exit_code !== 0) throw new Error(`exec: ${JSON.stringify(x)}`);
    api.push(performance.now() - t0);
  }
  let t0 = performance.now();
  for (let off = 0; off < data.length; off += PIECE) {
    await ok(e, token, 'PUT', `/sandboxes/${id}/files`, {
      path: '/tmp/bench.bin',
      content: data.subarray(off, off + PIECE).toString('base64'),
      append: off > 0,
    });
  }
  const apiPut = performance.now() - t0;
  t0 = performance.now();
  for (let off = 0; off < data.length; off += PIECE) await ok(e, token, 'GET', `/sandboxes/${id}/files?path=/tmp/bench.bin&offset=${off}`);
  const apiGet = performance.now() - t0;

  // The agent serves one client and hostd holds it: hostd goes down (its VMs run on) for the baseline.
  await e.d.kill();
  const direct: number[] = [];
  let directPut = 0;
  let directGet = 0;
  const agent = await GuestAgent.open(path.join(e.root, 'data', 'run', `vm-${vmid}`, 'qga.sock'), 30_000);
  try {
    const call = <T>(cmd: string, args?: Record<string, unknown>, t?: number) => agent.call<T>(cmd, args, t);
    for (let i = 0; i < EXEC_RUNS; i++) {
      const s = performance.now();
      // The guest work of an API exec: the prelude (env, cwd, user) inside the bounded wrapper.
      const r = await guestExec(call, 'true', 60_000, { env: {} });
      if (r.exit_code !== 0) throw new Error(`direct exec: ${JSON.stringify(r)}`);
      direct.push(performance.now() - s);
    }
    const files = new GuestFiles(call, (script, args) => guestExec(call, script, SCRIPT_TIMEOUT_MS, { cut: false, args }));
    t0 = performance.now();
    for (let off = 0; off < data.length; off += PIECE) await files.put('/tmp/bench-direct.bin', data.subarray(off, off + PIECE), { append: off > 0 });
    directPut = performance.now() - t0;
    t0 = performance.now();
    for (let off = 0; off < data.length; off += PIECE) {
      await files.stat('/tmp/bench-direct.bin');
      await files.read('/tmp/bench-direct.bin', off, PIECE);
    }
    directGet = performance.now() - t0;
  } finally {
    agent.close();
    e = await restart(e);
  }
  api.sort((a, b) => a - b);
  direct.sort((a, b) => a - b);
  print('sandbox_exec_ms_p50', pct(api, 0.5), 1);
  print('sandbox_exec_direct_ms_p50', pct(direct, 0.5), 1);
  print('sandbox_exec_ratio', pct(api, 0.5) / pct(direct, 0.5), 2);
  const mibS = (ms: number) => data.length / MiB / (ms / 1000);
  print('sandbox_file_put_mib_s', mibS(apiPut), 2);
  print('sandbox_file_put_direct_mib_s', mibS(directPut), 2);
  print('sandbox_file_put_ratio', directPut / apiPut, 2);
  print('sandbox_file_get_mib_s', mibS(apiGet), 2);
  print('sandbox_file_get_direct_mib_s', mibS(directGet), 2);
  print('sandbox_file_get_ratio', directGet / apiGet, 2);
  print('sandbox_file_chunk_bytes', FILE_CHUNK_BYTES, 0);
  return { e, id };
}

/**
 * The tombstone curve (figures of the scale kind, in this section because it
 * needs this section's warm state): a token of its own makes N sandboxes,
 * each created, run and destroyed (a tombstone), N = 1, 10 by default
 * (BENCH_SCALE_TOMBSTONES_MAX: each is a warm resume under TCG, seconds each,
 * so 100 would take minutes of the bench's budget); GET /sandboxes with
 * include_destroyed and GET /sandboxes/{id} of the first tombstone. The
 * daemon also holds the tombstones of this section's earlier cycles, made by
 * another token: scale_sandbox_tombstones_other says how many.
 */
async function tombstoneCurve(e: VmsEnv, sectionToken: string): Promise<void> {
  const token = await e.d.token('bench-tombstones', ['sandbox.read', 'sandbox.manage']);
  let first = '';
  const other = await call(e, sectionToken, 'GET', '/sandboxes?include_destroyed=true');
  const get = async (p: string) => {
    const r = await call(e, token, 'GET', p);
    if (r.status !== 200) throw new Error(`GET ${p}: ${r.status} ${r.text}`);
  };
  await measureCurve(
    {
      kind: 'sandbox_tombstones',
      pid: e.d.proc.pid,
      grow: async (from, to) => {
        for (let i = from; i < to; i++) {
          const c = await ok(e, token, 'POST', '/sandboxes', { image_id: 'bench' });
          const id = c.sandbox.id as string;
          first ||= id;
          try {
            await untilAllRunning(e, token, [id]);
          } finally {
            await ok(e, token, 'DELETE', `/sandboxes/${id}`);
          }
        }
      },
      list: () => get('/sandboxes?include_destroyed=true'),
      get: () => get(`/sandboxes/${first}`),
    },
    stepsUpTo(Number(process.env.BENCH_SCALE_TOMBSTONES_MAX ?? 10)),
  );
  if (other.status === 200) print('scale_sandbox_tombstones_other', (other.body.sandboxes as unknown[]).length, 0);
}

export async function sandboxesBench(): Promise<void> {
  const why = await missingRuntime();
  if (why) {
    process.stdout.write(`# sandboxes skipped: ${why}\n`);
    return;
  }
  let e: VmsEnv | null = null;
  try {
    e = await startSandboxDaemon({ sandboxes: '  max_per_token: 16\n  max_memory_mb_per_token: 65536' });
    const env = e;
    const token = await env.d.token('bench', ['sandbox.read', 'sandbox.manage']);
    await importImages(env, 'bench', false, 'full');

    const cold = await cycle(env, token, false);
    print('sandbox_cold_create_to_running_ms', cold, 0);

    await warmDone(env, await startWarm(env, 'bench'));
    const warm: number[] = [];
    for (let i = 0; i < 10; i++) warm.push(await cycle(env, token, false));
    warm.sort((a, b) => a - b);
    const p50 = pct(warm, 0.5);
    print('sandbox_create_to_running_ms_p50', p50, 0);
    print('sandbox_create_to_running_ms_p95', pct(warm, 0.95), 0);
    print('sandbox_cold_vs_warm_ratio', cold / p50, 1);

    const caps = '  max_per_token: 16\n  max_memory_mb_per_token: 65536';
    const agent = await agentFigures(env, token, (old) => startSandboxDaemon({ root: old.root, sandboxes: caps }));
    e = agent.e;
    const e2 = e;
    // Forks of the running sandbox, create to running of every copy, against the warm create.
    for (const count of [1, 2]) {
      const t0 = performance.now();
      const f = await ok(e2, token, 'POST', `/sandboxes/${agent.id}/fork`, { count });
      const ids = (f.sandboxes as any[]).map((x) => x.id as string);
      await untilAllRunning(e2, token, ids);
      const ms = performance.now() - t0;
      for (const id of ids) await ok(e2, token, 'DELETE', `/sandboxes/${id}`);
      print(`sandbox_fork${count}_to_running_ms`, ms, 0);
      print(count === 1 ? 'sandbox_fork_ratio' : 'sandbox_fork2_ratio', ms / p50, 2);
    }
    await ok(e2, token, 'DELETE', `/sandboxes/${agent.id}`);

    const inflight = Number(process.env.BENCH_SANDBOX_INFLIGHT ?? 4);
    const seconds = Number(process.env.BENCH_SANDBOX_SECONDS ?? 60);
    const end = performance.now() + seconds * 1000;
    let done = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: inflight }, async () => {
        while (performance.now() < end) {
          await cycle(e2, token, true);
          done++;
        }
      }),
    );
    print('sandboxes_per_minute', (done * 60_000) / (performance.now() - t0), 1);
    print('sandboxes_in_flight', inflight, 0);
    await tombstoneCurve(e2, token);
  } finally {
    if (e) {
      await killGuests(e.root);
      await e.d.stop();
    }
  }
}
