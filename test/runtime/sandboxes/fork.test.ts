/**
 * Forks against real QEMU (TCG here) and the cached Debian test guest: a
 * fork of 2 answers at once with both copies booting and the parent running
 * on; each copy resumes the parent's saved memory and disk with its own name,
 * hostname, machine-id, SSH host keys and VM generation ID (its kernel
 * reseeded once more than the parent's), sees the parent's files, and then
 * diverges from the other; the saved state is internal (no image lists it)
 * and goes with the last copy. The parent itself resumes the shared daemon's
 * warm state (test/helpers/sandboxes-fixture.ts): a fork is about the
 * parent's saved state, not how the parent started. The parent is destroyed
 * as soon as the fork answered, and the copies resume one at a time
 * (sandboxes.fork_resume_concurrency 1 on the shared daemon), so that at
 * most two guests run at once: the QEMU processes are counted while the fork
 * runs. The after hook destroys the file's sandboxes and revokes its tokens.
 */
import { expect } from 'chai';
import { qemuPids, requireVmsRuntime, sampleGuests, type VmsEnv } from '../../helpers/vms-fixture.js';
import { eventually } from '../../helpers/daemon.js';
import { failsAs, leaseSharedSandboxes, okAs, sbxSh, untilRunning, vmDirs, type SandboxLease } from '../../helpers/sandboxes-fixture.js';

const AGENT = ['sandbox.read', 'sandbox.manage'];
/** The number of times the guest's kernel reseeded on a new VM generation ID. */
const RESEEDS = 'dmesg | grep -c "crng reseeded due to virtual machine fork" || true';

