/**
 * `vms.state` and `sandboxes.state` against real QEMU: the lifecycle calls
 * report their changes named by the caller, and the changes nobody asked for
 * (QEMU killed with SIGKILL, a guest that powers itself off) are found by the
 * VM driver's watch and reported with `actor: 'runtime'` and a reason. A
 * sandbox's events reach only its owner token; its VM has no `vms.state`
 * event. wait-ready wakes on the state event. One guest at a time. The
 * guests that run the test guest resume a shared warm state (the VM one of
 * test/helpers/vms-shared.ts, the sandbox one of sandboxes-fixture.ts):
 * these events are not about how a guest started.
 */
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { api, killGuests, ok, qemuPids, requireVmsRuntime, startVmsDaemon, type VmsEnv } from '../../helpers/vms-fixture.js';
import { importBlank, leaseSharedSandboxes, SANDBOX_YAML, untilRunning, type SandboxLease } from '../../helpers/sandboxes-fixture.js';
import { leaseSharedVms, type VmsLease } from '../../helpers/vms-shared.js';
import { headCursor, stateEventsNow, stateEventsUntil, states } from '../../helpers/state-events.js';
import { eventually } from '../../helpers/daemon.js';

const BOOT_S = 900;
const SANDBOX_SCOPES = ['vm.read', 'sandbox.read', 'sandbox.manage'];
// The waits' safety-net polls an hour apart: a wait that answers has been woken by a state event.
const YAML = ['  wait_poll_seconds: 3600', SANDBOX_YAML('  wait_poll_seconds: 3600')].join('\n');

/** The QEMU process of one VM of the test's data dir (by its pidfile). */
function pidOfVm(e: VmsEnv, vmid: number): number {
  const pid = Number(fs.readFileSync(path.join(e.root, 'data', 'run', `vm-${vmid}`, 'qemu.pid'), 'utf8').trim());
  expect(qemuPids(e.root), `QEMU of VM ${vmid}`).to.include(pid);
  return pid;
}

