/**
 * `events_stream` with `members=all`: every member's stream on one
 * connection, under one cursor with an entry per member (cursor.ts).
 *
 * Each member's events come through that member's own stream: this member's
 * from the event service, another's through the forwarded stream (the same
 * path as `peer_id`, so the caller's scopes are checked and applied on that
 * member, never here). Each member's events go out in that member's order,
 * with their `cursor` rewritten to the combined cursor after them.
 *
 * Across members, by time: each member's messages wait in a bounded queue of
 * its own, and the earliest head goes out first. A member whose backlog is
 * still coming (it has not yet said `caught_up`, see subscription.ts) and
 * has nothing queued may still send an earlier event, so the others wait for
 * it, at most `events.members_all_hold_ms`, and no longer than a member's
 * queue has room (so that waiting never makes a member's stream `lagged`).
 * Once every member is caught up, events go out as they arrive (by time
 * within the network's delay) and nothing waits. A member of an older
 * version never says `caught_up`: each of the others' bursts waits the hold
 * for it.
 *
 * Memory is bounded: while the reader's connection is full, or a member's
 * queue holds `events.queue_events` messages, that member's stream waits
 * (this member's subscription with its bounded queue, another's by HTTP/2
 * flow control). So a slow reader gets `lagged` from whichever member's
 * stream overflows first, as on one member's stream. The combined cursor
 * covers only what was sent: a resume gets every held message again.
 *
 * A member whose stream ends (it stopped, or cannot be reached) shows as a
 * `members.down` message; its stream is opened again from its last position
 * with a backoff, and `members.up` says it is back. Members that join later
 * are picked up from the member list.
 */
import type { Logger } from 'pino';
import type { Caller } from '../lib/caller.js';
import { ApiError } from '../lib/errors.js';
import { decodeCursor, encodeCursor, type Cursor, type Position } from './cursor.js';
import { parseFilter, requireSomeRead } from './filter.js';
import type { EventService, StreamArgs } from './service.js';
import type { Sink } from './subscription.js';
import type { PublicEvent } from './types.js';

/** Opens another member's stream for the caller (refusals as ApiErrors; 5xx when it cannot be reached); answers a function that closes it. */
export type OpenMemberStream = (
  peerId: string,
  caller: Caller,
  args: Record<string, unknown>,
  lastEventId: string | undefined,
  requestId: string,
  sink: Sink,
) => Promise<() => void>;

export interface AllMembersDeps {
  events: EventService;
  /** Every member's id, this one's included. */
  members: () => string[];
  forward?: OpenMemberStream;
  log: Logger;
  /** How often the member list is looked at for members that joined or left. */
  membersPollMs?: number;
  /** Backoff bounds of opening a member's stream again. */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** How long the opening waits for a member's part before showing it as down. */
  openTimeoutMs?: number;
}

/** A member's message waiting for its turn. */
interface Held {
  event: PublicEvent;
  /** The member's position after it. */
  at?: Position;
  /** The event's time, in ms (-Infinity for a bookmark). */
  time: number;
  /** When it arrived here. */
  since: number;
}

interface Part {
  id: string;
  /** The member's position after the last message sent to the reader. */
  pos?: Position;
  /** Its messages not yet sent, in its order. */
  held: Held[];
  /** Its backlog is sent (it said `caught_up`): it has nothing earlier than what comes next. */
  live: boolean;
  /** Its stream, waiting for room (the reader's connection, its queue). */
  room: Array<() => void>;
  close?: () => void;
  /** Bumped at each open: messages of an older stream of the member are ignored. */
  generation: number;
  down: boolean;
  retry?: NodeJS.Timeout;
  backoff: number;
}

/** The combined cursor: every member's position known so far. */
function combined(parts: Map<string, Part>): string {
  const c: Cursor = {};
  for (const p of parts.values()) if (p.pos) c[p.id] = p.pos;
  // Never empty: this member's position is set at open.
  return encodeCursor(c);
}

class AllMembersStream {
  private readonly parts = new Map<string, Part>();
  private finished = false;
  private poll?: NodeJS.Timeout;
  private readonly selfId: string;
  private readonly forwardArgs: Record<string, unknown>;
  private readonly holdMs: number;
  private readonly heldMax: number;
  /** Waiting for the reader's connection to have room. */
  private releasing = false;
  private holdTimer?: NodeJS.Timeout;

