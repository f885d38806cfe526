/**
 * The sandbox service's rules over the real VM service on a fake VM driver
 * (test/helpers/vms-fake-driver.ts): ownership, idempotency, caps, labels,
 * tombstones, warm-or-cold, recovery. The runtime tests hold the same against
 * QEMU (test/runtime/sandboxes/).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import pino from 'pino';
import { Store } from '../../../daemon/store/store.js';
import { TaskRunner } from '../../../daemon/tasks/runner.js';
import { noNotes, type Caller } from '../../../daemon/lib/caller.js';
import type { VmService } from '../../../daemon/vms/service.js';
import { SandboxRecords } from '../../../daemon/sandboxes/records.js';
import { SandboxService } from '../../../daemon/sandboxes/service.js';
import { parseSandboxSettings } from '../../../daemon/sandboxes/settings.js';
import { checkSandboxName, friendlyName } from '../../../daemon/sandboxes/names.js';
import { eventually } from '../../helpers/daemon.js';
import { rejectsApi } from '../../helpers/expect.js';
import { FakeDriver, fakeVmService } from '../../helpers/vms-fake-driver.js';

/** A sandbox record as hostd left it `booting` (alice's, image base, 1 core, 512 MiB), for the restart cases; `over` sets the rest. */
function bootingRecord(id: string, name: string, at: string, over: Record<string, unknown>): any {
  return {
    id,
    name,
    token_id: 'tok_a',
    token_name: 'alice',
    image_id: 'base',
    cpu_cores: 1,
    memory_mb: 512,
    disk_gb: 3,
    labels: {},
    autostart: false,
    phase: 'booting',
    vmid: null,
    error: null,
    idempotency: null,
    created_at: at,
    running_at: null,
    updated_at: at,
    destroyed_at: null,
    destroyed_by: null,
    ...over,
  };
}

const caller = (id: string, name = id): Caller => ({
  tokenId: id,
  tokenName: name,
  scopes: ['sandbox.read', 'sandbox.manage'],
  transport: 'api',
  origin: 'n1',
});

