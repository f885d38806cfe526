/**
 * Sandbox figures, on the test guest under whatever accelerator the host has
 * (TCG here), through the HTTP API with a sandbox-only token:
 *   sandbox_cold_create_to_running_ms      POST /sandboxes with no warm state until POST .../wait says
 *                                          running (the guest agent answers): the baseline
 *   sandbox_create_to_running_ms p50, p95  the same from a warm state (hostctl sandbox warm), 10 in a row
 *   sandbox_cold_vs_warm_ratio             cold over warm p50 (target >= 5 under TCG)
 *   sandboxes_per_minute                   create, wait, exec `true` (hostctl sandbox exec), destroy, in a
 *                                          loop with BENCH_SANDBOX_INFLIGHT (default 4) in flight for
 *                                          BENCH_SANDBOX_SECONDS (default 60)
 */
import { killGuests, missingRuntime, type VmsEnv } from '../helpers/vms-fixture.js';
import { call, importImages, startSandboxDaemon, startWarm, warmDone } from '../helpers/sandboxes-fixture.js';
import { pct, print } from './lib.js';

async function cycle(e: VmsEnv, token: string, exec: boolean): Promise<number> {
  const t0 = performance.now();
  const c = await call(e, token, 'POST', '/sandboxes', { image_id: 'bench' });
  if (c.status !== 201) throw new Error(`create: ${c.status} ${c.text}`);
  const id = c.body.sandbox.id;
  try {
    const w = await call(e, token, 'POST', `/sandboxes/${id}/wait`, { timeout_seconds: 900 });
    if (!w.body?.running) throw new Error(`sandbox ${id} did not run: ${w.text}`);
    const ms = performance.now() - t0;
    if (exec) {
      const x = await e.d.admin.request('POST', '/admin/sandboxes/exec', { id, command: 'true', timeout_seconds: 60 });
      if (x.status !== 200 || x.body.exit_code !== 0) throw new Error(`exec in ${id}: ${x.status} ${JSON.stringify(x.body)}`);
    }
    return ms;
  } finally {
    await call(e, token, 'DELETE', `/sandboxes/${id}`);
  }
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
    await importImages(env, 'bench', false);

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

    const inflight = Number(process.env.BENCH_SANDBOX_INFLIGHT ?? 4);
    const seconds = Number(process.env.BENCH_SANDBOX_SECONDS ?? 60);
    const end = performance.now() + seconds * 1000;
    let done = 0;
    const t0 = performance.now();
    await Promise.all(Array.from({ length: inflight }, async () => {
      while (performance.now() < end) {
        await cycle(env, token, true);
        done++;
      }
    }));
    print('sandboxes_per_minute', (done * 60_000) / (performance.now() - t0), 1);
    print('sandboxes_in_flight', inflight, 0);
  } finally {
    if (e) {
      await killGuests(e.root);
      await e.d.stop();
    }
  }
}
