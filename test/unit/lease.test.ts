import { expect } from 'chai';
import pino from 'pino';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApiError } from '../../daemon/lib/errors.js';
import { Store } from '../../daemon/store/store.js';
import { LeaseManager, type LeasePeerLink, type LeaseState } from '../../cluster/lease.js';
import { LeaseNet, rng, sleep } from '../helpers/lease-net.js';

async function rejection(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (err) {
    expect(err).to.be.instanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error('expected a rejection');
}

/**
 * The per-call deadline of the tests that are not about deadlines: an
 * unreachable node fails a call at once (no route, or down), so the deadline
 * only ever cuts a call a loaded machine made slow, and with the default
 * 250 ms such a cut turned a reachable majority into a 503 or left a sync
 * unconverged (a test that depended on the machine's speed).
 */
const NO_CUT_MS = 120_000;

/** A simulated cluster of `n` whose calls are never cut by a deadline (see NO_CUT_MS). */
const createNet = (n: number, opts: { delay?: number; seed?: number } = {}) => LeaseNet.create(n, { deadlineMs: NO_CUT_MS, ...opts });

function holders(net: LeaseNet): string[] {
  return [...net.nodes.values()].filter((n) => n.up && n.lease.state().holding).map((n) => n.id);
}

function records(net: LeaseNet): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of net.nodes.values()) if (n.up) out[n.id] = `${n.lease.state().holder}@${n.lease.state().epoch}`;
  return out;
}

function expectSafe(net: LeaseNet): void {
  net.checker.checkNow();
  net.checker.checkMajorities();
  expect(net.checker.violations).to.deep.equal([]);
}

/** All live nodes agree on one record and exactly its holder (if live) holds. */
function expectConverged(net: LeaseNet, holder: string, epoch: number): void {
  for (const n of net.nodes.values()) {
    if (!n.up) continue;
    expect(n.lease.state(), n.id).to.deep.equal({ holder, epoch, holding: n.id === holder });
  }
}

