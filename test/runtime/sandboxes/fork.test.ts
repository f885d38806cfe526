/**
 * Forks against real QEMU (TCG here) and the cached Debian test guest: a
 * fork of 2 answers at once with both copies booting and the parent running
 * on; each copy resumes the parent's saved memory and disk with its own name,
 * hostname, machine-id, SSH host keys and VM generation ID (its kernel
 * reseeded), sees the parent's files, and then diverges from the other; the
 * saved state is internal (no image lists it) and goes with the last copy.
 * The parent is destroyed as soon as the fork answered, so that at most two
 * guests run at once (the copies rest on the saved state, not on it). The
 * after hook kills any QEMU the data dir started.
 */
import { expect } from 'chai';
import { killGuests, operationAt, qemuPids, requireVmsRuntime, type VmsEnv } from '../../helpers/vms-fixture.js';
import { resultProblem } from '../../../api/validate.js';
import { eventually } from '../../helpers/daemon.js';
import { call, importImages, sbxSh, startSandboxDaemon, untilRunning, vmDirs } from '../../helpers/sandboxes-fixture.js';

const AGENT = ['sandbox.read', 'sandbox.manage'];
const CAPS = '  max_per_token: 3';

describe('sandboxes runtime: fork (QEMU)', function () {
  this.timeout(30 * 60_000);
  let e: VmsEnv;
  let alice = '';
  let bob = '';
  let parent: any;
  let parentMachineId = '';
  let parentHostKey = '';
  let forks: any[] = [];

  before(async function () {
    await requireVmsRuntime(this, 'sandboxes');
    e = await startSandboxDaemon({ sandboxes: CAPS });
    alice = await e.d.token('alice', AGENT);
    bob = await e.d.token('bob', AGENT);
    await importImages(e, 'deb12', false);
    const c = await ok(alice, 'POST', '/sandboxes', { image_id: 'deb12', name: 'fork-parent', labels: { job: '7' } }, 201);
    parent = await untilRunning(e, alice, c.sandbox.id, 900);
  });

  after(async function () {
    if (e) await killGuests(e.root);
  });

  async function ok(token: string, method: string, p: string, body?: unknown, status = 200) {
    const r = await call(e, token, method, p, body);
    expect(r.status, `${method} ${p}: ${r.text}`).to.equal(status);
    const op = operationAt(method, p);
    expect(resultProblem(op!, r.body), `${method} ${p}: the answer fits ${op!.name}'s result schema`).to.equal(undefined);
    return r.body;
  }
  async function fails(token: string, method: string, p: string, body: unknown, status: number, error: string | RegExp) {
    const r = await call(e, token, method, p, body);
    expect(r.status, `${method} ${p}: ${r.text}`).to.equal(status);
    if (typeof error === 'string') expect(r.body).to.deep.equal({ error });
    else expect(r.body.error).to.match(error);
  }
  /** The fingerprint of the sandbox's SSH host key once it has one (other than `not`). */
  const hostKey = (id: string, not?: string) => eventually(async () => {
    const r = await e.d.admin.request('POST', '/admin/sandboxes/exec', { id, command: 'ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub 2>/dev/null', timeout_seconds: 60 });
    const fp: string | undefined = r.body.exit_code === 0 ? r.body.stdout.split(' ')[1] : undefined;
    return fp && fp !== not ? fp : undefined;
  }, 300_000, `an SSH host key in ${id}`);
  const warmStates = async () => (await e.d.admin.request('GET', '/admin/sandboxes/warm-states')).body.warm_states as any[];

  it('refuses what it cannot do before anything is made: another token 404, over the cap 409, bad counts 400', async () => {
    const p = `/sandboxes/${parent.id}/fork`;
    await fails(bob, 'POST', p, { count: 1 }, 404, `sandbox '${parent.id}' not found`);
    // One live sandbox and a cap of three: three more would pass it.
    await fails(alice, 'POST', p, { count: 3 }, 409, "token 'alice' has 1 live sandboxes; 3 more would pass the per-token limit (sandboxes.max_per_token is 3): destroy some first");
    await fails(alice, 'POST', p, { count: 0 }, 400, "argument 'count' must be >= 1");
    await fails(alice, 'POST', p, { count: 17 }, 400, "argument 'count' must be <= 16");
    expect((await ok(alice, 'GET', '/sandboxes')).sandboxes.map((s: any) => s.id)).to.deep.equal([parent.id]);
    expect(await warmStates()).to.deep.equal([]);
  });

  it('forks 2: answers at once with both booting, the parent running on; a replay returns the same two', async () => {
    await ok(alice, 'PUT', `/sandboxes/${parent.id}/files`, { path: '/srv/shared.txt', content: Buffer.from('from the parent\n').toString('base64') });
    parentMachineId = (await sbxSh(e, parent.id, 'cat /etc/machine-id')).trim();
    // A cold boot makes its SSH host keys at first start, in the background.
    parentHostKey = await hostKey(parent.id);
    const f = await ok(alice, 'POST', `/sandboxes/${parent.id}/fork`, { count: 2, labels: { role: 'copy' }, idempotency_key: 'fork-1' }, 201);
    expect(f).to.include({ parent_id: parent.id, replayed: false });
    expect(f.save_ms).to.be.a('number');
    forks = f.sandboxes;
    expect(forks.map((s: any) => s.state)).to.deep.equal(['booting', 'booting']);
    expect(forks[0].name).to.not.equal(forks[1].name);
    for (const s of forks) expect(s).to.deep.include({ owner: 'alice', image_id: 'deb12', labels: { job: '7', role: 'copy' }, resources: parent.resources });
    expect((await ok(alice, 'GET', `/sandboxes/${parent.id}`)).sandbox.state).to.equal('running');
    // The copies rest on the saved state, not on the parent: it goes now (two guests at most).
    await ok(alice, 'DELETE', `/sandboxes/${parent.id}`);
    const again = await ok(alice, 'POST', `/sandboxes/${parent.id}/fork`, { count: 2, idempotency_key: 'fork-1' }, 201);
    expect(again).to.include({ replayed: true, parent_id: parent.id });
    expect(again.sandboxes.map((s: any) => s.id)).to.deep.equal(forks.map((s: any) => s.id));
  });

  it("each copy runs with its own identity and the parent's files, then they diverge", async () => {
    for (let i = 0; i < forks.length; i++) forks[i] = await untilRunning(e, alice, forks[i].id, 600);
    const [a, b] = forks;
    for (const s of forks) {
      expect(s.start).to.include({ method: 'warm' });
      expect(await sbxSh(e, s.id, 'cat /srv/shared.txt')).to.equal('from the parent\n');
      expect((await sbxSh(e, s.id, 'hostname')).trim()).to.equal(s.name);
      expect((await sbxSh(e, s.id, 'dmesg | grep -c "crng reseeded due to virtual machine fork" || true')).trim(), 'a new VM generation ID').to.equal('1');
    }
    const mids = await Promise.all(forks.map(async (s) => (await sbxSh(e, s.id, 'cat /etc/machine-id')).trim()));
    expect(new Set([parentMachineId, ...mids]).size).to.equal(3);
    // SSH host keys are made anew in the background right after the resume.
    const keys = await Promise.all(forks.map((s) => hostKey(s.id, parentHostKey)));
    expect(keys[0]).to.not.equal(keys[1]);

    await ok(alice, 'PUT', `/sandboxes/${a.id}/files`, { path: '/srv/shared.txt', content: Buffer.from('changed in a\n').toString('base64') });
    await ok(alice, 'PUT', `/sandboxes/${b.id}/files`, { path: '/srv/only-b.txt', content: Buffer.from('b\n').toString('base64') });
    expect(await sbxSh(e, a.id, 'cat /srv/shared.txt; ls /srv')).to.equal('changed in a\nshared.txt\n');
    expect(await sbxSh(e, b.id, 'cat /srv/shared.txt; ls /srv')).to.equal('from the parent\nonly-b.txt\nshared.txt\n');
  });

  it('keeps the saved state internal while a copy rests on it, and deletes it with the last copy', async () => {
    const states = await warmStates();
    expect(states.length).to.equal(1);
    expect(states[0].name).to.equal(`sandbox fork of ${parent.id}`);
    const img = (await ok(alice, 'GET', '/sandboxes/images')).images.find((i: any) => i.image_id === 'deb12');
    expect(img).to.deep.include({ warm_states: [], default_start: 'cold' });
    await ok(alice, 'DELETE', `/sandboxes/${forks[0].id}`);
    expect((await warmStates()).map((w) => w.id)).to.deep.equal([states[0].id]);
    await ok(alice, 'DELETE', `/sandboxes/${forks[1].id}`);
    expect(await warmStates()).to.deep.equal([]);
    await eventually(() => qemuPids(e.root).length === 0 && vmDirs(e).length === 0, 60_000, 'no QEMU and no VM directory left');
  });
});
