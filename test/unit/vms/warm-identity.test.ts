/**
 * A VM resumed from a warm state runs, and its agent may answer, before the
 * restore has given it its own identity: wait-ready, exec and guest files
 * wait for that step (fake driver; the runtime tests hold the same against
 * QEMU). The waits' safety-net poll is an hour away here, so a wait-ready
 * that answers was woken by the end of the identity step.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { Store } from '../../../daemon/store/store.js';
import { TaskRunner } from '../../../daemon/tasks/runner.js';
import { noNotes } from '../../../daemon/lib/caller.js';
import type { VmService } from '../../../daemon/vms/service.js';
import { identityScript } from '../../../daemon/vms/warm-states.js';
import { eventually } from '../../helpers/daemon.js';
import { FakeDriver, fakeVmService } from '../../helpers/vms-fake-driver.js';

describe('vms warm restore: nothing before the identity (fake driver)', () => {
  let dir: string;
  let store: Store;
  let tasks: TaskRunner;
  let drv: FakeDriver;
  let svc: VmService;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-vms-unit-'));
    store = await Store.open(path.join(dir, 'db'));
    tasks = new TaskRunner(store, 'n1');
    drv = new FakeDriver();
    svc = await fakeVmService(dir, store, tasks, drv, { min_cpu_cores: 1, min_memory_mb: 0, min_disk_gb: 1 }, { wait_poll_seconds: 3600 });
  });

  afterEach(async () => {
    await tasks.shutdown();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('answers wait-ready and runs exec only after the identity step; its end wakes a waiting wait-ready', async () => {
    const { vm } = await svc.create({ name: 'src', image_id: 'base', linked_clone: true }, noNotes);
    await svc.start(vm.vmid, noNotes);
    const saved = await svc.saveWarmState(vm.vmid, 'w', noNotes, { wait: true });
    // What the save asked of the guest (it waits for the first boot to settle) is not this test's.
    drv.trail.length = 0;
    const release = drv.holdNextExec();
    const restoring = svc.restoreWarmState(saved.warm_state_id, { name: 'copy', vmid: 150 }, noNotes);
    // The identity's shell reached the guest and is held there: the VM is recorded and runs, its agent answers.
    await eventually(() => drv.trail.length === 1, 10_000, 'the identity step to reach the guest');
    expect(drv.trail[0]).to.match(/^exec:set -e\n/);
    expect((await svc.get(150)).state).to.equal('running');
    const execing = svc.exec(150, 'hostname', 10, noNotes);
    const waiting = svc.waitReady(150, 60);
    // Meanwhile a short wait-ready answers not ready, saying why (and the exec above has had its second).
    const early = await svc.waitReady(150, 1);
    expect(early).to.include({
      ready: false,
      timed_out: true,
      state: 'running',
      reason: 'the VM was resumed from a warm state and its own identity is still being set',
    });
    expect(drv.trail).to.have.length(1);
    drv.trail.push('identity released');
    release();
    const w = await waiting;
    expect(w).to.include({ ready: true, timed_out: false, state: 'running', reason: null });
    expect(w.waited_ms).to.be.below(60_000);
    expect((await execing).stdout).to.equal('hostname');
    expect((await restoring).identity).to.deep.equal({ applied: true, reason: null });
    expect(drv.trail.slice(1)).to.deep.equal(['identity released', 'exec:hostname']);
    // Once set, nothing waits: a VM with no identity step under way answers at once.
    expect(await svc.waitReady(150, 1)).to.include({ ready: true });
  });

  it('makes the identity one guest shell: the clock shifted relative to the guest when the offset is known, keys in the background', () => {
    const s = identityScript({ hostname: 'copy', machineId: 'ab'.repeat(16), seed: true, nowMs: 1_700_000_000_042, clockOffsetMs: -1500.4 });
    const lines = s.split('\n');
    expect(lines[0]).to.equal('set -e');
    expect(lines[1]).to.equal(
      "LC_ALL=C date -u -s '-1.500 seconds' >/dev/null 2>&1 || LC_ALL=C date -u -s @1700000000.042 >/dev/null 2>&1 || date -u -s @1700000000 >/dev/null 2>&1 || true",
    );
    expect(lines).to.include("printf '%s' 'copy' > /proc/sys/kernel/hostname");
    expect(lines).to.include(`printf '%s\\n' ${'ab'.repeat(16)} > /etc/machine-id`);
    expect(lines).to.include('for k in /etc/ssh/ssh_host_*_key; do [ -L "$k" ] || [ ! -f "$k" ] || : > "$k"; done');
    expect(lines.at(-1)).to.match(/^\$n sh -c 'rm -f \/etc\/ssh\/ssh_host_\*_key .*ssh-keygen -A.*' >\/dev\/null 2>&1 <\/dev\/null &$/);
    // skip_rekey: the saved machine-id and keys stay; no seed, no seed file.
    const keep = identityScript({ hostname: 'copy', machineId: null, seed: false, nowMs: 5, clockOffsetMs: null });
    expect(keep).to.not.match(/machine-id|ssh-keygen|\/etc\/svc/);
    expect(keep.split('\n')[1]).to.equal('LC_ALL=C date -u -s @0.005 >/dev/null 2>&1 || date -u -s @0 >/dev/null 2>&1 || true');
  });
});
