/**
 * Forks against real QEMU (TCG here) and the cached Debian test guest: a
 * fork of 2 answers at once with both copies booting and the parent running
 * on; each copy resumes the parent's saved memory and disk with its own name,
 * hostname, machine-id, SSH host keys and VM generation ID (its kernel
 * reseeded once more than the parent's), sees the parent's files, and then
 * diverges from the other; the saved state is internal (no image lists it)
 * and goes with the last copy. The parent boots cold on a daemon of this
 * file's own: a fork is about the parent's saved state, not how the parent
 * started, and the daemon bounds the guests a fork may take the host to
 * (sandboxes.fork_max_guests 2, one copy resuming at a time), which the
 * shared sandbox daemon does not. So at most two guests run at once whatever
 * the machine's pace: the first copy resumes beside the running parent, the
 * second waits `booting` until the parent is gone. The QEMU processes are
 * counted while the fork runs. The after hook kills every QEMU of the
 * file's data dir.
 */
import { expect } from 'chai';
import { killGuests, qemuGuests, qemuPids, requireVmsRuntime, sampleGuests, type VmsEnv } from '../../helpers/vms-fixture.js';
import { eventually } from '../../helpers/daemon.js';
import { failsAs, importImages, okAs, sbxSh, startSandboxDaemon, untilRunning, vmDirs } from '../../helpers/sandboxes-fixture.js';

/** Three live sandboxes a token (the refusal names it), one copy resuming at a time, a fork takes the host to two guests at most. */
const CONF = ['  max_per_token: 3', '  fork_resume_concurrency: 1', '  fork_max_guests: 2', '  boot_timeout_seconds: 1800'].join('\n');
const AGENT = ['sandbox.read', 'sandbox.manage'];
/** The number of times the guest's kernel reseeded on a new VM generation ID. */
const RESEEDS = 'dmesg | grep -c "crng reseeded due to virtual machine fork" || true';