  constructor(
    private readonly deps: AllMembersDeps,
    private readonly caller: Caller,
    readonly args: StreamArgs,
    private readonly requestId: string,
    private readonly out: Sink,
  ) {
    this.selfId = deps.events.log.nodeId;
    const { cursor: _c, ...filters } = args;
    void _c;
    this.forwardArgs = filters;
    this.holdMs = deps.events.settings.membersAllHoldMs;
    this.heldMax = deps.events.settings.queueEvents;
  }

  /** Opens every member's stream; a member's refusal (4xx) refuses the whole stream, a member that cannot be reached shows as down. */
  async open(start: Cursor | undefined): Promise<void> {
    const ids = this.deps.members();
    if (!ids.includes(this.selfId)) ids.push(this.selfId);
    for (const id of ids) this.parts.set(id, this.newPart(id, start?.[id]));
    // This member's refusals first; its part opens last, so that its backlog starts once the others have opened
    // (a transport holding messages until its handshake holds few, and a reader is never lagged for an opening).
    this.deps.events.precheck(this.caller, { ...this.forwardArgs, cursor: this.ownCursor() });
    // Read from now: now is taken here, so that what the others send while this part waits carries this member's place too.
    const self = this.parts.get(this.selfId)!;
    self.pos ??= { epoch: this.deps.events.log.epoch, seq: this.deps.events.log.head };
    const others = [...this.parts.values()].filter((p) => p.id !== this.selfId);
    // A member that neither answers nor fails (a silent network) does not hold the stream's opening: past the bound it is down, and retried.
    const openMs = this.deps.openTimeoutMs ?? 5000;
    const results = await Promise.allSettled(
      others.map((p) => bounded(this.openOther(p), openMs, `member '${p.id}' did not open its stream within ${openMs} ms`)),
    );
    const refusal = results.findIndex((r) => r.status === 'rejected' && isRefusal(r.reason));
    if (refusal !== -1) {
      this.close();
      const err = (results[refusal] as PromiseRejectedResult).reason as ApiError;
      throw new ApiError(err.status, `member '${others[refusal].id}' refused its part of members=all: ${err.message}`);
    }
    try {
      this.openSelf();
    } catch (err) {
      this.close();
      throw err;
    }
    results.forEach((r, i) => {
      if (r.status === 'rejected') this.memberDown(others[i], r.reason);
    });
    if (this.finished) return;
    this.poll = setInterval(() => this.refreshMembers(), this.deps.membersPollMs ?? 2000);
    this.poll.unref();
  }

  private newPart(id: string, pos?: Position): Part {
    return { id, pos, held: [], live: false, room: [], generation: 0, down: false, backoff: this.deps.retryMinMs ?? 250 };
  }

  /** This member's entry of the cursor the stream started from, as a cursor of its own. */
  private ownCursor(): string | undefined {
    const pos = this.parts.get(this.selfId)?.pos;
    return pos ? encodeCursor({ [this.selfId]: pos }) : undefined;
  }

  private openSelf(): void {
    const part = this.parts.get(this.selfId)!;
    const sub = this.deps.events.openStream(this.caller, { ...this.forwardArgs, cursor: this.ownCursor() }, this.relay(part, part.generation), undefined, {
      announceCaughtUp: true,
    });
    part.close = () => sub?.close();
  }

  private async openOther(part: Part): Promise<void> {
    if (!this.deps.forward) throw new ApiError(501, 'this listener does not forward event streams');
    const generation = ++part.generation;
    // Read again from the last position sent: what was held of the stream before comes again.
    part.held = [];
    part.live = false;
    this.wake(part);
    // announce_start: the member's first message is a bookmark of where it starts, so a member read from now has a position at once.
    const args = { ...this.forwardArgs, cursor: part.pos ? encodeCursor({ [part.id]: part.pos }) : undefined, announce_start: true };
    const close = await this.deps.forward(part.id, this.caller, args, undefined, this.requestId, this.relay(part, generation));
    if (this.finished || generation !== part.generation) {
      close();
      return;
    }
    part.close = close;
    part.backoff = this.deps.retryMinMs ?? 250;
    if (part.down) {
      part.down = false;
      this.notice(part, 'members.up', `member '${part.id}' is back on this stream; its events follow from where they stopped`);
    }
  }

