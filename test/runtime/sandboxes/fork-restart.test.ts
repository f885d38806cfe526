/**
 * A fork across a restart, against real QEMU (TCG here) and the cached
 * Debian test guest: hostd is killed (SIGKILL) while a fork of 2 is under
 * way, its first copy's resume begun (held at the pause point before its
 * QEMU starts) and its second queued behind it (one resume at a time). The
 * next start resumes the copies still `booting` through the same queue as
 * the fork did: one at a time, never both at once. The QEMU processes are
 * looked at from the kill until both copies run: at every look there are at
 * most the one resume the bound allows, plus the guests that ran before the
 * restart (none: the parent was destroyed first), plus the copies already
 * running by then. Both copies end running with the parent's file, and the
 * saved state goes with the last of them. Two guests at most at any time;
 * the after hook kills every QEMU of the file's data dir.
 */
import { expect } from 'chai';
import { killGuests, qemuPids, requireVmsRuntime, type VmsEnv } from '../../helpers/vms-fixture.js';
import { eventually } from '../../helpers/daemon.js';
import { isPauseLine } from '../../../daemon/lib/test-pause.js';
import { importImages, okAs, sbxSh, startSandboxDaemon, untilRunning, vmDirs } from '../../helpers/sandboxes-fixture.js';
import { mostGuests, watchGuests } from '../../helpers/fork-watch.js';

const AGENT = ['sandbox.read', 'sandbox.manage'];
/** One copy resuming at a time (the bound the restart must keep). */
const CONF = ['  max_per_token: 3', '  fork_resume_concurrency: 1', '  boot_timeout_seconds: 1800'].join('\n');
const PAUSE = 'sandboxes.boot:warm';
const BEGINS = 'sandboxes: a fork copy begins to resume';
const STARTED = 'sandboxes: warm start';

describe('sandboxes runtime: a fork across a restart (QEMU)', function () {
  this.timeout(40 * 60_000);
  let e: VmsEnv;
  let alice = '';

  before(async function () {
    await requireVmsRuntime(this, 'sandboxes');
    e = await startSandboxDaemon({ sandboxes: CONF, env: { HOSTD_TEST_PAUSE_AT: PAUSE } });
    alice = await e.d.token('alice', AGENT);
    await importImages(e, 'deb12', false);
  });

  after(async function () {
    if (e) await killGuests(e.root);
  });

  const ok = (method: string, p: string, body?: unknown, status = 200) => okAs(e, alice, method, p, body, status);
  const warmStates = async () => (await e.d.admin.request('GET', '/admin/sandboxes/warm-states')).body.warm_states as any[];

  it('killed with one copy resuming and one queued: the next start resumes them one at a time, both run, and the saved state goes with the last', async () => {
    // No warm state of the image: the parent boots cold and never reaches the paused step (a warm resume's).
    const c = await ok('POST', '/sandboxes', { image_id: 'deb12', name: 'restart-parent' }, 201);
    const parent = await untilRunning(e, alice, c.sandbox.id, 1800);
    await ok('PUT', `/sandboxes/${parent.id}/files`, { path: '/srv/shared.txt', content: Buffer.from('from the parent\n').toString('base64') });
    const f = await ok('POST', `/sandboxes/${parent.id}/fork`, { count: 2 }, 201);
    const ids: string[] = f.sandboxes.map((s: any) => s.id);
    await eventually(() => e.d.logs.some((l) => isPauseLine(l, PAUSE)), 300_000, `hostd to pause at ${PAUSE}`);
    // The first copy's resume has begun (one boot attempt, held before its QEMU); the second waits for the slot.
    const before = await Promise.all(ids.map(async (id) => (await ok('GET', `/sandboxes/${id}`)).sandbox));
    expect(before.map((s) => [s.state, s.vmid, s.start.attempts])).to.deep.equal([
      ['booting', null, 1],
      ['booting', null, 0],
    ]);
    // The copies rest on the saved state, not on the parent: it goes, so no guest runs when hostd stops.
    await ok('DELETE', `/sandboxes/${parent.id}`);
    await eventually(() => qemuPids(e.root).length === 0, 120_000, "the parent's QEMU to end");
    await e.d.kill();
    const ranBefore = qemuPids(e.root).length;
    expect(ranBefore, 'guests running when hostd starts again').to.equal(0);

    const watch = watchGuests(e.root);
    let looks;
    let copies: any[] = [];
    try {
      e = await startSandboxDaemon({ root: e.root, sandboxes: CONF });
      for (const id of ids) copies.push(await untilRunning(e, alice, id, 900));
    } finally {
      looks = await watch.stop();
    }
    // Every look: at most one copy resuming (the bound) beside what ran before and the copies that already ran.
    for (const look of looks) {
      const ran = copies.filter((s) => Date.parse(s.running_at) <= look.at).length;
      expect(look.vms.length, `QEMU processes (${look.vms.join(', ')}) with ${ran} copies running`).to.be.at.most(1 + ranBefore + ran);
    }
    expect(mostGuests(looks).vms.length, 'two guests at most').to.be.at.most(2);
    // The restarted daemon's log, in order: one copy's resume began and ended (running) before the other's began.
    // (a copy's `warm start` line follows its record's change to running, so the last one is waited for.)
    const logged = () =>
      e.d.logs.filter((l) => (l.msg === BEGINS || l.msg === STARTED) && ids.includes(l.id)).map((l) => `${l.msg === BEGINS ? 'begins' : 'runs'} ${l.id}`);
    const lines = await eventually(() => (logged().length >= 4 ? logged() : undefined), 60_000, "both copies' resume lines");
    const [x, y] = lines[0] === `begins ${ids[0]}` ? ids : [ids[1], ids[0]];
    expect(lines).to.deep.equal([`begins ${x}`, `runs ${x}`, `begins ${y}`, `runs ${y}`]);
    // The first copy's resume began again (a second attempt); the second's first attempt came after the restart.
    copies = await Promise.all(ids.map(async (id) => (await ok('GET', `/sandboxes/${id}`)).sandbox));
    expect(copies.map((s) => [s.state, s.start.method, s.start.attempts])).to.deep.equal([
      ['running', 'warm', 2],
      ['running', 'warm', 1],
    ]);
    for (const s of copies) expect(await sbxSh(e, s.id, 'cat /srv/shared.txt; hostname')).to.equal(`from the parent\n${s.name}\n`);

    const states = await warmStates();
    expect(states.map((w) => w.name)).to.deep.equal([`sandbox fork of ${parent.id}`]);
    await ok('DELETE', `/sandboxes/${ids[0]}`);
    expect((await warmStates()).map((w) => w.id)).to.deep.equal([states[0].id]);
    await ok('DELETE', `/sandboxes/${ids[1]}`);
    expect(await warmStates()).to.deep.equal([]);
    await eventually(() => qemuPids(e.root).length === 0 && vmDirs(e).length === 0, 60_000, 'no QEMU and no VM directory left');
  });
});