describe('sandboxes runtime: fork (QEMU)', function () {
  this.timeout(30 * 60_000);
  let e: VmsEnv;
  let alice = '';
  let bob = '';
  let parent: any;
  let parentMachineId = '';
  let parentHostKey = '';
  let parentReseeds = 0;
  let forks: any[] = [];

  before(async function () {
    await requireVmsRuntime(this, 'sandboxes');
    e = await startSandboxDaemon({ sandboxes: CONF });
    alice = await e.d.token('alice', AGENT);
    bob = await e.d.token('bob', AGENT);
    await importImages(e, 'deb12', false);
    const c = await ok(alice, 'POST', '/sandboxes', { image_id: 'deb12', name: 'fork-parent', labels: { job: '7' } }, 201);
    parent = await untilRunning(e, alice, c.sandbox.id, 1800);
    expect(parent.start).to.include({ method: 'cold' });
    expect(await warmStates()).to.deep.equal([]);
  });

  after(async function () {
    if (e) await killGuests(e.root);
  });

  const ok = (token: string, method: string, p: string, body?: unknown, status = 200) => okAs(e, token, method, p, body, status);
  const fails = (token: string, method: string, p: string, body: unknown, status: number, error: string | RegExp) =>
    failsAs(e, token, method, p, body, status, error);
  /**
   * The fingerprint of the SSH host key the sandbox made after its resume
   * (newer than the hostname written at the resume, before the keys are made
   * anew in the background) once it has one (other than `not`).
   */
  const hostKey = async (id: string, not?: string) => {
    const pub = '/etc/ssh/ssh_host_ed25519_key.pub';
    try {
      return await eventually(
        async () => {
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
    } catch (err) {
      // Say what the guest shows, so that a failure tells why: the files' times, the clock, a keygen still running.
      const r = await e.d.admin.request('POST', '/admin/sandboxes/exec', {
        id,
        command: `date +%s.%N; ls -l --time-style=+%s.%N /etc/hostname /etc/ssh/; ps -eo pid,etime,time,args | grep -e ssh-keygen -e ssh | grep -v grep; uptime`,
        timeout_seconds: 60,
      });
      throw new Error(`${(err as Error).message}; the guest shows: ${JSON.stringify(r.body)}`);
    }
  };
  const warmStates = async () => (await e.d.admin.request('GET', '/admin/sandboxes/warm-states')).body.warm_states as any[];

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
    expect(await warmStates()).to.deep.equal([]);
  });

  it('forks 2: answers at once with both booting, the parent running on; a replay returns the same two; never more than two guests at once', async () => {
    await ok(alice, 'PUT', `/sandboxes/${parent.id}/files`, { path: '/srv/shared.txt', content: Buffer.from('from the parent\n').toString('base64') });
    parentMachineId = (await sbxSh(e, parent.id, 'cat /etc/machine-id')).trim();
    // The parent's SSH host key (made at its boot: hostd removed the image's), if it has one yet; a copy's, made after its resume, differs from it.
    parentHostKey = (await sbxSh(e, parent.id, 'ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub 2>/dev/null | cut -d" " -f2 || true')).trim();
    parentReseeds = Number((await sbxSh(e, parent.id, RESEEDS)).trim());
    expect(qemuPids(e.root), 'the parent alone runs before the fork').to.have.length(1);
    const guests = sampleGuests(e.root);
    let seen;
    let first: any;
    let second: any;
    let parentDeleteAt = 0;
    try {
      const f = await ok(alice, 'POST', `/sandboxes/${parent.id}/fork`, { count: 2, labels: { role: 'copy' }, idempotency_key: 'fork-1' }, 201);
      expect(f).to.include({ parent_id: parent.id, replayed: false });
      expect(f.save_ms).to.be.a('number');
      forks = f.sandboxes;
      expect(forks.map((s: any) => s.state)).to.deep.equal(['booting', 'booting']);
      expect(forks[0].name).to.not.equal(forks[1].name);
      for (const s of forks) expect(s).to.deep.include({ owner: 'alice', image_id: 'deb12', labels: { job: '7', role: 'copy' }, resources: parent.resources });
      expect((await ok(alice, 'GET', `/sandboxes/${parent.id}`)).sandbox.state).to.equal('running');
      // The first copy resumes beside the running parent: two guests, the bound. The second waits booting, with
      // no VM, for as long as both run, however long that is (the daemon holds it, not the machine's pace).
      first = await untilRunning(e, alice, forks[0].id, 900);
      await eventually(
        () => e.d.logs.some((l) => l.msg === 'sandboxes: fork copies wait for a guest to go' && l.fork_max_guests === 2),
        120_000,
        'the second copy to wait for a guest to go',
      );
      const waiting = (await ok(alice, 'GET', `/sandboxes/${forks[1].id}`)).sandbox;
      expect(waiting).to.deep.include({ state: 'booting', vmid: null });
      expect(waiting.start.attempts, 'its resume has not begun').to.equal(0);
      expect(
        qemuGuests(e.root)
          .map((g) => g.vm)
          .sort(),
      ).to.deep.equal([`vm-${parent.vmid}`, `vm-${first.vmid}`].sort());
      const again = await ok(alice, 'POST', `/sandboxes/${parent.id}/fork`, { count: 2, idempotency_key: 'fork-1' }, 201);
      expect(again).to.include({ replayed: true, parent_id: parent.id });
      expect(again.sandboxes.map((s: any) => s.id)).to.deep.equal(forks.map((s: any) => s.id));
      // The copies rest on the saved state, not on the parent: it goes, and the second copy resumes.
      parentDeleteAt = Date.now();
      await ok(alice, 'DELETE', `/sandboxes/${parent.id}`);
      second = await untilRunning(e, alice, forks[1].id, 900);
    } finally {
      seen = await guests.stop();
    }
    expect(seen.max, `QEMU processes at once (${seen.maxVms.join(', ')})`).to.be.at.most(2);
    const secondSeen = seen.firstSeen.get(`vm-${second.vmid}`);
    expect(secondSeen, `the second copy's QEMU (VM ${second.vmid}) was seen`).to.be.a('number');
    expect(secondSeen!, "the second copy's QEMU started only once the parent's delete was asked for").to.be.at.least(parentDeleteAt);
    expect(secondSeen!, "the second copy's QEMU started after the first copy ran").to.be.at.least(Date.parse(first.running_at));
    expect((await ok(alice, 'GET', `/sandboxes/${first.id}`)).sandbox.state).to.equal('running');
  });

  it("each copy runs with its own identity and the parent's files, then they diverge", async () => {
    for (let i = 0; i < forks.length; i++) forks[i] = await untilRunning(e, alice, forks[i].id, 600);
    const [a, b] = forks;
    for (const s of forks) {
      expect(s.start).to.include({ method: 'warm' });
      // The parent was saved once its boot had ended: no start-up job of the parent's (its SSH host key unit) runs on in a copy.
      expect((await sbxSh(e, s.id, 'systemctl is-system-running || true')).trim(), 'the boot state a copy resumed in').to.be.oneOf(['running', 'degraded']);
      expect(await sbxSh(e, s.id, 'cat /srv/shared.txt')).to.equal('from the parent\n');
      expect((await sbxSh(e, s.id, 'hostname')).trim()).to.equal(s.name);
      expect(Number((await sbxSh(e, s.id, RESEEDS)).trim()), 'a new VM generation ID').to.equal(parentReseeds + 1);
    }
    const mids = await Promise.all(forks.map(async (s) => (await sbxSh(e, s.id, 'cat /etc/machine-id')).trim()));
    expect(new Set([parentMachineId, ...mids]).size).to.equal(3);
    // SSH host keys are made anew in the background right after the resume.
    const keys = await Promise.all(forks.map((s) => hostKey(s.id, parentHostKey || undefined)));
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
    // No image lists it: the image has no warm state of its own, and a create would boot cold.
    const img = (await ok(alice, 'GET', '/sandboxes/images')).images.find((i: any) => i.image_id === 'deb12');
    expect(img).to.deep.include({ default_start: 'cold', warm_states: [] });
    await ok(alice, 'DELETE', `/sandboxes/${forks[0].id}`);
    expect((await warmStates()).map((w) => w.id)).to.deep.equal([states[0].id]);
    await ok(alice, 'DELETE', `/sandboxes/${forks[1].id}`);
    expect(await warmStates()).to.deep.equal([]);
    await eventually(() => qemuPids(e.root).length === 0 && vmDirs(e).length === 0, 60_000, 'no QEMU and no VM directory left');
  });
});
