/**
 * One subscriber's delivery: every event after its start exactly once, in
 * order, whether it comes live or from the store; a burst beyond the queue
 * is caught up from the store (memory does not hold it); a reader that
 * stopped reading gets `lagged` and is closed; the per-token stream limit.
 */
import { expect } from 'chai';
import type { EventLog } from '../../../daemon/events/log.js';
import type { EventSettings } from '../../../daemon/events/settings.js';
import type { EventService } from '../../../daemon/events/service.js';
import { stateAcl, SYSTEM_ACL } from '../../../daemon/events/filter.js';
import type { NewEvent } from '../../../daemon/events/types.js';
import type { Caller } from '../../../daemon/lib/caller.js';
import { ApiError } from '../../../daemon/lib/errors.js';
import { eventually } from '../../helpers/daemon.js';
import { eventsFixture, RecordingSink, type EventsFixture } from './fixture.js';

const ev = (n: number, acl = SYSTEM_ACL): NewEvent => ({
  type: 'system.test',
  domain: 'system',
  resource: `test/${n}`,
  actor: 'admin',
  summary: `event ${n}`,
  acl,
});
const reader: Caller = { tokenId: 't1', tokenName: 'reader', scopes: ['system.read'], transport: 'api', origin: 'n1' };

/** The reader's connection, with the seqs of the test events it got. */
class TestSink extends RecordingSink {
  seqs(): number[] {
    return this.got.filter((e) => e.type === 'system.test').map((e) => e.seq);
  }
}

describe('event subscriptions', function () {
  let fx: EventsFixture | undefined;
  let log: EventLog;
  let svc: EventService;
  const setup = async (settings: Partial<EventSettings> = {}) => {
    fx = await eventsFixture(settings);
    ({ log, svc } = fx);
  };
  afterEach(async () => {
    await fx?.close();
    fx = undefined;
  });

  it('resuming from a cursor delivers every later event exactly once, in order, from the store and then live', async () => {
    await setup();
    for (let i = 1; i <= 600; i++) await log.append(ev(i));
    const cursor = (await svc.list(reader, { limit: 100 })).next_cursor;
    const sink = new TestSink();
    svc.openStream(reader, { cursor }, sink);
    // Events written while the replay runs join at the right place.
    for (let i = 601; i <= 650; i++) await log.append(ev(i));
    await eventually(() => sink.seqs().length >= 550, 30_000, 'replay and live events');
    expect(sink.seqs()).to.deep.equal(Array.from({ length: 550 }, (_, i) => i + 101));
  });

  it('a burst beyond the queue is served from the store, not held in memory, and nothing is lost', async () => {
    await setup({ queueEvents: 4 });
    const sink = new TestSink();
    svc.openStream(reader, {}, sink);
    // 50 events released in one go (one batch): the queue of 4 overflows at once.
    await log.append(Array.from({ length: 50 }, (_, i) => ev(i + 1)));
    await eventually(() => sink.seqs().length >= 50, 30_000, 'the burst');
    expect(sink.seqs()).to.deep.equal(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(sink.ended).to.equal(false);
  });

  it('a reader that stops reading gets lagged (with its last cursor) and is closed; it resumes from there and loses nothing', async () => {
    await setup({ queueEvents: 8 });
    const sink = new TestSink();
    svc.openStream(reader, {}, sink);
    await log.append(ev(1));
    await eventually(() => sink.seqs().length === 1, 10_000, 'the first event');
    sink.blocked = true;
    await log.append(ev(2));
    for (let i = 3; i <= 40; i++) await log.append(ev(i));
    await eventually(() => sink.ended, 10_000, 'the stream to end');
    const last = sink.got.at(-1)!;
    expect(last.type).to.equal('lagged');
    expect(svc.streams).to.equal(0);
    const delivered = sink.seqs();
    // Resume from the lagged cursor: the rest, once each.
    const rest = await svc.list(reader, { cursor: last.cursor, limit: 1000 });
    expect([...delivered, ...rest.events.map((e) => e.seq)]).to.deep.equal(Array.from({ length: 40 }, (_, i) => i + 1));
  });

  it('a reader that stops reading while it replays from the store gets lagged too, once the bound is passed', async () => {
    await setup({ queueEvents: 4 });
    for (let i = 1; i <= 3; i++) await log.append(ev(i));
    const sink = new TestSink();
    sink.blocked = true;
    // From before the first event: the replay writes one event and finds the buffer full.
    const start = (await svc.list(reader, { limit: 1 })).events[0];
    svc.openStream(reader, { cursor: start.cursor }, sink);
    await eventually(() => sink.got.length >= 1, 10_000, 'the first replayed event');
    expect(sink.ended).to.equal(false);
    for (let i = 4; i <= 12; i++) await log.append(ev(i));
    await eventually(() => sink.ended, 10_000, 'lagged');
    expect(sink.got.at(-1)!.type).to.equal('lagged');
    expect(svc.streams).to.equal(0);
  });

  it('filters per event by scope and by the filters asked for; a bookmark moves a filtered reader past what it does not see', async () => {
    await setup({ bookmarkMs: 20 });
    const vmReader: Caller = { ...reader, tokenId: 't2', scopes: ['vm.read'] };
    const sink = new TestSink();
    svc.openStream(vmReader, { types: 'vms.' }, sink);
    await log.append(ev(1));
    await log.append({ ...ev(2, stateAcl('vms')), type: 'vms.state', domain: 'vms', resource: 'vms/101' });
    await log.append({ ...ev(3, stateAcl('lxc')), type: 'lxc.state', domain: 'lxc', resource: 'lxc/7' });
    await eventually(() => sink.got.some((e) => e.type === 'bookmark' && e.seq === 3), 10_000, 'a bookmark at seq 3');
    expect(sink.got.filter((e) => e.type !== 'bookmark').map((e) => [e.type, e.seq])).to.deep.equal([['vms.state', 2]]);
    expect(sink.got.every((e) => !('acl' in e))).to.equal(true);
  });

  it('a token holds at most max_streams_per_token streams (429 naming the limit); closing one frees its place', async () => {
    await setup({ maxStreamsPerToken: 2 });
    const a = svc.openStream(reader, {}, new TestSink())!;
    svc.openStream(reader, {}, new TestSink());
    let err: unknown;
    try {
      svc.openStream(reader, {}, new TestSink());
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ApiError);
    expect((err as ApiError).status).to.equal(429);
    expect((err as ApiError).message).to.include('max_streams_per_token = 2');
    // Another token is not counted against this one.
    svc.openStream({ ...reader, tokenId: 't9' }, {}, new TestSink());
    a.close();
    expect(svc.openStream(reader, {}, new TestSink())).to.not.equal(undefined);
  });

  it("closes a token's streams when it is revoked", async () => {
    await setup();
    const sink = new TestSink();
    svc.openStream(reader, {}, sink);
    svc.closeToken('t1');
    expect(sink.ended).to.equal(true);
    expect(sink.got.at(-1)!.type).to.equal('closed');
    expect(svc.streams).to.equal(0);
  });
});
