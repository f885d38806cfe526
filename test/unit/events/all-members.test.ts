/**
 * The `members=all` merge, with this member's real event service and
 * another member's part driven by the test (what the forwarded stream would
 * relay): members' events go out in time order, each member's in its own
 * order; a member whose backlog is still coming holds the others (at most
 * the hold, and never past a member's queue), one that says it is caught up
 * or is down holds nothing; a full
 * reader's connection makes every member's part wait; the combined cursor
 * covers only what went out.
 */
import { expect } from 'chai';
import pino from 'pino';
import type { EventLog } from '../../../daemon/events/log.js';
import type { EventSettings } from '../../../daemon/events/settings.js';
import type { EventService } from '../../../daemon/events/service.js';
import { openAllMembers } from '../../../daemon/events/all-members.js';
import { decodeCursor, encodeCursor } from '../../../daemon/events/cursor.js';
import { SYSTEM_ACL } from '../../../daemon/events/filter.js';
import type { Sink } from '../../../daemon/events/subscription.js';
import type { NewEvent, PublicEvent } from '../../../daemon/events/types.js';
import type { Caller } from '../../../daemon/lib/caller.js';
import { eventually } from '../../helpers/daemon.js';
import { eventsFixture, RecordingSink, type EventsFixture } from './fixture.js';

const reader: Caller = { tokenId: 't1', tokenName: 'reader', scopes: ['system.read'], transport: 'api', origin: 'n1' };
const ev = (n: number): NewEvent => ({ type: 'system.test', domain: 'system', resource: `test/a${n}`, actor: 'admin', summary: `a${n}`, acl: SYSTEM_ACL });

/** The reader's connection, with the resources of the test events it got. */
class Reader extends RecordingSink {
  tests(): string[] {
    return this.got.filter((e) => e.type === 'system.test').map((e) => e.resource);
  }
}

/** Member n2's side of the forwarded stream, sent by the test. */
class OtherMember {
  sink?: Sink;
  closed = false;
  seq = 0;
  private readonly epoch = 'e2';
  private msg(type: string, time: string, data: Record<string, unknown> = {}, resource = ''): boolean {
    const cursor = encodeCursor({ n2: { epoch: this.epoch, seq: this.seq } });
    const e: PublicEvent = { cursor, seq: this.seq, node_id: 'n2', time, type, domain: 'system', resource, actor: '', summary: '', data };
    return this.sink!.send(JSON.stringify(e), cursor);
  }
  start(): boolean {
    return this.msg('bookmark', new Date().toISOString());
  }
  event(name: string, time: string): boolean {
    this.seq++;
    return this.msg('system.test', time, {}, `test/${name}`);
  }
  caughtUp(): boolean {
    return this.msg('bookmark', new Date().toISOString(), { caught_up: true });
  }
}