  /** Where a member's stream writes: into its queue, from which `release` sends in time order. */
  private relay(part: Part, generation: number): Sink {
    const stale = () => this.finished || generation !== part.generation;
    return {
      send: (text, id) => {
        if (stale()) return true;
        let e: PublicEvent;
        try {
          e = JSON.parse(text) as PublicEvent;
        } catch {
          return true;
        }
        const at = positionOf(id, part.id);
        if (e.type === 'reset') {
          if (at) part.pos = at;
          this.finish('reset', part, `${e.summary} (member '${part.id}'); the cursor carried resumes every member`);
          return true;
        }
        if (e.type === 'lagged' || e.type === 'closed') {
          this.finish(e.type, part, e.summary);
          return true;
        }
        if (e.type === 'bookmark' && e.data?.caught_up === true) part.live = true;
        const now = Date.now();
        // A bookmark says where the member is, not when something happened: at the head of its queue it goes out at once.
        const time = e.type === 'bookmark' ? -Infinity : Date.parse(e.time);
        part.held.push({ event: e, at, time: Number.isNaN(time) ? now : time, since: now });
        this.release();
        // While the reader's connection is full, the member's stream waits as it would on its own stream.
        return this.hasRoom(part);
      },
      drained: () => (stale() || this.hasRoom(part) ? Promise.resolve() : new Promise<void>((resolve) => part.room.push(resolve))),
      end: () => {
        if (stale()) return;
        if (part.id === this.selfId) {
          // This member's own stream ended without a last message (it failed): the whole stream ends.
          this.finish(undefined, part, '');
          return;
        }
        this.memberDown(part, undefined);
      },
    };
  }

  /** Sends held messages in time order while the reader's connection has room and the next one is due. */
  private release(): void {
    if (this.releasing) return;
    while (!this.finished) {
      const part = this.nextDue();
      if (!part) break;
      const h = part.held.shift()!;
      if (h.at) part.pos = h.at;
      h.event.cursor = combined(this.parts);
      if (!this.out.send(JSON.stringify(h.event), h.event.cursor)) {
        this.releasing = true;
        void this.out.drained().then(() => {
          this.releasing = false;
          this.release();
        });
        return;
      }
    }
    for (const p of this.parts.values()) if (this.hasRoom(p)) this.wake(p);
  }

  /** Whether a member's stream may write: the reader's connection has room and its queue is not full. */
  private hasRoom(part: Part): boolean {
    return !this.releasing && part.held.length < this.heldMax;
  }

  /**
   * The member whose first held message goes out next: the one with the
   * earliest time, unless a member still sending its backlog has nothing held
   * (it may have an earlier one): then none, until it sends, the hold ends or
   * a member's queue is full.
   */
  private nextDue(): Part | undefined {
    let first: Part | undefined;
    for (const p of this.parts.values()) if (p.held.length && (!first || p.held[0].time < first.held[0].time)) first = p;
    if (!first) return undefined;
    const waited = Date.now() - first.held[0].since;
    if (waited >= this.holdMs || first.held[0].time === -Infinity) return first;
    // A full queue does not wait: a member's part is made to wait only by the reader (a slow reader is `lagged`, a merge is not).
    for (const p of this.parts.values()) if (p.held.length >= this.heldMax) return first;
    for (const p of this.parts.values()) {
      if (p === first || p.down || p.live || p.held.length) continue;
      clearTimeout(this.holdTimer);
      this.holdTimer = setTimeout(() => this.release(), this.holdMs - waited);
      this.holdTimer.unref();
      return undefined;
    }
    return first;
  }

  /** Lets a member's stream go on writing. */
  private wake(part: Part): void {
    // Called for every member after each message sent: most have no waiter, and nothing is allocated for them.
    if (!part.room.length) return;
    for (const resolve of part.room.splice(0)) resolve();
  }