describe('sandboxes service rules (VM service on a fake driver)', () => {
  let dir: string;
  let store: Store;
  let tasks: TaskRunner;
  let drv: FakeDriver;
  let vms: VmService;
  let svc: SandboxService;
  const alice = { caller: caller('tok_a', 'alice'), note() {} };
  const bob = { caller: caller('tok_b', 'bob'), note() {} };

  /** The service's log lines since the last open (parsed). */
  let logs: any[] = [];
  const open = async (settings: Record<string, unknown> = {}) => {
    vms = await fakeVmService(dir, store, tasks, drv, { min_cpu_cores: 1, min_memory_mb: 256, min_disk_gb: 0 });
    logs = [];
    svc = new SandboxService({
      records: new SandboxRecords(store),
      vms,
      tasks,
      secrets: vms.e.secrets,
      log: pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) }),
      env: {},
      settings: parseSandboxSettings({ default_memory_mb: 512, warm_scan_seconds: 0, ...settings }),
    });
    return svc;
  };

  const running = (id: string, who = alice) =>
    eventually(
      async () => {
        const w = await svc.wait(id, 0, who);
        return w.running ? w.sandbox : undefined;
      },
      10_000,
      `sandbox ${id} running`,
    );

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-sbx-unit-'));
    store = await Store.open(path.join(dir, 'db'));
    tasks = new TaskRunner(store, 'n1');
    drv = new FakeDriver();
    await open();
  });

  afterEach(async () => {
    await svc.close();
    await tasks.shutdown();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('names: given ones are DNS labels; friendly ones are two words, never a taken one', () => {
    expect(checkSandboxName('build-7')).to.equal('build-7');
    for (const bad of ['-x', 'x-', 'Upper', 'a_b', 'a'.repeat(64), '']) {
      expect(() => checkSandboxName(bad), bad).to.throw(
        "argument 'name' must be 1-63 of [a-z0-9-], starting and ending with a letter or digit (it is the guest's hostname)",
      );
    }
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const n = friendlyName((x) => seen.has(x));
      expect(n).to.match(/^[a-z]+-[a-z]+(-\d+)?$/);
      expect(seen.has(n)).to.equal(false);
      seen.add(n);
    }
  });

  it('creates booting at once, boots cold without a warm state (and says why), then runs; host defaults fill omitted resources', async () => {
    const { sandbox, replayed } = await svc.create({ image_id: 'base', labels: { team: 'x' } }, alice);
    expect(replayed).to.equal(false);
    expect(sandbox).to.include({ state: 'booting', image_id: 'base', owner: 'alice', vmid: null, error: null });
    expect(sandbox.id).to.match(/^sbx-[0-9a-f]{12}$/);
    expect(sandbox.resources).to.deep.equal({ cpu_cores: 1, memory_mb: 512, disk_gb: 3 });
    const s = await running(sandbox.id);
    expect(s.start).to.include({ method: 'cold', warm_state_id: null, reason: "image 'base' has no warm state (hostctl sandbox warm base)", attempts: 1 });
    expect(s.start.ms).to.be.a('number');
    const vm = await vms.get(s.vmid!, { owner: 'sandbox' });
    expect(vm).to.include({ name: sandbox.name, memory_mb: 512, linked_clone: true });
    expect(vm.labels).to.deep.equal({ sandbox_id: sandbox.id });
    // Its VM is not one of /vms.
    expect(await vms.list()).to.deep.equal([]);
    await rejectsApi(svc.create({ image_id: 'nope' }, alice), 404, "image 'nope' not found");
    await rejectsApi(
      svc.create({ image_id: 'base', resources: { memory_mb: 128 } }, alice),
      400,
      "argument 'resources.memory_mb' (128) is below the minimum of image 'base' (256)",
    );
    await rejectsApi(
      svc.create({ image_id: 'base', resources: { disk_gb: 2 } }, alice),
      400,
      "argument 'resources.disk_gb' (2) is below the minimum of image 'base' (3 GiB; disks cannot shrink)",
    );
    await rejectsApi(svc.create({ image_id: 'base', name: sandbox.name }, bob), 409, `a sandbox named '${sandbox.name}' already exists on this host`);
  });

  it('belongs to the token id that made it: another token (or a re-created one of the same name) gets 404 and an empty list', async () => {
    const { sandbox } = await svc.create({ image_id: 'base' }, alice);
    const again = { caller: caller('tok_a2', 'alice'), note() {} };
    for (const who of [bob, again]) {
      const msg = `sandbox '${sandbox.id}' not found`;
      await rejectsApi(svc.get(sandbox.id, who), 404, msg);
      await rejectsApi(svc.wait(sandbox.id, 0, who), 404, msg);
      await rejectsApi(svc.suspend(sandbox.id, who), 404, msg);
      await rejectsApi(svc.resume(sandbox.id, who), 404, msg);
      await rejectsApi(svc.destroy(sandbox.id, who), 404, msg);
      expect((await svc.list({ include_destroyed: true }, who)).sandboxes).to.deep.equal([]);
    }
    expect((await svc.list({}, alice)).sandboxes.map((s) => s.id)).to.deep.equal([sandbox.id]);
    await rejectsApi(svc.get('sbx-000000000000', alice), 404, "sandbox 'sbx-000000000000' not found");
    await rejectsApi(svc.get('../etc', alice), 404, "sandbox '../etc' not found");
  });

  it('idempotency: concurrent creates with one key make one sandbox; a replay after a restart returns it; keys are per token', async () => {
    const all = await Promise.all(Array.from({ length: 6 }, () => svc.create({ image_id: 'base', idempotency_key: 'k1' }, alice)));
    const ids = new Set(all.map((r) => r.sandbox.id));
    expect(ids.size).to.equal(1);
    expect(all.filter((r) => !r.replayed)).to.have.length(1);
    const [id] = ids;
    // Another token's same key is its own.
    const other = await svc.create({ image_id: 'base', idempotency_key: 'k1' }, bob);
    expect(other.sandbox.id).to.not.equal(id);
    expect(other.replayed).to.equal(false);
    await running(id);
    await svc.close();
    await open();
    await svc.recover();
    const replay = await svc.create({ image_id: 'base', idempotency_key: 'k1', name: 'ignored' }, alice);
    expect(replay).to.deep.include({ replayed: true });
    expect(replay.sandbox.id).to.equal(id);
    expect((await svc.list({}, alice)).sandboxes).to.have.length(1);
    expect(drv.machines.size).to.equal(2);
  });

  it('lists by labels (every pair must match) and keeps destroyed ones as tombstones with when and by whom', async () => {
    const a = (await svc.create({ image_id: 'base', labels: { env: 'ci', team: 'x' } }, alice)).sandbox;
    const b = (await svc.create({ image_id: 'base', labels: { env: 'ci' } }, alice)).sandbox;
    await running(a.id);
    await running(b.id);
    const ids = async (q: Parameters<SandboxService['list']>[0]) => (await svc.list(q, alice)).sandboxes.map((s) => s.id);
    expect(await ids({ labels: { env: 'ci' } })).to.deep.equal([a.id, b.id]);
    expect(await ids({ labels: { env: 'ci', team: 'x' } })).to.deep.equal([a.id]);
    expect(await ids({ labels: { team: 'y' } })).to.deep.equal([]);
    const vmid = (await svc.get(a.id, alice)).sandbox.vmid!;
    const d = await svc.destroy(a.id, alice);
    expect(d.already_destroyed).to.equal(false);
    expect(d.sandbox).to.include({ state: 'destroyed', destroyed_by: 'alice', vmid: null });
    expect(d.sandbox.destroyed_at).to.be.a('string');
    await rejectsApi(vms.get(vmid, { owner: 'sandbox' }), 404, `VM ${vmid} not found`);
    expect(fs.existsSync(path.join(dir, `pool/.vms/vm-${vmid}`))).to.equal(false);
    expect(await ids({ labels: { env: 'ci' } })).to.deep.equal([b.id]);
    expect(await ids({ labels: { env: 'ci' }, include_destroyed: true })).to.deep.equal([a.id, b.id]);
    expect((await svc.destroy(a.id, alice)).already_destroyed).to.equal(true);
    await rejectsApi(svc.suspend(a.id, alice), 409, `sandbox '${a.id}' is destroyed`);
    const w = await svc.wait(a.id, 5, alice);
    expect(w).to.include({ running: false, timed_out: false, reason: 'the sandbox is destroyed' });
  });

  it('suspends and resumes idempotently; a booting sandbox answers 409', async () => {
    const { sandbox } = await svc.create({ image_id: 'base' }, alice);
    await rejectsApi(svc.suspend(sandbox.id, alice), 409, `sandbox '${sandbox.id}' is booting: suspend it once it runs (POST /sandboxes/${sandbox.id}/wait)`);
    await running(sandbox.id);
    const s1 = await svc.suspend(sandbox.id, alice);
    expect(s1.already_suspended).to.equal(false);
    expect(s1.sandbox.state).to.equal('suspended');
    expect((await svc.suspend(sandbox.id, alice)).already_suspended).to.equal(true);
    const w = await svc.wait(sandbox.id, 60, alice);
    expect(w).to.include({ running: false, timed_out: false, reason: `the sandbox is suspended: resume it (POST /sandboxes/${sandbox.id}/resume)` });
    const r1 = await svc.resume(sandbox.id, alice);
    expect(r1).to.deep.include({ already_running: false });
    expect(r1.sandbox.state).to.equal('running');
    expect((await svc.resume(sandbox.id, alice)).already_running).to.equal(true);
  });

  it('starts from a fitting warm state (resume on a linked clone); other shapes boot cold and say why', async () => {
    const build = await svc.saveWarm({ image_id: 'base' }, 'op');
    const t = await tasks.settled(build.task.task_id);
    expect(t.state, t.error ?? '').to.equal('succeeded');
    const ws = (t.result as { warm_state_id: string }).warm_state_id;
    // The build VM is gone; the warm state stays.
    expect(await vms.listOwned('sandbox')).to.deep.equal([]);
    const img = (await svc.images()).images[0];
    expect(img).to.deep.include({ image_id: 'base', default_start: 'warm', default_resources: { cpu_cores: 1, memory_mb: 512, disk_gb: 3 } });
    expect(img.warm_states.map((w) => w.warm_state_id)).to.deep.equal([ws]);
    const warm = (await svc.create({ image_id: 'base', seed_data: 'S' }, alice)).sandbox;
    const w = await running(warm.id);
    expect(w.start).to.include({ method: 'warm', warm_state_id: ws, reason: null });
    expect((await vms.get(w.vmid!, { owner: 'sandbox' })).warm_state_id).to.equal(ws);
    const cold = (await svc.create({ image_id: 'base', resources: { memory_mb: 1024 } }, alice)).sandbox;
    const c = await running(cold.id);
    expect(c.start).to.include({
      method: 'cold',
      reason: "no warm state of image 'base' has 1 CPU, 1024 MiB and at least 3 GiB of disk (there are: 1 CPU/512 MiB/3 GiB)",
    });
    // A warm state in use cannot go.
    await rejectsApi(svc.deleteWarm(ws), 409, `warm state '${ws}' is the base of VMs ${w.vmid}: delete them first`);
  });

  it('caps: live sandboxes and their memory per token (409 saying which), then the host capacity (409, nothing made)', async () => {
    await svc.close();
    await open({ max_per_token: 2, max_memory_mb_per_token: 1536 });
    const a = (await svc.create({ image_id: 'base' }, alice)).sandbox;
    await rejectsApi(
      svc.create({ image_id: 'base', resources: { memory_mb: 1100 } }, alice),
      409,
      "token 'alice' holds 512 MiB in live sandboxes; 1100 MiB more would pass the per-token limit of 1536 MiB (sandboxes.max_memory_mb_per_token): destroy one first",
    );
    await svc.create({ image_id: 'base' }, alice);
    await rejectsApi(
      svc.create({ image_id: 'base' }, alice),
      409,
      "token 'alice' already has 2 live sandboxes, the per-token limit (sandboxes.max_per_token is 2): destroy one first",
    );
    // Another token has its own allowance; a destroyed sandbox frees one.
    await svc.create({ image_id: 'base' }, bob);
    await running(a.id);
    await svc.destroy(a.id, alice);
    await svc.create({ image_id: 'base' }, alice);
    // More memory than the host has free: 409 before anything is made.
    const total = Math.floor(os.totalmem() / 1024 / 1024);
    const before = (await svc.list({ include_destroyed: true }, bob)).sandboxes.length;
    let caught: any;
    try {
      await svc.create({ image_id: 'base', resources: { memory_mb: total - 1 } }, { caller: caller('tok_c', 'carol'), note() {} });
    } catch (err) {
      caught = err;
    }
    expect(caught?.status).to.equal(409);
    expect(caught.message).to.match(
      /^the host cannot fit this sandbox now: it needs about \d+ MiB \(\d+ MiB of memory and \d+ MiB of QEMU overhead\) and the host has \d+ MiB free after 1024 MiB kept for itself \(sandboxes\.host_reserve_mb\)/,
    );
    expect((await svc.list({ include_destroyed: true }, { caller: caller('tok_c') })).sandboxes).to.deep.equal([]);
    expect((await svc.list({ include_destroyed: true }, bob)).sandboxes.length).to.equal(before);
  });

  it('a failed boot keeps no VM, says why, and can be destroyed', async () => {
    drv.createDisk = async () => {
      throw new Error('no space left on device');
    };
    const { sandbox } = await svc.create({ image_id: 'base', seed_data: 'S' }, alice);
    const f = await eventually(
      async () => {
        const s = (await svc.get(sandbox.id, alice)).sandbox;
        return s.state === 'booting' ? undefined : s;
      },
      10_000,
      'the boot to end',
    );
    expect(f).to.include({ state: 'failed', error: 'boot failed: no space left on device', vmid: null });
    expect(await vms.listOwned('sandbox')).to.deep.equal([]);
    expect(await vms.e.secrets.list('sandboxes-seed')).to.deep.equal([]);
    const w = await svc.wait(sandbox.id, 60, alice);
    expect(w).to.include({ running: false, timed_out: false, reason: 'the sandbox did not start: boot failed: no space left on device' });
    await rejectsApi(svc.resume(sandbox.id, alice), 409, `sandbox '${sandbox.id}' failed to start (boot failed: no space left on device): destroy it`);
    expect((await svc.destroy(sandbox.id, alice)).sandbox.state).to.equal('destroyed');
  });

  it('recovery: continues an interrupted boot, finishes an interrupted destroy, removes VMs no sandbox owns', async () => {
    const keep = (await svc.create({ image_id: 'base' }, alice)).sandbox;
    await running(keep.id);
    // A booting record whose boot never ran (hostd died right after admitting it).
    const recs = new SandboxRecords(store);
    const t = new Date().toISOString();
    await recs.boxes.put(
      'sbx-00000000000b',
      bootingRecord('sbx-00000000000b', 'left-booting', t, { start: { method: null, warm_state_id: null, reason: null, ms: null, attempts: 1 } }),
    );
    // A destroy that died after marking the sandbox.
    const doomed = (await svc.create({ image_id: 'base' }, alice)).sandbox;
    const dvm = (await running(doomed.id)).vmid!;
    const r = (await recs.get(doomed.id))!;
    await recs.write([
      recs.intentPut(SandboxRecords.intentKey('destroy'), { op: 'destroy', id: doomed.id, by: 'alice', at: t }),
      recs.put({ ...r, phase: 'destroying' }),
    ]);
    // A VM labelled for a sandbox that does not exist, and a warm build VM whose task died.
    const orphan = await vms.create({ name: 'orphan', image_id: 'base' }, noNotes, { owner: 'sandbox', labels: { sandbox_id: 'sbx-0000000000ff' } });
    const build = await vms.create({ name: 'warm-base', image_id: 'base' }, noNotes, { owner: 'sandbox', labels: { sandbox_warm_build: 'base' } });
    await svc.close();
    await open();
    const out = await svc.recover();
    expect(out).to.deep.equal({ destroys: 1, boots: 1, orphans: 2, lost: 0 });
    const owned = (await vms.listOwned('sandbox')).map((v) => v.vmid);
    expect(owned).to.not.include.members([orphan.vm.vmid, build.vm.vmid, dvm]);
    expect((await svc.get(doomed.id, alice)).sandbox).to.include({ state: 'destroyed', destroyed_by: 'alice', destroyed_at: t });
    const b = await running('sbx-00000000000b');
    expect(b.start.attempts).to.equal(2);
    expect((await svc.get(keep.id, alice)).sandbox.state).to.equal('running');
    expect((await svc.list({}, alice)).sandboxes.map((s) => s.id).sort()).to.deep.equal([keep.id, 'sbx-00000000000b'].sort());
  });

  it('reports live sandboxes through the guests port, and a destroy during the boot leaves nothing', async () => {
    const { sandbox } = await svc.create({ image_id: 'base' }, alice);
    const d = await svc.destroy(sandbox.id, alice);
    expect(d.sandbox.state).to.equal('destroyed');
    expect(await vms.listOwned('sandbox')).to.deep.equal([]);
    const live = (await svc.create({ image_id: 'base' }, alice)).sandbox;
    await running(live.id);
    const g = await svc.guests();
    expect(g).to.have.length(1);
    expect(g[0]).to.include({ kind: 'sandbox', id: live.id, name: live.name, state: 'running', running: true, cpu_cores: 1, memory_mb: 512 });
  });

  it('keeps images labelled for warmth warm (a template build labels its image)', async () => {
    await svc.close();
    await open({ warm_label: 'warm' });
    expect(await svc.keepWarm()).to.deep.equal([]);
    const img = (await vms.records.image('base'))!;
    await vms.records.images.put('base', { ...img, labels: { warm: 'true' } });
    const [taskId] = await svc.keepWarm();
    expect((await tasks.settled(taskId)).state).to.equal('succeeded');
    expect((await svc.images()).images[0].default_start).to.equal('warm');
    expect(await svc.keepWarm()).to.deep.equal([]);
  });

  it('never resumes a warm state saved before VMs had a generation ID device: cold, saying so; a labelled image gets a new one', async () => {
    await svc.close();
    await open({ warm_label: 'warm' });
    const build = await svc.saveWarm({ image_id: 'base' }, 'op');
    const ws = ((await tasks.settled(build.task.task_id)).result as { warm_state_id: string }).warm_state_id;
    // The record as an earlier hostd wrote it.
    const old = (await vms.records.warmState(ws))!;
    delete old.format;
    delete old.vmgenid;
    await vms.records.warm.put(ws, old);
    const img = (await svc.images()).images[0];
    expect(img.default_start).to.equal('cold');
    expect(img.warm_states.map((w) => [w.warm_state_id, w.resumable])).to.deep.equal([[ws, false]]);
    const sb = (await svc.create({ image_id: 'base' }, alice)).sandbox;
    const c = await running(sb.id);
    expect(c.start).to.include({
      method: 'cold',
      warm_state_id: null,
      reason: `image 'base' has only warm states saved before VMs had a generation ID device (${ws}), which are not resumed (hostctl sandbox warm base saves a new one)`,
    });
    await svc.destroy(sb.id, alice);
    const base = (await vms.records.image('base'))!;
    await vms.records.images.put('base', { ...base, labels: { warm: 'true' } });
    const [taskId] = await svc.keepWarm();
    expect((await tasks.settled(taskId)).state).to.equal('succeeded');
    const after = (await svc.images()).images[0];
    expect(after.default_start).to.equal('warm');
    expect(after.warm_states.filter((w) => w.resumable)).to.have.length(1);
    // The old one stays until the operator deletes it (nothing is deleted for them).
    expect(after.warm_states.map((w) => w.warm_state_id)).to.include(ws);
  });
  it('fork: caps and capacity for every copy before anything is made; another token 404; a replay returns the same copies', async () => {
    await svc.close();
    await open({ max_per_token: 3 });
    const p = await running((await svc.create({ image_id: 'base', labels: { job: '1' } }, alice)).sandbox.id);
    await rejectsApi(svc.fork(p.id, { count: 1 }, bob), 404, `sandbox '${p.id}' not found`);
    await rejectsApi(
      svc.fork(p.id, { count: 3 }, alice),
      409,
      "token 'alice' has 1 live sandboxes; 3 more would pass the per-token limit (sandboxes.max_per_token is 3): destroy some first",
    );
    expect((await svc.list({}, alice)).sandboxes.map((s) => s.id)).to.deep.equal([p.id]);
    expect(await vms.warmStates({ owner: 'sandbox' })).to.deep.equal([]);
    const f = await svc.fork(p.id, { count: 2, labels: { role: 'copy' }, idempotency_key: 'k' }, alice);
    expect(f).to.include({ parent_id: p.id, replayed: false });
    expect(f.sandboxes.map((s) => [s.state, s.owner, s.labels])).to.deep.equal([
      ['booting', 'alice', { job: '1', role: 'copy' }],
      ['booting', 'alice', { job: '1', role: 'copy' }],
    ]);
    const again = await svc.fork(p.id, { count: 2, idempotency_key: 'k' }, alice);
    expect(again).to.include({ replayed: true });
    expect(again.sandboxes.map((s) => s.id)).to.deep.equal(f.sandboxes.map((s) => s.id));
    await rejectsApi(svc.create({ image_id: 'base', idempotency_key: 'k' }, alice), 409, 'the idempotency key was used by a fork, not a create');
    const copies = await Promise.all(f.sandboxes.map((s) => running(s.id)));
    const ws = copies[0].start.warm_state_id!;
    expect(copies.map((c) => c.start)).to.deep.equal(copies.map((c) => ({ ...c.start, method: 'warm', warm_state_id: ws })));
    expect(new Set(copies.map((c) => c.name)).size).to.equal(2);
    expect((await svc.get(p.id, alice)).sandbox.state).to.equal('running');
  });

  it('fork: the saved state is internal (never offered to a create) and goes with the last copy', async () => {
    const p = await running((await svc.create({ image_id: 'base' }, alice)).sandbox.id);
    const f = await svc.fork(p.id, { count: 2 }, alice);
    const [a, b] = await Promise.all(f.sandboxes.map((s) => running(s.id)));
    const ws = a.start.warm_state_id!;
    expect((await vms.warmStates({ owner: 'sandbox' })).map((w) => [w.id, w.name])).to.deep.equal([[ws, `sandbox fork of ${p.id}`]]);
    expect((await svc.images()).images[0]).to.deep.include({ default_start: 'cold', warm_states: [] });
    const c = await running((await svc.create({ image_id: 'base' }, alice)).sandbox.id);
    expect(c.start).to.include({ method: 'cold', reason: "image 'base' has no warm state (hostctl sandbox warm base)" });
    // The parent does not hold it: the copies do.
    await svc.destroy(p.id, alice);
    await svc.destroy(a.id, alice);
    expect((await vms.warmStates({ owner: 'sandbox' })).map((w) => w.id)).to.deep.equal([ws]);
    await svc.destroy(b.id, alice);
    expect(await vms.warmStates({ owner: 'sandbox' })).to.deep.equal([]);
  });

  it('fork: copies hostd never saw saved fail at the next start saying why, and a saved state nobody rests on goes', async () => {
    const p = await running((await svc.create({ image_id: 'base' }, alice)).sandbox.id);
    const recs = new SandboxRecords(store);
    const t = new Date().toISOString();
    // Killed between writing the copies and saving the parent.
    await recs.boxes.put(
      'sbx-00000000000c',
      bootingRecord('sbx-00000000000c', 'unsaved-copy', t, {
        start: { method: 'warm', warm_state_id: null, reason: null, ms: null, attempts: 0 },
        fork: { parent: p.id, warm_state_id: null },
      }),
    );
    // Killed between saving the parent and recording the save.
    const saved = await vms.saveWarmState(p.vmid!, `sandbox fork of ${p.id}`, noNotes, { owner: 'sandbox', wait: true });
    await svc.close();
    await open();
    await svc.recover();
    const lost = await eventually(
      async () => {
        const s = (await svc.get('sbx-00000000000c', alice)).sandbox;
        return s.state === 'failed' ? s : undefined;
      },
      10_000,
      'the unsaved copy failed',
    );
    expect(lost.error).to.equal(`boot failed: hostd stopped before the memory and disk of sandbox '${p.id}' were saved`);
    expect((await vms.warmStates({ owner: 'sandbox' })).map((w) => w.id)).to.not.include(saved.warm_state_id);
    expect((await svc.get(p.id, alice)).sandbox.state).to.equal('running');
  });
  it('fork: the warm state a forked parent resumed from cannot be deleted while the fork rests on it', async () => {
    const build = await tasks.settled((await svc.saveWarm({ image_id: 'base' }, 'op')).task.task_id);
    const base = (build.result as { warm_state_id: string }).warm_state_id;
    const p = await running((await svc.create({ image_id: 'base' }, alice)).sandbox.id);
    expect(p.start.warm_state_id).to.equal(base);
    const f = await svc.fork(p.id, { count: 1 }, alice);
    const copy = await running(f.sandboxes[0].id);
    await svc.destroy(p.id, alice);
    // No VM rests on the base now, but the fork's saved disk does.
    await rejectsApi(svc.deleteWarm(base), 409, `warm state '${base}' is the base of warm states ${copy.start.warm_state_id}: delete them first`);
    await svc.destroy(copy.id, alice);
    await svc.deleteWarm(base);
    expect(await vms.warmStates({ owner: 'sandbox' })).to.deep.equal([]);
  });

  it('fork: with fork_max_guests, a copy waits booting (no VM, no attempt) while the host runs that many guests, and resumes once one goes', async () => {
    await svc.close();
    await open({ fork_resume_concurrency: 1, fork_max_guests: 2 });
    const p = await running((await svc.create({ image_id: 'base' }, alice)).sandbox.id);
    const f = await svc.fork(p.id, { count: 2 }, alice);
    const [a, b] = f.sandboxes;
    // The first copy resumes beside the parent (two guests); the second is held until one of them goes.
    await running(a.id);
    await eventually(() => logs.some((l) => l.msg === 'sandboxes: fork copies wait for a guest to go' && l.guests === 2), 10_000, 'the second copy held');
    const held = (await svc.get(b.id, alice)).sandbox;
    expect([held.state, held.vmid, held.start.attempts]).to.deep.equal(['booting', null, 0]);
    await svc.destroy(p.id, alice);
    const copy = await running(b.id);
    expect(copy.start).to.include({ method: 'warm', warm_state_id: (await svc.get(a.id, alice)).sandbox.start.warm_state_id });
    expect(logs.filter((l) => l.msg === 'sandboxes: a fork copy begins to resume').map((l) => l.id)).to.deep.equal([a.id, b.id]);
  });

  it('fork: copies still booting when hostd starts again resume through the same queue, one at a time', async () => {
    const p = await running((await svc.create({ image_id: 'base' }, alice)).sandbox.id);
    const saved = await vms.saveWarmState(p.vmid!, `sandbox fork of ${p.id}`, noNotes, { owner: 'sandbox', wait: true });
    const recs = new SandboxRecords(store);
    const t = new Date().toISOString();
    // Killed after the fork recorded its save, before either copy ran.
    const ids = ['sbx-0000000000a1', 'sbx-0000000000a2', 'sbx-0000000000a3'];
    for (const [i, id] of ids.entries()) {
      await recs.boxes.put(
        id,
        bootingRecord(id, `copy-${i}`, t, {
          start: { method: 'warm', warm_state_id: saved.warm_state_id, reason: null, ms: null, attempts: 0 },
          fork: { parent: p.id, warm_state_id: saved.warm_state_id },
        }),
      );
    }
    await svc.close();
    await open({ fork_resume_concurrency: 1 });
    // How many resumes of the saved state the VM service runs at once.
    let inFlight = 0;
    let most = 0;
    const restore = vms.restoreWarmState;
    (vms as { restoreWarmState: typeof restore }).restoreWarmState = async (...a: Parameters<typeof restore>) => {
      most = Math.max(most, ++inFlight);
      try {
        return await restore(...a);
      } finally {
        inFlight--;
      }
    };
    expect(await svc.recover()).to.include({ boots: 3 });
    for (const id of ids) await running(id);
    expect(most, 'resumes at once').to.equal(1);
    // Each resume began only once the one before it had ended (running): never two at once.
    // (a copy's `warm start` line follows its record's change to running, so the last one is waited for.)
    const logged = () =>
      logs
        .filter((l) => l.msg === 'sandboxes: a fork copy begins to resume' || l.msg === 'sandboxes: warm start')
        .map((l) => `${l.msg === 'sandboxes: warm start' ? 'runs' : 'begins'} ${l.id}`);
    const lines = await eventually(() => (logged().length >= 6 ? logged() : undefined), 10_000, "the copies' resume lines");
    const order = lines.filter((x) => x.startsWith('begins')).map((x) => x.slice('begins '.length));
    expect([...order].sort()).to.deep.equal(ids);
    expect(lines).to.deep.equal(order.flatMap((id) => [`begins ${id}`, `runs ${id}`]));
    expect(logs.filter((l) => l.msg === 'sandboxes: a fork copy begins to resume').map((l) => l.resuming)).to.deep.equal([1, 1, 1]);
  });
});
