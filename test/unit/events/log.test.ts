/**
 * The event log on a real store: seq in the writer's batch, released in seq
 * order once written (a failed batch leaves a gap, never an event without
 * its cause), seq never reused across a crash, retention by count answered
 * with `reset`.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { Store, SYNC } from '../../../daemon/store/store.js';
import { EventLog, seqKey } from '../../../daemon/events/log.js';
import { DEFAULT_EVENT_SETTINGS, type EventSettings } from '../../../daemon/events/settings.js';
import { EventService } from '../../../daemon/events/service.js';
import { SYSTEM_ACL } from '../../../daemon/events/filter.js';
import type { NewEvent, StoredEvent } from '../../../daemon/events/types.js';
import type { Caller } from '../../../daemon/lib/caller.js';
import { tempDir } from '../../helpers/daemon.js';

const ev = (n: number): NewEvent => ({ type: 'system.test', domain: 'system', resource: `test/${n}`, actor: 'admin', summary: `event ${n}`, acl: SYSTEM_ACL });
const reader: Caller = { tokenId: 't1', tokenName: 'reader', scopes: ['system.read'], transport: 'api', origin: 'n1' };

describe('event log', function () {
  const dirs: string[] = [];
  const stores: Store[] = [];
  const open = async (dir = tempDir('hostd-events-')) => {
    dirs.push(dir);
    const store = await Store.open(path.join(dir, 'db'));
    stores.push(store);
    return { dir, store };
  };
  const log = async (store: Store, settings: Partial<EventSettings> = {}) => {
    const l = new EventLog(store, 'n1', { ...DEFAULT_EVENT_SETTINGS, ...settings });
    await l.init();
    return l;
  };

  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close().catch(() => undefined);
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });

  it("stores each event in the writer's own batch, with what it reports", async () => {
    const { store } = await open();
    const l = await log(store);
    const cause = store.sub<{ x: number }>('cause');
    await l.join(ev(1), (ops) => store.batch([{ type: 'put', sub: cause, key: 'k', value: { x: 1 } }, ...ops], SYNC));
    const [stored] = await l.read(0, 10);
    expect(stored).to.include({ seq: 1, type: 'system.test', resource: 'test/1', node_id: 'n1' });
    expect(await cause.get('k')).to.deep.equal({ x: 1 });
  });

  it('a batch that fails stores neither the cause nor its event, and its seq is a gap, not a hold-up', async () => {
    const { store } = await open();
    const l = await log(store);
    const seen: number[] = [];
    l.listen((e) => seen.push(e.seq));
    const failed = await l
      .join(ev(1), async () => {
        throw new Error('disk full');
      })
      .then(
        () => null,
        (e: Error) => e.message,
      );
    expect(failed).to.equal('disk full');
    await l.append(ev(2));
    expect(seen).to.deep.equal([2]);
    expect((await l.read(0, 10)).map((e) => e.seq)).to.deep.equal([2]);
  });

  it('releases events in seq order: n+1 written first waits until n is written', async () => {
    const { store } = await open();
    const l = await log(store);
    const seen: number[] = [];
    l.listen((e) => seen.push(e.seq));
    let writeFirst!: () => void;
    const firstWritten = new Promise<void>((r) => (writeFirst = r));
    const first = l.join(ev(1), async (ops) => {
      await firstWritten;
      await store.batch(ops);
    });
    await l.append(ev(2));
    // 2 is in the store, but 1 could still fail: nobody sees 2 yet.
    expect(seen).to.deep.equal([]);
    expect(await l.read(0, 10)).to.deep.equal([]);
    writeFirst();
    await first;
    expect(seen).to.deep.equal([1, 2]);
    expect(l.head).to.equal(2);
  });

  it('never reuses a seq after a crash: a restart continues after the durably reserved mark, in the same epoch', async () => {
    const { dir, store } = await open();
    const l = await log(store, { reserveBlock: 4 });
    for (let i = 1; i <= 6; i++) await l.append(ev(i));
    const epoch = l.epoch;
    // The crash: the database goes away without the log being told (nothing flushed or closed by it).
    await store.db.close();
    const again = await Store.open(path.join(dir, 'db'));
    stores.push(again);
    const l2 = await log(again, { reserveBlock: 4 });
    expect(l2.epoch).to.equal(epoch);
    await l2.append(ev(7));
    const all = await l2.read(0, 100);
    const seqs = all.map((e) => e.seq);
    expect(seqs.slice(0, 6)).to.deep.equal([1, 2, 3, 4, 5, 6]);
    expect(seqs[6]).to.be.greaterThan(6);
    expect(all[6].resource).to.equal('test/7');
    // The first six are untouched (no seq was written twice).
    expect(all.slice(0, 6).map((e) => e.resource)).to.deep.equal(['test/1', 'test/2', 'test/3', 'test/4', 'test/5', 'test/6']);
  });

  it('a seq handed out but lost with its lazy write (a power loss) is not handed out again', async () => {
    const { dir, store } = await open();
    const l = await log(store, { reserveBlock: 10 });
    await l.append(ev(1));
    await l.append(ev(2));
    // Simulate the loss: the event of seq 2 is gone from the disk, the reserved mark is not.
    await store.sub<StoredEvent>('events').del(seqKey(2));
    await store.db.close();
    const again = await Store.open(path.join(dir, 'db'));
    stores.push(again);
    const l2 = await log(again, { reserveBlock: 10 });
    await l2.append(ev(3));
    const seqs = (await l2.read(0, 100)).map((e) => e.seq);
    expect(seqs[0]).to.equal(1);
    expect(seqs[1]).to.be.greaterThan(2);
  });

  it('a fresh log has a new epoch: a cursor of a wiped data dir is answered reset', async () => {
    const a = await open();
    const la = await log(a.store);
    await la.append(ev(1));
    const b = await open();
    const lb = await log(b.store);
    expect(lb.epoch).to.not.equal(la.epoch);
    const svcA = new EventService(la, la.settings);
    const svcB = new EventService(lb, lb.settings);
    const { next_cursor } = await svcA.list(reader, {});
    expect(svcB.start(next_cursor, true)).to.deep.equal({ reset: true });
    const page = await svcB.list(reader, { cursor: next_cursor });
    expect(page.events.map((e) => e.type)).to.deep.equal(['reset']);
  });

  it('retention by count deletes the oldest events; a cursor below them gets reset, one above them resumes', async () => {
    const { store } = await open();
    const l = await log(store, { maxEvents: 10, maxAgeDays: 0 });
    for (let i = 1; i <= 25; i++) await l.append(ev(i));
    const svc = new EventService(l, l.settings);
    const early = (await svc.list(reader, { limit: 2 })).next_cursor;
    const late = (await svc.list(reader, { limit: 20 })).next_cursor;
    expect(await l.prune()).to.equal(15);
    expect(l.size).to.equal(10);
    expect(l.prunedThrough).to.equal(15);
    expect((await svc.list(reader, { cursor: early })).events.map((e) => e.type)).to.deep.equal(['reset']);
    const resumed = await svc.list(reader, { cursor: late });
    expect(resumed.events.map((e) => e.seq)).to.deep.equal([21, 22, 23, 24, 25]);
    // What the reset carries resumes at the head.
    const reset = (await svc.list(reader, { cursor: early })).events[0];
    expect((await svc.list(reader, { cursor: reset.cursor })).events).to.deep.equal([]);
  });

  it('retention by age deletes events older than max_age_days', async () => {
    const { store } = await open();
    let now = Date.parse('2026-01-01T00:00:00Z');
    const l = new EventLog(store, 'n1', { ...DEFAULT_EVENT_SETTINGS, maxAgeDays: 1 }, () => now);
    await l.init();
    await l.append(ev(1));
    await l.append(ev(2));
    now += 2 * 86_400_000;
    await l.append(ev(3));
    expect(await l.prune()).to.equal(2);
    expect((await l.read(0, 10)).map((e) => e.seq)).to.deep.equal([3]);
  });
});