describe('vms.state and sandboxes.state (QEMU)', function () {
  this.timeout(30 * 60_000);
  let e: VmsEnv;
  let vmsLease: VmsLease | undefined;
  let sbxLease: SandboxLease | undefined;
  const req = (token?: string, on?: VmsEnv) => (method: string, p: string) => api(on ?? e, method, p, undefined, token ?? (on ?? e).token);

  before(async function () {
    await requireVmsRuntime(this);
    e = await startVmsDaemon({ extraYaml: YAML });
    await importBlank(e);
  });

  after(async function () {
    if (e) await killGuests(e.root);
    await vmsLease?.release();
    await sbxLease?.release();
  });

  it('reports start, suspend, resume, stop and delete named by the caller, and a QEMU killed with SIGKILL as crashed', async function () {
    const cursor = await headCursor(req());
    await ok(e, 'POST', '/vms', { name: 'blank-ev', image_id: 'blank', vmid: 301, linked_clone: true, memory_mb: 512 }, 201);
    await ok(e, 'POST', '/vms/301/start');
    let evs = await stateEventsUntil(req(), 'vms', 'vms/301', cursor, (x) => states(x).includes('running'));
    expect(states(evs)).to.deep.equal(['stopped', 'running']);
    expect(
      evs.every((x) => x.actor !== 'runtime' && x.data.reason === undefined),
      JSON.stringify(evs),
    ).to.equal(true);
    expect(evs[1].data).to.include({ vmid: 301, name: 'blank-ev' });

    // Nobody asked: the watch sees the process end without a SHUTDOWN event.
    const c1 = evs[evs.length - 1].cursor;
    process.kill(pidOfVm(e, 301), 'SIGKILL');
    evs = await stateEventsUntil(req(), 'vms', 'vms/301', c1, (x) => x.length >= 1);
    expect(evs.map((x) => [x.data.state, x.actor, x.data.reason])).to.deep.equal([['stopped', 'runtime', 'crashed']]);
    expect((await ok(e, 'GET', '/vms/301')).vm.state).to.equal('stopped');

    const c2 = evs[0].cursor;
    await ok(e, 'POST', '/vms/301/start');
    await ok(e, 'POST', '/vms/301/suspend');
    await ok(e, 'POST', '/vms/301/resume');
    await ok(e, 'POST', '/vms/301/stop', { force: true });
    await ok(e, 'DELETE', '/vms/301');
    evs = await stateEventsUntil(req(), 'vms', 'vms/301', c2, (x) => states(x).includes('deleted'));
    expect(evs.map((x) => [x.data.state, x.data.reason ?? null])).to.deep.equal([
      ['running', null],
      ['suspended', null],
      ['running', null],
      ['stopped', null],
      ['deleted', null],
    ]);
    // A suspend ends the process with a QMP quit, and a stop with a kill: neither is reported a second time by the watch.
    expect(await stateEventsNow(req(), 'vms', 'vms/301', c2)).to.have.length(5);
  });

  it('wakes a wait-ready on a stopped VM with the running event of its start', async function () {
    const r = await ok(e, 'POST', '/vms', { name: 'wake-ev', image_id: 'blank', vmid: 302, linked_clone: true, memory_mb: 512 }, 201);
    expect(r.vm.state).to.equal('stopped');
    // wait-ready on the stopped VM, then the start: the running event wakes the wait (its poll is an hour
    // away), which then asks the agent; without the wake it would answer at its timeout, still `stopped`.
    const waiting = ok(e, 'POST', '/vms/302/wait-ready', { timeout_seconds: 30 });
    await ok(e, 'POST', '/vms/302/start');
    const w = await waiting;
    expect(w.state, JSON.stringify(w)).to.equal('running');
    await ok(e, 'DELETE', '/vms/302');
    await eventually(async () => qemuPids(e.root).length === 0, 60_000, "the blank guest's QEMU ended");
  });

  it('reports a guest that powers itself off (poweroff inside the guest) as stopped with reason guest-shutdown', async function () {
    vmsLease = await leaseSharedVms();
    const v = vmsLease.e;
    await vmsLease.resume(320, 'guest-ev');
    const cursor = await headCursor(req(undefined, v));
    // The exec's answer may never come (the guest goes down under it): not awaited for its result.
    void api(v, 'POST', '/vms/320/exec', { command: 'sleep 1; poweroff', timeout_seconds: 30 }).catch(() => undefined);
    const evs = await stateEventsUntil(req(undefined, v), 'vms', 'vms/320', cursor, (x) => x.length >= 1, BOOT_S * 1000);
    expect(evs.map((x) => [x.data.state, x.actor, x.data.reason])).to.deep.equal([['stopped', 'runtime', 'guest-shutdown']]);
    await eventually(async () => qemuPids(v.root).length === 0, 60_000, "the guest's QEMU ended");
    expect((await ok(v, 'GET', '/vms/320')).vm.state).to.equal('stopped');
    await ok(v, 'DELETE', '/vms/320');
  });

  it("reports a sandbox's changes to its owner only, its VM crashing included, and no vms.state for its VM", async function () {
    sbxLease = await leaseSharedSandboxes({ 'events-owner': SANDBOX_SCOPES, 'events-other': SANDBOX_SCOPES });
    const s = sbxLease.e;
    const [owner, other] = [sbxLease.tokens['events-owner'], sbxLease.tokens['events-other']];
    const cursor = await headCursor(req(owner, s));
    const created = await api(s, 'POST', '/sandboxes', { image_id: 'deb12' }, owner);
    expect(created.status, created.text).to.equal(201);
    const id = created.body.sandbox.id as string;
    const sbx = await untilRunning(s, owner, id, BOOT_S);
    let evs = await stateEventsUntil(req(owner, s), 'sandboxes', `sandboxes/${id}`, cursor, (x) => states(x).includes('running'));
    expect(states(evs)).to.deep.equal(['booting', 'running']);

    process.kill(pidOfVm(s, sbx.vmid), 'SIGKILL');
    evs = await stateEventsUntil(req(owner, s), 'sandboxes', `sandboxes/${id}`, cursor, (x) => states(x).includes('stopped'));
    const trail = JSON.stringify(
      s.d.logs
        .filter((l: { msg?: string }) => /state reported|watch/.test(l.msg ?? ''))
        .map((l: Record<string, unknown>) => [l.msg, l.vmid ?? l.id, l.state, l.actor, l.reason]),
    );
    expect(
      evs.slice(2).map((x) => [x.data.state, x.actor, x.data.reason]),
      trail,
    ).to.deep.equal([['stopped', 'runtime', 'crashed']]);

    const del = await api(s, 'DELETE', `/sandboxes/${id}`, undefined, owner);
    expect(del.status, del.text).to.equal(200);
    evs = await stateEventsUntil(req(owner, s), 'sandboxes', `sandboxes/${id}`, cursor, (x) => states(x).includes('destroyed'));
    expect(states(evs)).to.deep.equal(['booting', 'running', 'stopped', 'destroying', 'destroyed']);

    // Another token that may read sandboxes and VMs sees none of it.
    expect(await stateEventsNow(req(other, s), 'sandboxes', `sandboxes/${id}`, cursor)).to.deep.equal([]);
    expect(await stateEventsNow(req(owner, s), 'vms', `vms/${sbx.vmid}`, cursor)).to.deep.equal([]);
    expect(await stateEventsNow(req(other, s), 'vms', `vms/${sbx.vmid}`, cursor)).to.deep.equal([]);
  });

  it('reports once, at the next start, a VM whose QEMU ended while hostd was down; a quiet restart reports nothing', async function () {
    await ok(e, 'POST', '/vms', { name: 'down-ev', image_id: 'blank', vmid: 303, linked_clone: true, memory_mb: 512 }, 201);
    await ok(e, 'POST', '/vms/303/start');
    const cursor = await headCursor(req());
    const pid = pidOfVm(e, 303);
    await e.d.kill();
    process.kill(pid, 'SIGKILL');
    await eventually(() => !qemuPids(e.root).includes(pid), 30_000, 'QEMU of VM 303 ended');
    e = await startVmsDaemon({ root: e.root, extraYaml: YAML });
    const evs = await stateEventsUntil(req(), 'vms', 'vms/303', cursor, (x) => x.length >= 1);
    expect(evs.map((x) => [x.data.state, x.actor, x.data.reason])).to.deep.equal([['stopped', 'runtime', 'found-at-open']]);
    // Once reported, not again: a second restart (nothing changed) adds no event.
    await e.d.stop();
    e = await startVmsDaemon({ root: e.root, extraYaml: YAML });
    await ok(e, 'DELETE', '/vms/303');
    const all = await stateEventsUntil(req(), 'vms', 'vms/303', cursor, (x) => states(x).includes('deleted'));
    expect(states(all)).to.deep.equal(['stopped', 'deleted']);
  });
});