describe('sandboxes runtime: fork (QEMU)', function () {
  this.timeout(30 * 60_000);
  let e: VmsEnv;
  let lease: SandboxLease | undefined;
  let alice = '';
  let bob = '';
  let parent: any;
  let parentMachineId = '';
  let parentHostKey = '';
  let parentReseeds = 0;
  /** The warm states of the shared daemon before this file forked. */
  let sharedStates: any[] = [];
  let forks: any[] = [];

  before(async function () {
    await requireVmsRuntime(this, 'sandboxes');
    lease = await leaseSharedSandboxes({ alice: AGENT, bob: AGENT });
    ({ e } = lease);
    ({ alice, bob } = lease.tokens);
    const c = await ok(alice, 'POST', '/sandboxes', { image_id: 'deb12', name: 'fork-parent', labels: { job: '7' } }, 201);
    parent = await untilRunning(e, alice, c.sandbox.id, 600);
    // The parent rests on the shared warm state (its dependent now): the only one there is.
    sharedStates = await warmStates();
    expect(sharedStates.map((w) => w.id)).to.deep.equal([lease.warmId]);
  });

  after(async function () {
    await lease?.release();
  });

  const ok = (token: string, method: string, p: string, body?: unknown, status = 200) => okAs(e, token, method, p, body, status);
  const fails = (token: string, method: string, p: string, body: unknown, status: number, error: string | RegExp) =>
    failsAs(e, token, method, p, body, status, error);
  /**
   * The fingerprint of the SSH host key the sandbox made after its resume
   * (newer than the hostname written at the resume, before the keys are made
   * anew in the background) once it has one (other than `not`).
   */
  const hostKey = (id: string, not?: string) =>
    eventually(
      async () => {
        const pub = '/etc/ssh/ssh_host_ed25519_key.pub';
        const r = await e.d.admin.request('POST', '/admin/sandboxes/exec', {
          id,
          command: `test ${pub} -nt /etc/hostname && ssh-keygen -lf ${pub} 2>/dev/null`,
          timeout_seconds: 60,
        });
        const fp: string | undefined = r.body.exit_code === 0 ? r.body.stdout.split(' ')[1] : undefined;
        return fp && fp !== not ? fp : undefined;
      },
      300_000,
      `an SSH host key in ${id}`,
    );
  const warmStates = async () => (await e.d.admin.request('GET', '/admin/sandboxes/warm-states')).body.warm_states as any[];
  /** The warm states this file made (the shared daemon's own one left out). */
  const madeStates = async () => (await warmStates()).filter((w) => !sharedStates.some((x) => x.id === w.id));

  it('refuses what it cannot do before anything is made: another token 404, over the cap 409, bad counts 400', async () => {
    const p = `/sandboxes/${parent.id}/fork`;
    await fails(bob, 'POST', p, { count: 1 }, 404, `sandbox '${parent.id}' not found`);
    // One live sandbox and a cap of three: three more would pass it.
    await fails(
      alice,
      'POST',
      p,
      { count: 3 },
      409,
      "token 'alice' has 1 live sandboxes; 3 more would pass the per-token limit (sandboxes.max_per_token is 3): destroy some first",
    );
    await fails(alice, 'POST', p, { count: 0 }, 400, "argument 'count' must be >= 1");
    await fails(alice, 'POST', p, { count: 17 }, 400, "argument 'count' must be <= 16");
    expect((await ok(alice, 'GET', '/sandboxes')).sandboxes.map((s: any) => s.id)).to.deep.equal([parent.id]);
    expect(await warmStates()).to.deep.equal(sharedStates);
  });

  it('forks 2: answers at once with both booting, the parent running on; a replay returns the same two; the copies resume one at a time', async () => {
    await ok(alice, 'PUT', `/sandboxes/${parent.id}/files`, { path: '/srv/shared.txt', content: Buffer.from('from the parent\n').toString('base64') });
    parentMachineId = (await sbxSh(e, parent.id, 'cat /etc/machine-id')).trim();
    // A resume makes new SSH host keys, in the background.
    parentHostKey = await hostKey(parent.id);
    parentReseeds = Number((await sbxSh(e, parent.id, RESEEDS)).trim());
    expect(qemuPids(e.root), 'the parent alone runs before the fork').to.have.length(1);
    const guests = sampleGuests(e.root);
    let seen;
    let first: any;
    let second: any;
    try {
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
      // Both end running; the second copy's QEMU started only once the first one ran (one resume slot).
      [first, second] = [await untilRunning(e, alice, forks[0].id, 600), await untilRunning(e, alice, forks[1].id, 600)];
    } finally {
      seen = await guests.stop();
    }
    expect(seen.max, `QEMU processes at once (${seen.maxVms.join(', ')})`).to.be.at.most(2);
    const secondSeen = seen.firstSeen.get(`vm-${second.vmid}`);
    expect(secondSeen, `the second copy's QEMU (VM ${second.vmid}) was seen`).to.be.a('number');
    expect(secondSeen!, "the second copy's QEMU started after the first copy ran").to.be.at.least(Date.parse(first.running_at));
  });

  it("each copy runs with its own identity and the parent's files, then they diverge", async () => {
    for (let i = 0; i < forks.length; i++) forks[i] = await untilRunning(e, alice, forks[i].id, 600);
    const [a, b] = forks;
    for (const s of forks) {
      expect(s.start).to.include({ method: 'warm' });
      expect(await sbxSh(e, s.id, 'cat /srv/shared.txt')).to.equal('from the parent\n');
      expect((await sbxSh(e, s.id, 'hostname')).trim()).to.equal(s.name);
      expect(Number((await sbxSh(e, s.id, RESEEDS)).trim()), 'a new VM generation ID').to.equal(parentReseeds + 1);
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
    const states = await madeStates();
    expect(states.length).to.equal(1);
    expect(states[0].name).to.equal(`sandbox fork of ${parent.id}`);
    // The image lists the shared daemon's warm state only: never the fork's.
    const img = (await ok(alice, 'GET', '/sandboxes/images')).images.find((i: any) => i.image_id === 'deb12');
    expect(img).to.deep.include({ default_start: 'warm' });
    expect(img.warm_states.map((w: any) => w.warm_state_id)).to.deep.equal([lease!.warmId]);
    await ok(alice, 'DELETE', `/sandboxes/${forks[0].id}`);
    expect((await madeStates()).map((w) => w.id)).to.deep.equal([states[0].id]);
    await ok(alice, 'DELETE', `/sandboxes/${forks[1].id}`);
    expect((await warmStates()).map((w) => w.id)).to.deep.equal([lease!.warmId]);
    await eventually(() => qemuPids(e.root).length === 0 && vmDirs(e).length === 0, 60_000, 'no QEMU and no VM directory left');
  });
});