describe('events_stream members=all: the merge', function () {
  let fx: EventsFixture | undefined;
  let log: EventLog;
  let svc: EventService;
  let other: OtherMember;
  let close: (() => void) | undefined;

  const setup = async (settings: Partial<EventSettings>) => {
    fx = await eventsFixture(settings);
    ({ log, svc } = fx);
    other = new OtherMember();
  };
  /** Opens a members=all stream on n1 from `cursor` (n2's part is `other`). */
  const open = async (out: Reader, cursor?: string) => {
    close = await openAllMembers(
      {
        events: svc,
        members: () => ['n1', 'n2'],
        forward: async (_peer, _caller, _args, _last, _req, sink) => {
          other.sink = sink;
          return () => {
            other.closed = true;
          };
        },
        log: pino({ level: 'silent' }),
        membersPollMs: 60_000,
      },
      reader,
      { cursor },
      undefined,
      'req-1',
      out,
    );
  };
  /** The times of this member's events a1..an, made now (each a millisecond apart, so that n2's can go between). */
  const made = async (n: number): Promise<number[]> => {
    const times: number[] = [];
    for (let i = 1; i <= n; i++) {
      const t = Date.now();
      while (Date.now() < t + 2);
      await log.append(ev(i));
      const page = await svc.list(reader, { limit: 1000 });
      times.push(Date.parse(page.events.at(-1)!.time));
    }
    return times;
  };
  const at = (ms: number) => new Date(ms).toISOString();
  const start = () => encodeCursor({ n1: { epoch: log.epoch, seq: 0 }, n2: { epoch: 'e2', seq: 0 } });

  afterEach(async () => {
    close?.();
    close = undefined;
    await fx?.close();
    fx = undefined;
  });

  it("a resume interleaves both members' backlogs by time, each member's in its order", async () => {
    await setup({ membersAllHoldMs: 60_000 });
    const t = await made(3);
    const out = new Reader();
    // n2's part opens and starts, but its backlog has not come yet: n1's backlog waits for it.
    await open(out, start());
    other.start();
    await new Promise((r) => setTimeout(r, 100));
    expect(out.tests(), 'n1 waits for n2, whose backlog is still coming').to.deep.equal([]);
    other.event('b1', at(t[0] + 1));
    other.event('b2', at(t[1] + 1));
    other.event('b3', at(t[2] + 1));
    other.caughtUp();
    await eventually(() => out.tests().length === 6, 5000, 'all six events');
    expect(out.tests()).to.deep.equal(['test/a1', 'test/b1', 'test/a2', 'test/b2', 'test/a3', 'test/b3']);
    // Each cursor: both members, each at the last of its events that went out.
    const last = decodeCursor(out.got.at(-1)!.cursor);
    expect(last.n2.seq).to.equal(3);
    expect(last.n1.seq).to.be.at.least(3);
  });

  it('once every member is caught up, events go out as they arrive', async () => {
    await setup({ membersAllHoldMs: 60_000 });
    const out = new Reader();
    await open(out);
    other.start();
    other.caughtUp();
    await made(1);
    await eventually(() => out.tests().includes('test/a1'), 5000, "n1's live event");
    other.event('b1', new Date().toISOString());
    expect(out.tests()).to.deep.equal(['test/a1', 'test/b1']);
  });

  it('a member that is down holds nothing: its events follow when it is back, from where they stopped', async () => {
    await setup({ membersAllHoldMs: 60_000 });
    const t = await made(2);
    const out = new Reader();
    await open(out, start());
    other.start();
    other.event('b1', at(t[0] + 1));
    // Its stream ends before it caught up: down, and n1's events no longer wait for it.
    const first = other.sink!;
    first.end();
    await eventually(() => out.tests().length === 3, 5000, "n1's events and n2's first");
    expect(out.tests()).to.deep.equal(['test/a1', 'test/b1', 'test/a2']);
    expect(out.got.some((e) => e.type === 'members.down')).to.equal(true);
    // Opened again (after the backoff) from n2's last position that went out.
    await eventually(() => other.sink !== first, 10_000, "n2's part opened again");
    other.start();
    other.event('b2', at(t[1] + 1));
    other.caughtUp();
    await eventually(() => out.tests().length === 4, 5000, "n2's next event");
    expect(out.tests().at(-1)).to.equal('test/b2');
    expect(out.got.some((e) => e.type === 'members.up')).to.equal(true);
  });

  it('past the hold, a member still silent no longer holds the others', async () => {
    await setup({ membersAllHoldMs: 50 });
    await made(2);
    const out = new Reader();
    await open(out, start());
    other.start();
    await eventually(() => out.tests().length === 2, 10_000, "n1's events after the hold");
    expect(out.tests()).to.deep.equal(['test/a1', 'test/a2']);
  });

  it("a backlog longer than a member's queue goes on rather than wait for a silent member (waiting never makes it lagged)", async () => {
    await setup({ membersAllHoldMs: 60_000, queueEvents: 16 });
    for (let i = 1; i <= 100; i++) await log.append(ev(i));
    const out = new Reader();
    await open(out, start());
    other.start();
    // All but what fits in the queue go on without n2; the rest wait for it (or the hold).
    await eventually(() => out.tests().length > 100 - 16, 10_000, "n1's events beyond its queue");
    other.caughtUp();
    await eventually(() => out.tests().length === 100, 10_000, "n1's 100 events once n2 is caught up");
    expect(out.tests()).to.deep.equal(Array.from({ length: 100 }, (_, i) => `test/a${i + 1}`));
    expect(out.got.map((e) => e.type)).to.not.include('lagged');
    expect(out.ended).to.equal(false);
  });

  it("a full reader's connection makes each member's part wait; what was held goes out once it drains", async () => {
    await setup({ membersAllHoldMs: 60_000, queueEvents: 64 });
    const out = new Reader();
    await open(out);
    other.start();
    other.caughtUp();
    out.blocked = true;
    const now = Date.now();
    expect(other.event('b1', at(now)), 'the first is taken (it finds the connection full)').to.equal(false);
    const waited = other.sink!.drained();
    let drained = false;
    void waited.then(() => (drained = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(drained, "n2's part waits while the reader's connection is full").to.equal(false);
    out.release();
    await waited;
    other.event('b2', at(now + 1));
    expect(out.tests()).to.deep.equal(['test/b1', 'test/b2']);
  });
});
