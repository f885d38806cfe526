/**
 * VM figures, on the test guest under whatever accelerator the host has:
 *   vm_linked_clone_create_ms          p50 of POST /vms with linked_clone (target < 100), against
 *   vm_linked_clone_baseline_ms        p50 of the bare `qemu-img create -b` it wraps (same run)
 *   vm_cold_boot_to_agent_ms           start of a new linked clone until wait-ready (the agent answers)
 *   vm_warm_state_resume_to_agent_ms   POST /vms/warm-states/{id} (resume and the clone's own identity)
 *                                      until wait-ready, median of 3
 *   vm_warm_state_resume_to_running_ms hostd's own resume_ms of the same calls (QEMU running, before the identity)
 *   vm_warm_resume_by_hand_to_agent_ms the same saved state resumed by hand (warm-resume.ts: hostd's QEMU
 *                                      arguments, a linked clone of the frozen layer, `-incoming exec:cat`)
 *                                      until the agent answers guest-ping, median of 3, alternating with hostd's
 *   vm_warm_resume_by_hand_to_running_ms  the same, until QMP says running
 *   warm_resume_overhead_ratio         hostd's warm create to agent over the resume by hand (target <= 1.3)
 *   warm_vs_cold_ratio                 cold over warm (target >= 5)
 */
import fs from 'node:fs';
import path from 'node:path';
import { run } from '../../daemon/lib/run.js';
import { tempDir } from '../helpers/daemon.js';
import { ok, succeeded, untilInGuest, untilReady } from '../helpers/vms-fixture.js';
import { latencies, median, pct, print } from './lib.js';
import { withBenchVms } from './vms-daemon.js';
import { captureResume, resumeByHand, type CapturedResume } from './warm-resume.js';

export async function vmsBench(): Promise<void> {
  await withBenchVms('vms', async (env) => {
    const base = path.join(env.pools.p1, '.vms/images/bench.qcow2');
    const scratch = tempDir('hostd-vms-bench-');
    let n = 0;
    const baseline = await latencies(15, () =>
      run('qemu-img', ['create', '-q', '-f', 'qcow2', '-F', 'qcow2', '-b', base, path.join(scratch, `c${n++}.qcow2`), '4G']),
    );
    const made: number[] = [];
    const creates = await latencies(15, async () => {
      const r = await ok(env, 'POST', '/vms', { name: 'bench', image_id: 'bench', linked_clone: true }, 201);
      made.push(r.vm.vmid);
    });
    for (const id of made) await ok(env, 'DELETE', `/vms/${id}`);
    fs.rmSync(scratch, { recursive: true, force: true });
    const createP50 = pct(creates, 0.5);
    const baseP50 = pct(baseline, 0.5);
    print('vm_linked_clone_create_ms', createP50);
    print('vm_linked_clone_baseline_ms', baseP50);
    print('vm_linked_clone_create_vs_baseline_ratio', createP50 / baseP50);

    const { vm } = await ok(env, 'POST', '/vms', { name: 'cold', image_id: 'bench', linked_clone: true }, 201);
    const t0 = performance.now();
    await ok(env, 'POST', `/vms/${vm.vmid}/start`, {});
    // In calls of at most a minute: one request held for a whole boot meets the client's header timeout on a loaded machine.
    await untilReady(env, vm.vmid, 1800);
    const cold = performance.now() - t0;
    print('vm_cold_boot_to_agent_ms', cold, 0);

    // A warm state holds a settled guest (cloud-init done), as one made for reuse would.
    await untilInGuest(env, vm.vmid, 'cloud-init status --wait >/dev/null; true', 1800);
    const ws = await ok(env, 'POST', `/vms/${vm.vmid}/warm-states`, {}, 201);
    await succeeded(env, ws.task.task_id);
    await ok(env, 'DELETE', `/vms/${vm.vmid}`);
    // Alternating rounds: hostd restores the warm state, then QEMU resumes the same saved state by hand
    // with the arguments hostd gave it (warm-resume.ts), one guest at a time.
    const warm: number[] = [];
    const warmRunning: number[] = [];
    const hand: number[] = [];
    const handRunning: number[] = [];
    let captured: CapturedResume | null = null;
    const handScratch = tempDir('hostd-vms-bench-hand-');
    const handKeep = tempDir('hostd-vms-bench-keep-');
    try {
      for (let i = 0; i < 3; i++) {
        const t1 = performance.now();
        const r = await ok(env, 'POST', `/vms/warm-states/${ws.warm_state_id}`, { name: `warm-${i}` });
        await untilReady(env, r.vm.vmid, 600);
        warm.push(performance.now() - t1);
        warmRunning.push(r.resume_ms);
        captured ??= captureResume(env.root, r.vm.vmid, handKeep);
        await ok(env, 'DELETE', `/vms/${r.vm.vmid}`);
        const h = await resumeByHand(captured, handScratch);
        hand.push(h.agentMs);
        handRunning.push(h.runningMs);
      }
    } finally {
      fs.rmSync(handScratch, { recursive: true, force: true });
      fs.rmSync(handKeep, { recursive: true, force: true });
    }
    const warmMs = median(warm);
    print('vm_warm_state_resume_to_agent_ms', warmMs, 0);
    print('vm_warm_state_resume_to_running_ms', median(warmRunning), 0);
    print('vm_warm_resume_by_hand_to_agent_ms', median(hand), 0);
    print('vm_warm_resume_by_hand_to_running_ms', median(handRunning), 0);
    print('warm_resume_overhead_ratio', warmMs / median(hand));
    print('warm_vs_cold_ratio', cold / warmMs, 1);
    await ok(env, 'DELETE', `/vms/warm-states/${ws.warm_state_id}`);
  });
}