describe('proxy-holder lease', function () {
  let net: LeaseNet;

  afterEach(async () => {
    await net?.close();
  });

  it('initializes a one-member record that joining nodes adopt', async () => {
    net = await createNet(3);
    expect(net.lease('n1').state()).to.deep.equal({ holder: null, epoch: 0, holding: false });
    await net.bootstrap('n1');
    expectConverged(net, 'n1', 1);
    // adopting an older record changes nothing
    await net.lease('n2').adopt({ holder: null, epoch: 0 });
    expect(net.lease('n2').state()).to.deep.equal({ holder: 'n1', epoch: 1, holding: false });
    expect((await rejection(net.lease('n2').adopt({ holder: 5, epoch: 'x' }))).status).to.equal(400);
    expect((await rejection(net.lease('n2').initialize('n2'))).status).to.equal(409);
    expect(await net.lease('n1').initialize('n1')).to.deep.equal({ holder: 'n1', epoch: 1, holding: true });
  });

  it('moves between live nodes, from the holder, the target or a third node', async () => {
    net = await createNet(3, { delay: 5 });
    await net.bootstrap();
    const events: LeaseState[] = [];
    net.lease('n1').onChange((s) => events.push(s));

    expect(await net.lease('n1').move('n2')).to.deep.equal({ holder: 'n2', epoch: 2, holding: false });
    // the new holder heard the commit before move() returned
    expect(net.lease('n2').state()).to.deep.equal({ holder: 'n2', epoch: 2, holding: true });
    // the old holder stops holding first (at once), then stores the new record
    expect(events).to.deep.equal([
      { holder: 'n1', epoch: 1, holding: false },
      { holder: 'n2', epoch: 2, holding: false },
    ]);

    expect(await net.lease('n3').move('n3')).to.deep.equal({ holder: 'n3', epoch: 3, holding: true });
    expect(await net.lease('n2').move('n1')).to.deep.equal({ holder: 'n1', epoch: 4, holding: false });
    expect(net.lease('n1').state().holding).to.equal(true);
    await net.syncAll(1);
    expectConverged(net, 'n1', 4);
    expectSafe(net);
  });

  it('refuses a move to a non-member (404) or to an unreachable member (503)', async () => {
    net = await createNet(3);
    await net.bootstrap();
    const e404 = await rejection(net.lease('n1').move('n9'));
    expect(e404.status).to.equal(404);
    await net.kill('n3');
    const e503 = await rejection(net.lease('n1').move('n3'));
    expect(e503.status).to.equal(503);
    expect(e503.message).to.equal('member n3 is unreachable; the proxy was not moved');
    expectConverged(net, 'n1', 1);
  });

  it('answers 409 to a takeover while the holder is reachable, and a no-op on the holder', async () => {
    net = await createNet(3);
    await net.bootstrap();
    const e = await rejection(net.lease('n2').takeover());
    expect(e.status).to.equal(409);
    expect(e.message).to.equal('the proxy holder n1 is reachable; move it with peer_id instead');
    expect(await net.lease('n1').takeover()).to.deep.equal({ holder: 'n1', epoch: 1, holding: true });
    expectConverged(net, 'n1', 1);
  });

  it('kills the holder and takes over from each survivor in turn', async () => {
    net = await createNet(3, { delay: 3 });
    await net.bootstrap();
    // n1 dies -> n2 takes over; n1 comes back; n2 dies -> n3; n2 back; n3 dies -> n1
    const turns: Array<[dead: string, taker: string, other: string]> = [
      ['n1', 'n2', 'n3'],
      ['n2', 'n3', 'n1'],
      ['n3', 'n1', 'n2'],
    ];
    let epoch = 1;
    for (const [dead, taker, other] of turns) {
      await net.kill(dead);
      const s = await net.lease(taker).takeover();
      epoch++;
      expect(s).to.deep.equal({ holder: taker, epoch, holding: true });
      // the other survivor now finds a reachable holder
      await net.lease(other).sync();
      expect((await rejection(net.lease(other).takeover())).status).to.equal(409);
      await net.restart(dead);
      // restarted, the old holder still has its own old record until it syncs
      await net.lease(dead).sync();
      expectConverged(net, taker, epoch);
      expect(holders(net)).to.deep.equal([taker]);
    }
    expectSafe(net);
  });

  it('kills the holder of a 5-node cluster and takes over from each survivor, until no majority is left', async () => {
    net = await createNet(5, { delay: 3 });
    await net.bootstrap();
    await net.kill('n1');
    expect((await net.lease('n2').takeover()).holding).to.equal(true);
    await net.kill('n2');
    expect((await net.lease('n3').takeover()).holding).to.equal(true);
    await net.kill('n3');
    // two of five left: nobody can take over, and nothing changes
    const e = await rejection(net.lease('n4').takeover());
    expect(e.status).to.equal(503);
    expect(e.message).to.match(/^no majority: only 2 of 5 members stored epoch \d+$/);
    await net.syncAll();
    // the survivors agree on the last commit they heard of (n3 may have died before telling them)
    const r = records(net);
    expect(r.n4).to.equal(r.n5);
    expect(net.lease('n4').state().epoch).to.be.at.most(3);
    expect(holders(net)).to.deep.equal([]);
    // n1 comes back: a majority again. It last knew itself as holder at epoch 1 and no live
    // member knows a newer commit (n2 and n3, which do, are down), so it is the recorded holder
    // and it is reachable: takeover is refused, an explicit move works.
    await net.restart('n1');
    await net.syncAll();
    expect(net.lease('n1').state()).to.deep.equal({ holder: 'n1', epoch: 1, holding: true });
    expect((await rejection(net.lease('n5').takeover())).message).to.equal('the proxy holder n1 is reachable; move it with peer_id instead');
    const s = await net.lease('n5').move('n5');
    expect(s.holding).to.equal(true);
    expect(s.epoch).to.be.greaterThan(3); // above every epoch the survivors had accepted
    await net.syncAll(1);
    expect(holders(net)).to.deep.equal(['n5']);
    // the others come back and learn it
    await net.restart('n2');
    await net.restart('n3');
    await net.syncAll();
    expectConverged(net, 'n5', s.epoch);
    expectSafe(net);
  });

  it('partition 1|2 with the holder on the majority side: the minority gets 503, nothing changes', async () => {
    net = await createNet(3, { delay: 3 });
    await net.bootstrap('n1');
    net.partition(['n3'], ['n1', 'n2']);
    const e = await rejection(net.lease('n3').takeover());
    expect(e.status).to.equal(503);
    expect(e.message).to.equal('no majority: only 1 of 3 members stored epoch 2');
    const m = await rejection(net.lease('n3').move('n3'));
    expect(m.status).to.equal(503);
    expect((await rejection(net.lease('n2').takeover())).status).to.equal(409);
    // the majority side can still move
    expect((await net.lease('n1').move('n2')).holder).to.equal('n2');
    expect(holders(net)).to.deep.equal(['n2']);
    net.heal();
    await net.syncAll();
    expectConverged(net, 'n2', net.lease('n2').state().epoch);
    expectSafe(net);
  });

  it('partition 1|2 with the holder isolated: the majority takes over, the old holder steps down on heal', async () => {
    net = await createNet(3, { delay: 3 });
    await net.bootstrap('n1');
    net.partition(['n1'], ['n2', 'n3']);
    // the isolated holder can do nothing with a majority
    expect((await rejection(net.lease('n1').move('n1'))).message).to.equal('no majority: only 1 of 3 members stored epoch 2');
    const s = await net.lease('n3').takeover();
    expect(s.holder).to.equal('n3');
    expect(s.holding).to.equal(true);
    // n1 still believes its older epoch until it hears otherwise: never the same epoch as n3
    expect(net.lease('n1').state()).to.deep.equal({ holder: 'n1', epoch: 1, holding: true });
    expect(s.epoch).to.be.greaterThan(1);
    const changes: LeaseState[] = [];
    net.lease('n1').onChange((x) => changes.push(x));
    net.heal();
    await net.lease('n1').sync();
    expect(net.lease('n1').state()).to.deep.equal({ holder: 'n3', epoch: s.epoch, holding: false });
    expect(changes[0]!.holding).to.equal(false);
    await net.syncAll();
    expectConverged(net, 'n3', s.epoch);
    expectSafe(net);
  });

  it('a holder stops holding at once when any message carries a higher committed epoch', async () => {
    net = await createNet(3);
    await net.bootstrap('n1');
    net.partition(['n1'], ['n2', 'n3']);
    const s = await net.lease('n2').takeover();
    net.heal();
    let seen: LeaseState | null = null;
    net.lease('n1').onChange((x) => (seen ??= x));
    // a bare prepare from n3 carrying its record: n1 learns of the higher epoch synchronously
    const p = net.lease('n1').handle({ type: 'prepare', from: 'n3', epoch: 99, record: { holder: 'n2', epoch: s.epoch } });
    expect(net.lease('n1').state().holding).to.equal(false);
    expect(seen).to.deep.equal({ holder: 'n1', epoch: 1, holding: false });
    await p;
    expect(net.lease('n1').state()).to.deep.equal({ holder: 'n2', epoch: s.epoch, holding: false });
    expectSafe(net);
  });

  it('concurrent takeovers from two nodes: at most one holder per epoch, one winner', async () => {
    for (let round = 0; round < 6; round++) {
      net = await createNet(round % 2 ? 5 : 3, { delay: round * 3, seed: round + 7 });
      await net.bootstrap('n1');
      await net.kill('n1');
      const results = await Promise.allSettled([net.lease('n2').takeover(), net.lease('n3').takeover()]);
      const won = results.filter((r) => r.status === 'fulfilled');
      expect(won.length, `round ${round}`).to.be.greaterThan(0);
      for (const r of results) {
        if (r.status === 'rejected') expect([409, 503]).to.include((r.reason as ApiError).status);
      }
      await net.syncAll();
      const h = holders(net);
      expect(h, `round ${round}: ${JSON.stringify(records(net))}`).to.have.length(1);
      const st = net.lease(h[0]!).state();
      expectConverged(net, h[0]!, st.epoch);
      expectSafe(net);
      await net.close();
    }
  });

  it('many concurrent takeovers and moves from every node converge without two holders at one epoch', async () => {
    net = await createNet(5, { delay: 8, seed: 3 });
    await net.bootstrap('n1');
    await net.kill('n1');
    const ops = [net.lease('n2').takeover(), net.lease('n3').takeover(), net.lease('n4').move('n4'), net.lease('n5').move('n2'), net.lease('n3').move('n5')];
    const results = await Promise.allSettled(ops);
    for (const r of results) if (r.status === 'rejected') expect([409, 503]).to.include((r.reason as ApiError).status);
    expect(results.some((r) => r.status === 'fulfilled')).to.equal(true);
    await net.syncAll();
    expect(holders(net)).to.have.length(1);
    expectSafe(net);
  });

  it('restarted nodes keep their record and acceptor state', async () => {
    net = await createNet(3);
    await net.bootstrap('n1');
    await net.lease('n1').move('n2');
    await net.syncAll(1);
    for (const id of net.ids) await net.restart(id);
    expectConverged(net, 'n2', 2);
    // the acceptor state survived too: a new proposal uses a fresh epoch
    expect((await net.lease('n3').move('n3')).epoch).to.equal(3);
    // a lone restarted node (no reachable peers) still knows what it stored
    await net.kill('n1');
    await net.kill('n2');
    await net.restart('n3');
    expect(net.lease('n3').state()).to.deep.equal({ holder: 'n3', epoch: 3, holding: true });
    expectSafe(net);
  });

  it('refuses an epoch it already promised or accepted, and malformed messages', async () => {
    net = await createNet(3);
    await net.bootstrap('n1');
    const l = net.lease('n2');
    const rec = { holder: 'n1', epoch: 1 };
    expect(await l.handle({ type: 'prepare', from: 'n1', epoch: 5, record: rec })).to.include({ ok: true, promised: 5 });
    // the same epoch for another proposer, or a lower one: refused
    expect(await l.handle({ type: 'prepare', from: 'n3', epoch: 5, record: rec })).to.include({ ok: false });
    expect(await l.handle({ type: 'prepare', from: 'n3', epoch: 4, record: rec })).to.include({ ok: false });
    // accept only from the proposer it promised
    expect(await l.handle({ type: 'accept', from: 'n3', epoch: 5, holder: 'n3', record: rec })).to.include({ ok: false });
    expect(await l.handle({ type: 'accept', from: 'n1', epoch: 5, holder: 'n1', record: rec })).to.include({ ok: true });
    // retransmission is fine, a second value at the same epoch is not
    expect(await l.handle({ type: 'accept', from: 'n1', epoch: 5, holder: 'n1', record: rec })).to.include({ ok: true });
    expect(await l.handle({ type: 'accept', from: 'n1', epoch: 5, holder: 'n3', record: rec })).to.include({ ok: false });
    // nothing is committed by accepting
    expect(l.state()).to.deep.equal({ holder: 'n1', epoch: 1, holding: false });

    const bad: unknown[] = [
      null,
      'prepare',
      { type: 'prepare', from: 'n1', epoch: 0, record: rec },
      { type: 'prepare', from: 'n1', epoch: 1.5, record: rec },
      { type: 'accept', from: 'n1', epoch: 6, record: rec },
      { type: 'commit', from: 'n1', record: { holder: null, epoch: 0 } },
      { type: 'sync', from: '', record: rec },
      { type: 'sync', from: 'n1', record: { holder: 'n1', epoch: -1 } },
      { type: 'sync', from: 'n1' },
      { type: 'vote', from: 'n1', record: rec },
    ];
    for (const m of bad) expect((await rejection(l.handle(m))).status, JSON.stringify(m)).to.equal(400);
    expect((await rejection(l.handle({ type: 'sync', from: 'stranger', record: rec }))).status).to.equal(403);
  });

  it('heals and converges to the highest committed epoch after both sides changed', async () => {
    net = await createNet(5, { delay: 4 });
    await net.bootstrap('n1');
    net.partition(['n1', 'n2'], ['n3', 'n4', 'n5']);
    // minority side: no change possible
    expect((await rejection(net.lease('n2').move('n2'))).status).to.equal(503);
    expect((await rejection(net.lease('n2').move('n1'))).status).to.equal(503);
    // majority side takes over twice
    await net.lease('n4').takeover();
    const last = await net.lease('n4').move('n5');
    net.heal();
    await net.syncAll(2);
    expectConverged(net, 'n5', last.epoch);
    expectSafe(net);
  });

  it('randomized partitions, crashes, moves and takeovers keep the invariant (fixed seed)', async function () {
    this.timeout(120_000);
    const seed = Number(process.env.LEASE_SEED ?? 20240611); // fixed; override to explore other schedules
    const r = rng(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
    net = await LeaseNet.create(5, { delay: 6, seed, deadlineMs: 120 });
    await net.bootstrap('n1');
    const outcomes: Record<string, number> = {};
    const count = (k: string) => (outcomes[k] = (outcomes[k] ?? 0) + 1);
    const swallow = (from: string, p: Promise<unknown>, what: string) =>
      p.then(
        () => count(`${what}:ok`),
        (err) => {
          if (err instanceof ApiError) count(`${what}:${err.status}`);
          else if (!net.node(from).up)
            count(`${what}:crashed`); // its store closed under it
          else throw err;
        },
      );

    for (let step = 0; step < 60; step++) {
      const live = net.ids.filter((id) => net.node(id).up);
      const down = net.ids.filter((id) => !net.node(id).up);
      const batch: Promise<unknown>[] = [];
      const k = 1 + Math.floor(r() * 3);
      for (let i = 0; i < k; i++) {
        const x = r();
        if (x < 0.12) {
          const shuffled = [...net.ids].sort(() => r() - 0.5);
          const cut = 1 + Math.floor(r() * (net.ids.length - 1));
          net.partition(shuffled.slice(0, cut), shuffled.slice(cut));
        } else if (x < 0.2) {
          net.heal();
        } else if (x < 0.26 && live.length > 2) {
          batch.push(net.kill(pick(live)));
        } else if (x < 0.34) {
          if (down.length) batch.push(net.restart(down.splice(Math.floor(r() * down.length), 1)[0]!));
        } else if (x < 0.6) {
          const from = pick(live);
          batch.push(swallow(from, net.lease(from).takeover(), 'takeover'));
        } else if (x < 0.88) {
          const from = pick(live);
          batch.push(swallow(from, net.lease(from).move(pick(net.ids)), 'move'));
        } else {
          batch.push(net.lease(pick(live)).sync());
        }
      }
      await Promise.all(batch);
      net.checker.checkNow();
      expect(net.checker.violations, `step ${step}`).to.deep.equal([]);
    }

    // everything back, everyone synced: one record, the highest committed epoch anyone saw
    net.heal();
    for (const id of net.ids) if (!net.node(id).up) await net.restart(id);
    await sleep(net.deadlineMs * 2);
    // The final sync is about convergence, not deadlines: no call of it is cut for being slow.
    net.deadlineMs = NO_CUT_MS;
    await net.syncAll(3);
    const top = net.checker.maxEpoch;
    expectConverged(net, net.checker.committed.get(top)!, top);
    expect(holders(net)).to.deep.equal([net.checker.committed.get(top)!]);
    if (process.env.LEASE_VERBOSE) console.log(seed, JSON.stringify(outcomes), 'epochs', net.checker.maxEpoch);
    expect(outcomes['takeover:ok'] ?? 0, JSON.stringify(outcomes)).to.be.greaterThan(0);
    expect(outcomes['move:ok'] ?? 0, JSON.stringify(outcomes)).to.be.greaterThan(0);
    expect((outcomes['takeover:503'] ?? 0) + (outcomes['move:503'] ?? 0), JSON.stringify(outcomes)).to.be.greaterThan(0);
    expect(net.checker.committed.size).to.be.at.least(3);
    expectSafe(net);
  });
});

describe('proxy-holder lease on a lone node', () => {
  it('a one-member cluster can move to itself (majority of one) and takes over with no holder', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-lease1-'));
    const store = await Store.open(dir);
    const link: LeasePeerLink = {
      selfId: 'solo',
      members: () => ['solo'],
      send: async () => {
        throw new Error('no peers');
      },
      sendProxyConfig: async () => {
        throw new Error('no peers');
      },
      isReachable: async () => false,
    };
    try {
      const l = new LeaseManager(store, link, pino({ level: 'silent' }));
      await l.init();
      expect(await l.takeover()).to.deep.equal({ holder: 'solo', epoch: 1, holding: true });
      expect(await l.move('solo')).to.deep.equal({ holder: 'solo', epoch: 2, holding: true });
      l.start(50);
      await sleep(120);
      l.stop();
      expect(l.state()).to.deep.equal({ holder: 'solo', epoch: 2, holding: true });
    } finally {
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