  /** A member's stream ended or could not be opened: said once, then opened again with a backoff. */
  private memberDown(part: Part, err: unknown): void {
    if (this.finished || !this.parts.has(part.id)) return;
    part.generation++;
    part.close?.();
    part.close = undefined;
    if (!part.down) {
      part.down = true;
      this.notice(part, 'members.down', `member '${part.id}' cannot be reached; its events follow from where they stopped when it is back`);
    }
    // What waited for it goes on.
    this.release();
    if (err) this.deps.log.debug({ req_id: this.requestId, peer_id: part.id, err: (err as Error).message }, 'members=all: member stream not open');
    const wait = part.backoff;
    part.backoff = Math.min(part.backoff * 2, this.deps.retryMaxMs ?? 5000);
    clearTimeout(part.retry);
    part.retry = setTimeout(() => {
      if (this.finished || !this.parts.has(part.id)) return;
      this.openOther(part).catch((e) => this.memberDown(part, e));
    }, wait);
    part.retry.unref();
  }

  /** Members that joined are read from now; members that left are dropped (their entry leaves the cursor). */
  private refreshMembers(): void {
    if (this.finished) return;
    const now = new Set(this.deps.members());
    now.add(this.selfId);
    for (const p of [...this.parts.values()]) {
      if (now.has(p.id)) continue;
      p.generation++;
      clearTimeout(p.retry);
      p.close?.();
      this.wake(p);
      this.parts.delete(p.id);
    }
    for (const id of now) {
      if (this.parts.has(id)) continue;
      const part = this.newPart(id);
      this.parts.set(id, part);
      this.openOther(part).catch((e) => this.memberDown(part, e));
    }
    this.release();
  }

  /** A message of this stream about a member (members.down / members.up), sent whatever the filters. */
  private notice(part: Part, type: 'members.down' | 'members.up', summary: string): void {
    this.sendOwn(part, { type, domain: 'members', resource: `peers/${part.id}`, actor: 'runtime', summary, data: { peer_id: part.id, stream: true } });
  }

  /** A message this stream makes itself (not a member's event): at `part`'s position, under the combined cursor. */
  private sendOwn(part: Part, m: Pick<PublicEvent, 'type' | 'domain' | 'resource' | 'actor' | 'summary' | 'data'>): void {
    const cursor = combined(this.parts);
    const msg: PublicEvent = { cursor, seq: part.pos?.seq ?? 0, node_id: part.id, time: new Date().toISOString(), ...m };
    this.out.send(JSON.stringify(msg), cursor);
  }

  /** Ends the stream: with a last control message (reset, lagged, closed) carrying the combined cursor, or none. */
  private finish(type: 'reset' | 'lagged' | 'closed' | undefined, part: Part, summary: string): void {
    if (this.finished) return;
    if (type) this.sendOwn(part, { type, domain: 'events', resource: '', actor: '', summary, data: {} });
    this.close();
    this.out.end();
  }

  /** Closes every member's stream (the reader went away, or the stream finished). */
  close(): void {
    this.finished = true;
    clearInterval(this.poll);
    clearTimeout(this.holdTimer);
    for (const p of this.parts.values()) {
      clearTimeout(p.retry);
      p.close?.();
      p.held = [];
      this.wake(p);
    }
  }
}

/** `p`, or a rejection (not a refusal) once `ms` have passed. */
function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(what)), ms);
    timer.unref();
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** A member's position in a single-member cursor (the id of a message of its stream). */
function positionOf(id: string, member: string): Position | undefined {
  if (!id) return undefined;
  try {
    return decodeCursor(id)[member];
  } catch {
    return undefined;
  }
}

/** A member's answer that refuses the caller (as it would refuse it on its own stream), not one that says it cannot be reached. */
function isRefusal(err: unknown): err is ApiError {
  return err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 404;
}

/**
 * Opens a `members=all` stream for a caller; answers a function that closes
 * it. Refusals (403 without a read scope, 400 for a bad filter or cursor,
 * 429, a member's refusal) come before anything is sent.
 */
export async function openAllMembers(
  deps: AllMembersDeps,
  caller: Caller,
  args: StreamArgs,
  lastEventId: string | undefined,
  requestId: string,
  sink: Sink,
): Promise<() => void> {
  requireSomeRead(caller);
  parseFilter(args);
  // Last-Event-ID is what a reconnecting EventSource sends on its own: the cursor argument wins when both are given.
  const start = args.cursor ? decodeCursor(args.cursor) : lastEventId ? decodeCursor(lastEventId, 'header Last-Event-ID') : undefined;
  const s = new AllMembersStream(deps, caller, args, requestId, sink);
  await s.open(start);
  return () => s.close();
}
