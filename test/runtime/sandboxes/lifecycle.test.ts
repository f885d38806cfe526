/**
 * Sandboxes against real QEMU (TCG here), through the real daemon and tokens
 * that hold only sandbox scopes. One daemon for the whole file: a cold
 * sandbox boots while `hostctl sandbox warm` saves a warm state of the test
 * guest (two guests at most at any time); every later sandbox resumes it.
 * hostd is killed during create, suspend and delete and started again on the
 * same data dir. The after hook kills any QEMU the data dir started.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { guestImage, readGuestFile } from '../../helpers/vms-guest.js';
import { killGuests, requireVmsRuntime, operationAt, pausedAt, qemuPids, type VmsEnv } from '../../helpers/vms-fixture.js';
import { resultProblem } from '../../../api/validate.js';
import { isPauseLine } from '../../../daemon/lib/test-pause.js';
import { eventually } from '../../helpers/daemon.js';
import { call, importImages, onlyTheseVms, sbxSh, startSandboxDaemon, startWarm, untilRunning, vmDirs, warmDone } from '../../helpers/sandboxes-fixture.js';
import { generationIdOf, withHostdDown } from '../../helpers/vms-qmp.js';

const AGENT = ['sandbox.read', 'sandbox.manage'];
const CAPS = '  max_per_token: 2\n  max_memory_mb_per_token: 1536';

describe('sandboxes runtime (QEMU)', function () {
  this.timeout(20 * 60_000);
  let e: VmsEnv;
  let alice = '';
  let bob = '';
  let imageMachineId = '';
  let warmTask = '';
  let warmId = '';
  let cold: any;
  let warm: any;
  let twin: any;

  before(async function () {
    await requireVmsRuntime(this, 'sandboxes');
    imageMachineId = (await readGuestFile(await guestImage('lean'), '/etc/machine-id'))!.trim();
    e = await startSandboxDaemon({ sandboxes: CAPS });
    alice = await e.d.token('alice', AGENT);
    bob = await e.d.token('bob', AGENT);
    await importImages(e);
  });

  after(async function () {
    if (e) await killGuests(e.root);
  });

  const ok = async (token: string, method: string, p: string, body?: unknown, status = 200) => {
    const r = await call(e, token, method, p, body);
    expect(r.status, `${method} ${p}: ${r.text}`).to.equal(status);
    const op = operationAt(method, p);
    if (op) expect(resultProblem(op, r.body), `${method} ${p}: the answer fits ${op.name}'s result schema`).to.equal(undefined);
    return r.body;
  };
  const fails = async (token: string, method: string, p: string, body: unknown, status: number, error: string) => {
    const r = await call(e, token, method, p, body);
    expect(r.status, `${method} ${p}: ${r.text}`).to.equal(status);
    expect(r.body).to.deep.equal({ error });
  };
  const qemuPidOf = (vmid: number) => Number(fs.readFileSync(path.join(e.root, 'data', 'run', `vm-${vmid}`, 'qemu.pid'), 'utf8').trim());
  /** Kill -9 and start again on the same data dir (tokens and records survive). */
  const restart = async (env: Record<string, string> = {}) => {
    await e.d.kill();
    e = await startSandboxDaemon({ root: e.root, sandboxes: CAPS, env });
  };

  it('lists the images a sandbox can boot from; none has a warm state yet', async () => {
    const r = await ok(alice, 'GET', '/sandboxes/images');
    const img = r.images.find((i: any) => i.image_id === 'deb12');
    expect(img).to.deep.include({ kind: 'image', default_start: 'cold', warm_states: [] });
    expect(img.default_resources).to.deep.include({ cpu_cores: 1, memory_mb: 512 });
    expect(r.defaults).to.deep.equal({ cpu_cores: 1, memory_mb: 512, disk_gb: 0 });
    await fails(alice, 'POST', '/sandboxes', { image_id: 'nope' }, 404, "image 'nope' not found");
    await fails(alice, 'POST', '/sandboxes', { image_id: 'deb12', name: 'Not_A_Hostname' }, 400, "argument 'name' has an invalid form");
    await fails(
      alice,
      'POST',
      '/sandboxes',
      { image_id: 'deb12', resources: { memory_mb: 100 } },
      400,
      "argument 'resources.memory_mb' (100) is below the minimum of image 'deb12' (512)",
    );
    const readOnly = await e.d.token('reader', ['sandbox.read']);
    const denied = await call(e, readOnly, 'POST', '/sandboxes', { image_id: 'deb12' });
    expect(denied.status).to.equal(403);
    expect((await ok(alice, 'GET', '/sandboxes')).sandboxes).to.deep.equal([]);
  });

  it('boots cold when the image has no warm state (saying so), with its own identity and seed before first boot', async () => {
    // The warm state is saved meanwhile (the second guest): sandboxes after this one resume it.
    warmTask = await startWarm(e);
    const c = await ok(alice, 'POST', '/sandboxes', { image_id: 'deb12', name: 'cold-one', seed_data: 'cold-seed\n', labels: { kind: 'cold' } }, 201);
    expect(c.replayed).to.equal(false);
    expect(c.sandbox).to.include({ name: 'cold-one', state: 'booting', owner: 'alice', vmid: null });
    cold = await untilRunning(e, alice, c.sandbox.id);
    expect(cold.start).to.include({ method: 'cold', warm_state_id: null, reason: "image 'deb12' has no warm state (hostctl sandbox warm deb12)", attempts: 1 });
    expect(cold.start.ms).to.be.a('number');
    expect(await sbxSh(e, cold.id, 'cat /etc/svc/seed; stat -c %a /etc/svc/seed; hostname')).to.equal('cold-seed\n600\ncold-one\n');
    const mid = (await sbxSh(e, cold.id, 'cat /etc/machine-id')).trim();
    expect(mid).to.match(/^[0-9a-f]{32}$/);
    expect(mid).to.not.equal(imageMachineId);
    cold.machineId = mid;
    // Not a VM of /vms.
    const admin = await e.d.token('vm-admin', ['vm.read']);
    expect((await call(e, admin, 'GET', '/vms')).body.vms).to.deep.equal([]);
    expect((await call(e, admin, 'GET', `/vms/${cold.vmid}`)).status).to.equal(404);
  });

  it('suspends and resumes (idempotently) with a guest process kept alive; the QEMU process ends while suspended', async () => {
    const pid = (await sbxSh(e, cold.id, 'setsid sleep 100000 >/dev/null 2>&1 < /dev/null & echo $!')).trim();
    expect(pid).to.match(/^\d+$/);
    const qemu = qemuPidOf(cold.vmid);
    const s = await ok(alice, 'POST', `/sandboxes/${cold.id}/suspend`, {});
    expect(s).to.deep.include({ already_suspended: false });
    expect(s.sandbox.state).to.equal('suspended');
    expect(qemuPids(e.root)).to.not.include(qemu);
    expect((await ok(alice, 'POST', `/sandboxes/${cold.id}/suspend`, {})).already_suspended).to.equal(true);
    const w = await ok(alice, 'POST', `/sandboxes/${cold.id}/wait`, { timeout_seconds: 30 });
    expect(w).to.include({ running: false, timed_out: false, reason: `the sandbox is suspended: resume it (POST /sandboxes/${cold.id}/resume)` });
    const r = await ok(alice, 'POST', `/sandboxes/${cold.id}/resume`, {});
    expect(r).to.deep.include({ already_running: false });
    expect(r.sandbox.state).to.equal('running');
    expect((await ok(alice, 'POST', `/sandboxes/${cold.id}/resume`, {})).already_running).to.equal(true);
    await eventually(
      async () => (await call(e, alice, 'POST', `/sandboxes/${cold.id}/wait`, { timeout_seconds: 5 })).body.running,
      60_000,
      'running after resume',
    );
    expect(await sbxSh(e, cold.id, `kill -0 ${pid} && echo alive`)).to.equal('alive\n');
  });

  it('destroys: the record stays as a tombstone (state, when, by whom); its VM, disk and QEMU process are gone', async () => {
    const pid = qemuPidOf(cold.vmid);
    const d = await ok(alice, 'DELETE', `/sandboxes/${cold.id}`);
    expect(d).to.deep.include({ already_destroyed: false });
    expect(d.sandbox).to.include({ id: cold.id, state: 'destroyed', destroyed_by: 'alice', vmid: null });
    expect(Date.parse(d.sandbox.destroyed_at)).to.be.greaterThan(Date.parse(cold.created_at));
    expect((await ok(alice, 'DELETE', `/sandboxes/${cold.id}`)).already_destroyed).to.equal(true);
    expect(vmDirs(e)).to.not.include(`vm-${cold.vmid}`);
    expect(fs.existsSync(path.join(e.root, 'data', 'run', `vm-${cold.vmid}`))).to.equal(false);
    await eventually(() => !fs.existsSync(`/proc/${pid}`) || /\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8')), 10_000, 'the QEMU process to end');
    expect((await ok(alice, 'GET', '/sandboxes')).sandboxes).to.deep.equal([]);
    const tomb = (await ok(alice, 'GET', '/sandboxes?include_destroyed=true')).sandboxes;
    expect(tomb.map((x: any) => [x.id, x.state])).to.deep.equal([[cold.id, 'destroyed']]);
    expect((await ok(alice, 'GET', `/sandboxes/${cold.id}`)).sandbox.state).to.equal('destroyed');
    const w = await ok(alice, 'POST', `/sandboxes/${cold.id}/wait`, {});
    expect(w).to.include({ running: false, timed_out: false, reason: 'the sandbox is destroyed' });
    await fails(alice, 'POST', `/sandboxes/${cold.id}/resume`, {}, 409, `sandbox '${cold.id}' is destroyed`);
  });

  it('resumes later sandboxes from the warm state on a linked clone, each with its own identity, seed and disk', async () => {
    warmId = await warmDone(e, warmTask);
    const imgs = await ok(alice, 'GET', '/sandboxes/images');
    expect(imgs.images.find((i: any) => i.image_id === 'deb12')).to.deep.include({ default_start: 'warm' });
    const w = await ok(alice, 'POST', '/sandboxes', { image_id: 'deb12', seed_data: 'warm-seed-1', labels: { kind: 'warm', n: '1' } }, 201);
    expect(w.sandbox.name).to.match(/^[a-z]+-[a-z]+$/);
    warm = await untilRunning(e, alice, w.sandbox.id, 120);
    expect(warm.start).to.include({ method: 'warm', warm_state_id: warmId, reason: null, attempts: 1 });
    expect(await sbxSh(e, warm.id, 'cat /etc/svc/seed; echo; hostname')).to.equal(`warm-seed-1\n${warm.name}\n`);
    warm.machineId = (await sbxSh(e, warm.id, 'cat /etc/machine-id')).trim();
    expect(warm.machineId).to.match(/^[0-9a-f]{32}$/);
    expect([imageMachineId, cold.machineId]).to.not.include(warm.machineId);
    await sbxSh(e, warm.id, 'echo mine > /root/own-file; sync');
  });

  it('makes one sandbox of concurrent creates with one idempotency key, and returns it on replay while it boots', async () => {
    const body = { image_id: 'deb12', idempotency_key: 'job-42', seed_data: 'twin-seed', labels: { kind: 'warm', n: '2' } };
    const all = await Promise.all([1, 2, 3, 4].map(() => call(e, alice, 'POST', '/sandboxes', body)));
    for (const r of all) expect(r.status, r.text).to.equal(201);
    const ids = new Set(all.map((r) => r.body.sandbox.id));
    expect(ids.size).to.equal(1);
    expect(all.filter((r) => r.body.replayed === false)).to.have.length(1);
    const [id] = ids;
    const again = await ok(alice, 'POST', '/sandboxes', { ...body, name: 'other-name' }, 201);
    expect(again).to.deep.include({ replayed: true });
    expect(again.sandbox.id).to.equal(id);
    twin = await untilRunning(e, alice, id, 120);
    // Its own disk and identity: the warm sibling's file and machine-id are not here.
    expect(await sbxSh(e, twin.id, 'cat /etc/svc/seed; test ! -e /root/own-file && echo not-shared')).to.equal('twin-seednot-shared\n');
    expect((await sbxSh(e, twin.id, 'cat /etc/machine-id')).trim()).to.not.equal(warm.machineId);
    expect((await ok(alice, 'GET', '/sandboxes')).sandboxes.map((x: any) => x.id)).to.deep.equal([warm.id, twin.id]);
    // Bob's same key is his own sandbox (a blank one: it never boots, and goes at once).
    const mine = await ok(bob, 'POST', '/sandboxes', { image_id: 'blank', idempotency_key: 'job-42' }, 201);
    expect(mine.replayed).to.equal(false);
    expect(mine.sandbox.id).to.not.equal(id);
    await ok(bob, 'DELETE', `/sandboxes/${mine.sandbox.id}`);
  });

  it('gives each sandbox resumed from the warm state a VM generation ID of its own (asked of QEMU), on which its kernel reseeded', async () => {
    for (const sb of [warm, twin]) expect((await sbxSh(e, sb.id, 'dmesg | grep -c "crng reseeded due to virtual machine fork" || true')).trim()).to.equal('1');
    const list = await e.d.admin.request('GET', '/admin/sandboxes/warm-states');
    const saved = list.body.warm_states.find((w: any) => w.id === warmId);
    expect(saved).to.deep.include({ format: 2, resumable: true });
    const r = await withHostdDown(e, () => startSandboxDaemon({ root: e.root, sandboxes: CAPS }), [warm.vmid, twin.vmid], generationIdOf);
    e = r.e;
    const ids = [saved.generation_id, r.results.get(warm.vmid), r.results.get(twin.vmid)];
    for (const id of ids) expect(id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(ids).size).to.equal(3);
  });

  it('is invisible to another token: 404 (never 403) everywhere, empty lists; a re-created token of the same name owns nothing', async () => {
    const msg = `sandbox '${warm.id}' not found`;
    await fails(bob, 'GET', `/sandboxes/${warm.id}`, undefined, 404, msg);
    await fails(bob, 'POST', `/sandboxes/${warm.id}/wait`, { timeout_seconds: 1 }, 404, msg);
    await fails(bob, 'POST', `/sandboxes/${warm.id}/suspend`, {}, 404, msg);
    await fails(bob, 'POST', `/sandboxes/${warm.id}/resume`, {}, 404, msg);
    await fails(bob, 'DELETE', `/sandboxes/${warm.id}`, undefined, 404, msg);
    const bobs = (await ok(bob, 'GET', '/sandboxes?include_destroyed=true')).sandboxes;
    expect(bobs.map((x: any) => x.state)).to.deep.equal(['destroyed']);
    // Erin's sandbox stays Erin's token's: revoked and re-created under the same name, she owns nothing.
    let erin = await e.d.token('erin', AGENT);
    const made = await ok(erin, 'POST', '/sandboxes', { image_id: 'blank', idempotency_key: 'k' }, 201);
    expect((await e.d.admin.request('DELETE', '/admin/tokens/erin')).status).to.equal(200);
    expect((await call(e, erin, 'GET', '/sandboxes')).status).to.equal(401);
    erin = await e.d.token('erin', AGENT);
    await fails(erin, 'GET', `/sandboxes/${made.sandbox.id}`, undefined, 404, `sandbox '${made.sandbox.id}' not found`);
    await fails(erin, 'DELETE', `/sandboxes/${made.sandbox.id}`, undefined, 404, `sandbox '${made.sandbox.id}' not found`);
    expect((await ok(erin, 'GET', '/sandboxes?include_destroyed=true')).sandboxes).to.deep.equal([]);
    // The same idempotency key makes a new sandbox for the new token.
    const fresh = await ok(erin, 'POST', '/sandboxes', { image_id: 'blank', idempotency_key: 'k' }, 201);
    expect(fresh.replayed).to.equal(false);
    expect(fresh.sandbox.id).to.not.equal(made.sandbox.id);
    await ok(erin, 'DELETE', `/sandboxes/${fresh.sandbox.id}`);
    // The operator still sees the old one, and removes it.
    const all = (await e.d.admin.request('GET', '/admin/sandboxes')).body.sandboxes;
    expect(all.find((x: any) => x.id === made.sandbox.id)).to.include({ owner: 'erin', state: 'booting' });
    const gone = await e.d.admin.request('POST', '/admin/sandboxes/destroy', { id: made.sandbox.id });
    expect(gone.status, JSON.stringify(gone.body)).to.equal(200);
    expect(gone.body.sandbox).to.include({ state: 'destroyed', destroyed_by: 'admin' });
    await onlyTheseVms(e, [warm.vmid, twin.vmid]);
  });

  it('filters by labels: every given pair must match', async () => {
    const q = (labels: Record<string, string>, extra = '') => `/sandboxes?labels=${encodeURIComponent(JSON.stringify(labels))}${extra}`;
    const ids = async (labels: Record<string, string>, extra = '') => (await ok(alice, 'GET', q(labels, extra))).sandboxes.map((x: any) => x.id);
    expect(await ids({ kind: 'warm' })).to.deep.equal([warm.id, twin.id]);
    expect(await ids({ kind: 'warm', n: '2' })).to.deep.equal([twin.id]);
    expect(await ids({ kind: 'cold' })).to.deep.equal([]);
    expect(await ids({ kind: 'cold' }, '&include_destroyed=true')).to.deep.equal([cold.id]);
    expect(await ids({ kind: 'warm', n: '3' })).to.deep.equal([]);
    expect(await ids({})).to.deep.equal([warm.id, twin.id]);
    await ok(alice, 'DELETE', `/sandboxes/${twin.id}`);
    expect(await ids({ kind: 'warm' })).to.deep.equal([warm.id]);
  });

  it('caps each token: live sandboxes and their memory (409 saying which); the host capacity is checked before booting', async () => {
    const carol = await e.d.token('carol', AGENT);
    const c1 = await ok(carol, 'POST', '/sandboxes', { image_id: 'blank' }, 201);
    await fails(
      carol,
      'POST',
      '/sandboxes',
      { image_id: 'blank', resources: { memory_mb: 1100 } },
      409,
      "token 'carol' holds 512 MiB in live sandboxes; 1100 MiB more would pass the per-token limit of 1536 MiB (sandboxes.max_memory_mb_per_token): destroy one first",
    );
    const c2 = await ok(carol, 'POST', '/sandboxes', { image_id: 'blank' }, 201);
    await fails(
      carol,
      'POST',
      '/sandboxes',
      { image_id: 'blank' },
      409,
      "token 'carol' already has 2 live sandboxes, the per-token limit (sandboxes.max_per_token is 2): destroy one first",
    );
    await ok(carol, 'DELETE', `/sandboxes/${c1.sandbox.id}`);
    const c3 = await ok(carol, 'POST', '/sandboxes', { image_id: 'blank' }, 201);
    await ok(carol, 'DELETE', `/sandboxes/${c2.sandbox.id}`);
    await ok(carol, 'DELETE', `/sandboxes/${c3.sandbox.id}`);
    // All the host's memory: more than it has free, so 409 and nothing made.
    const dave = await e.d.token('dave', AGENT);
    const total = Math.floor(os.totalmem() / 1024 / 1024);
    const r = await call(e, dave, 'POST', '/sandboxes', { image_id: 'blank', resources: { memory_mb: total } });
    expect(r.status, r.text).to.equal(409);
    expect(r.body.error).to.match(
      /^the host cannot fit this sandbox now: it needs about \d+ MiB \(\d+ MiB of memory and \d+ MiB of QEMU overhead\) and the host has \d+ MiB free after 1024 MiB kept for itself \(sandboxes\.host_reserve_mb\)/,
    );
    expect((await ok(dave, 'GET', '/sandboxes?include_destroyed=true')).sandboxes).to.deep.equal([]);
  });

  // ---------------------------------------------------------------- crash safety

  const pausedAtStep = (step: string) => eventually(() => e.d.logs.some((l) => isPauseLine(l, `sandboxes.${step}`)), 120_000, `hostd to pause at ${step}`);
  const liveVmids = async () => (await ok(alice, 'GET', '/sandboxes')).sandboxes.map((x: any) => x.vmid).filter((v: number | null) => v !== null);

  it('killed while admitting a create (the caller got no answer): after a restart the sandbox exists once, boots, and a replay returns it', async () => {
    await restart({ HOSTD_TEST_PAUSE_AT: 'sandboxes.create:recorded' });
    const pending = call(e, alice, 'POST', '/sandboxes', { image_id: 'deb12', idempotency_key: 'crash-1', seed_data: 'crash-seed' }).catch((err) => err);
    await pausedAtStep('create:recorded');
    await restart();
    expect(await pending).to.be.instanceOf(Error);
    const listed = (await ok(alice, 'GET', '/sandboxes')).sandboxes.filter((x: any) => x.id !== warm.id);
    expect(listed).to.have.length(1);
    const replay = await ok(alice, 'POST', '/sandboxes', { image_id: 'deb12', idempotency_key: 'crash-1' }, 201);
    expect(replay).to.deep.include({ replayed: true });
    expect(replay.sandbox.id).to.equal(listed[0].id);
    const s = await untilRunning(e, alice, replay.sandbox.id, 300);
    expect(s.start).to.include({ method: 'warm', attempts: 1 });
    expect(await sbxSh(e, s.id, 'cat /etc/svc/seed')).to.equal('crash-seed');
    await ok(alice, 'DELETE', `/sandboxes/${s.id}`);
    await onlyTheseVms(e, [warm.vmid]);
  });

  it('killed during the boot (its VM resumed, not yet its own): after a restart that VM is replaced, not doubled, and the sandbox runs', async () => {
    await restart({ HOSTD_TEST_PAUSE_AT: 'sandboxes.boot:warm-resumed' });
    const c = await ok(alice, 'POST', '/sandboxes', { image_id: 'deb12', idempotency_key: 'crash-2', seed_data: 'seed-2' }, 201);
    await pausedAtStep('boot:warm-resumed');
    const first = (await ok(alice, 'GET', `/sandboxes/${c.sandbox.id}`)).sandbox;
    expect(first).to.include({ state: 'booting' });
    expect(first.vmid).to.be.a('number');
    const firstQemu = qemuPidOf(first.vmid);
    await restart();
    const s = await untilRunning(e, alice, c.sandbox.id, 300);
    expect(s.start).to.include({ method: 'warm', attempts: 2 });
    // A new VM (its vmid may be the freed one again): the first QEMU is gone.
    expect(qemuPids(e.root)).to.not.include(firstQemu);
    expect(qemuPidOf(s.vmid)).to.not.equal(firstQemu);
    expect(await sbxSh(e, s.id, 'cat /etc/svc/seed; echo; hostname')).to.equal(`seed-2\n${s.name}\n`);
    const replay = await ok(alice, 'POST', '/sandboxes', { image_id: 'deb12', idempotency_key: 'crash-2' }, 201);
    expect(replay.sandbox.id).to.equal(c.sandbox.id);
    await onlyTheseVms(e, [warm.vmid, s.vmid]);
    await ok(alice, 'DELETE', `/sandboxes/${s.id}`);
  });

  it('killed during a suspend (memory saved, QEMU not yet gone): after a restart the sandbox runs on with its processes', async () => {
    const pid = (await sbxSh(e, warm.id, 'setsid sleep 100000 >/dev/null 2>&1 < /dev/null & echo $!')).trim();
    await restart({ HOSTD_TEST_PAUSE_AT: 'vms.suspend:saved' });
    const pending = call(e, alice, 'POST', `/sandboxes/${warm.id}/suspend`, {}).catch((err) => err);
    await pausedAt(e, 'suspend:saved');
    await restart();
    await pending;
    await eventually(async () => (await ok(alice, 'POST', `/sandboxes/${warm.id}/wait`, { timeout_seconds: 5 })).running, 60_000, 'running after recovery');
    expect(await sbxSh(e, warm.id, `kill -0 ${pid} && echo alive`)).to.equal('alive\n');
    // It suspends and resumes normally after that.
    expect((await ok(alice, 'POST', `/sandboxes/${warm.id}/suspend`, {})).sandbox.state).to.equal('suspended');
    expect((await ok(alice, 'POST', `/sandboxes/${warm.id}/resume`, {})).sandbox.state).to.equal('running');
    await onlyTheseVms(e, [warm.vmid]);
  });

  it('killed during a destroy, before or after its VM was stopped: after a restart it is a tombstone and nothing of it remains', async () => {
    for (const [domain, step] of [
      ['sandboxes', 'destroy:marked'],
      ['vms', 'delete:stopped'],
    ] as const) {
      const c = await ok(alice, 'POST', '/sandboxes', { image_id: 'deb12' }, 201);
      const s = await untilRunning(e, alice, c.sandbox.id, 300);
      await restart({ HOSTD_TEST_PAUSE_AT: `${domain}.${step}` });
      const pending = call(e, alice, 'DELETE', `/sandboxes/${s.id}`).catch((err) => err);
      if (domain === 'vms') await pausedAt(e, step);
      else {
        await pausedAtStep(step);
        expect((await ok(alice, 'GET', `/sandboxes/${s.id}`)).sandbox.state).to.equal('destroying');
      }
      await restart();
      await pending;
      const t = (await ok(alice, 'GET', `/sandboxes/${s.id}`)).sandbox;
      expect(t, step).to.include({ state: 'destroyed', destroyed_by: 'alice', vmid: null });
      expect(vmDirs(e), step).to.not.include(`vm-${s.vmid}`);
      await onlyTheseVms(e, [warm.vmid]);
    }
  });

  it('leaves nothing behind: every sandbox destroyed, no VM directory, no QEMU process (the warm state stays)', async () => {
    for (const x of (await e.d.admin.request('GET', '/admin/sandboxes')).body.sandboxes) {
      const r = await e.d.admin.request('POST', '/admin/sandboxes/destroy', { id: x.id });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
    }
    expect(await liveVmids()).to.deep.equal([]);
    await onlyTheseVms(e, []);
    const ws = await e.d.admin.request('GET', '/admin/sandboxes/warm-states');
    expect(ws.body.warm_states.map((w: any) => w.id)).to.deep.equal([warmId]);
  });
});
