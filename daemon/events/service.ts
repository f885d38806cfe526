/**
 * The event stream's service: opens subscriptions and answers pages (long
 * polls), within the per-token limit; closes a revoked token's streams.
 */
import type { Caller } from '../lib/caller.js';
import { ApiError, badRequest } from '../lib/errors.js';
import { decodeCursor } from './cursor.js';
import { matches, parseFilter, requireSomeRead, visibleTo, type EventFilter } from './filter.js';
import type { EventLog } from './log.js';
import type { EventSettings } from './settings.js';
import { Subscription, controlEvent, cursorAt, publicEvent, type Sink, type SubscriptionOptions } from './subscription.js';
import type { PublicEvent } from './types.js';

export interface StreamArgs {
  cursor?: string;
  types?: string;
  resource?: string;
  task_id?: string;
}

export interface ListArgs extends StreamArgs {
  limit?: number;
  timeout_seconds?: number;
}

/** Where a reader starts: after `seq`, or with a `reset` (its cursor is from another epoch or older than retention). */
type Start = { seq: number } | { reset: true };

/** Whose streams count together: a token (of the member it came from, over the cluster). */
const streamKey = (caller: Caller) => (caller.transport === 'cluster' ? `${caller.origin}/${caller.tokenId}` : caller.tokenId);

/** How many stored events one page may pass over looking for matches (a narrow filter answers early, with a cursor that moved on). */
const SCAN_PER_PAGE = 10_000;

export class EventService {
  private readonly open = new Map<string, Set<object>>();
  private readonly subs = new Set<Subscription>();

  constructor(
    readonly log: EventLog,
    readonly settings: EventSettings,
  ) {}

  /** Where a cursor (or none: now for a stream, the oldest retained for a page) starts this member's reader. */
  start(cursor: string | undefined, fromNow: boolean, what = "argument 'cursor'"): Start {
    if (cursor === undefined || cursor === '') return { seq: fromNow ? this.log.head : Math.max(0, this.log.prunedThrough) };
    const c = decodeCursor(cursor, what);
    const mine = c[this.log.nodeId];
    if (!mine)
      throw badRequest(
        `${what} is a cursor of ${Object.keys(c)
          .map((n) => `'${n}'`)
          .join(', ')}, not of this member ('${this.log.nodeId}'); pass peer_id to read that member`,
      );
    if (mine.epoch !== this.log.epoch || mine.seq < this.log.prunedThrough) return { reset: true };
    return { seq: mine.seq };
  }

  /** Counts an open stream (or waiting long poll) of the caller's token; 429 past the limit. */
  private admit(caller: Caller, what: object): () => void {
    const key = streamKey(caller);
    const set = this.open.get(key) ?? new Set<object>();
    if (set.size >= this.settings.maxStreamsPerToken) throw this.overLimit(caller, set.size);
    set.add(what);
    this.open.set(key, set);
    return () => {
      set.delete(what);
      if (!set.size) this.open.delete(key);
    };
  }

  /**
   * The refusals `openStream` would answer (403, 400, 429), checked before a
   * transport commits to the stream (a WebSocket handshake refused with its
   * status rather than a socket closed after it).
   */
  precheck(caller: Caller, args: StreamArgs, lastEventId?: string): void {
    requireSomeRead(caller);
    parseFilter(args);
    if (args.cursor) this.start(args.cursor, true);
    else this.start(lastEventId, true, 'header Last-Event-ID');
    const n = this.open.get(streamKey(caller))?.size ?? 0;
    if (n >= this.settings.maxStreamsPerToken) throw this.overLimit(caller, n);
  }

  private overLimit(caller: Caller, n: number): ApiError {
    return new ApiError(
      429,
      `token '${caller.tokenName}' already holds ${n} open event streams, the limit (events.max_streams_per_token = ${this.settings.maxStreamsPerToken}); close one first`,
    );
  }

  /**
   * Opens a stream for a caller. The arguments are checked (400/403/429)
   * before anything is sent; `sink` then receives every event after the start.
   */
  openStream(caller: Caller, args: StreamArgs, sink: Sink, lastEventId?: string, options?: SubscriptionOptions): Subscription | undefined {
    requireSomeRead(caller);
    const filter = parseFilter(args);
    // Last-Event-ID is what a reconnecting EventSource sends on its own: the cursor argument wins when both are given.
    const start = args.cursor ? this.start(args.cursor, true) : this.start(lastEventId, true, 'header Last-Event-ID');
    const token = {};
    const leave = this.admit(caller, token);
    if ('reset' in start) {
      leave();
      sink.send(
        JSON.stringify(
          controlEvent(
            this.log,
            'reset',
            this.log.head,
            'the cursor is older than the events retained (or from a log that was wiped); list what you need and resume from this cursor',
          ),
        ),
        cursorAt(this.log, this.log.head),
      );
      sink.end();
      return undefined;
    }
    const sub = new Subscription(
      this.log,
      caller,
      filter,
      start.seq,
      sink,
      this.settings,
      (s) => {
        this.subs.delete(s);
        leave();
      },
      options,
    );
    if (!sub.isClosed) this.subs.add(sub);
    return sub;
  }

  /** One page of events after the cursor; with `timeout_seconds`, waits for the first match when there is none yet. */
  async list(caller: Caller, args: ListArgs, signal?: AbortSignal): Promise<{ events: PublicEvent[]; next_cursor: string }> {
    requireSomeRead(caller);
    const filter = parseFilter(args);
    const limit = args.limit ?? 100;
    const start = this.start(args.cursor, false);
    if ('reset' in start) {
      const head = this.log.head;
      return {
        events: [
          controlEvent(
            this.log,
            'reset',
            head,
            'the cursor is older than the events retained (or from a log that was wiped); list what you need and resume from this cursor',
          ),
        ],
        next_cursor: cursorAt(this.log, head),
      };
    }
    const first = await this.page(caller, filter, start.seq, limit);
    if (first.events.length || !args.timeout_seconds || first.position < this.log.head) return this.answer(first);
    // Long poll: wait for the first matching event, or the timeout.
    const leave = this.admit(caller, {});
    try {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          unlisten();
          signal?.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, args.timeout_seconds! * 1000);
        const unlisten = this.log.listen((e) => {
          if (visibleTo(e.acl, caller) && matches(filter, e)) done();
        });
        signal?.addEventListener('abort', done);
      });
    } finally {
      leave();
    }
    return this.answer(await this.page(caller, filter, first.position, limit));
  }

  private answer(p: { events: PublicEvent[]; position: number }): { events: PublicEvent[]; next_cursor: string } {
    return { events: p.events, next_cursor: cursorAt(this.log, p.position) };
  }

  private async page(caller: Caller, filter: EventFilter, after: number, limit: number): Promise<{ events: PublicEvent[]; position: number }> {
    const events: PublicEvent[] = [];
    let position = after;
    let scanned = 0;
    const upTo = this.log.head;
    while (events.length < limit && scanned < SCAN_PER_PAGE) {
      const batch = await this.log.read(position, 256, upTo);
      for (const e of batch) {
        position = e.seq;
        scanned++;
        if (visibleTo(e.acl, caller) && matches(filter, e)) {
          events.push(publicEvent(this.log, e));
          if (events.length >= limit) break;
        }
      }
      if (batch.length < 256 && events.length < limit) {
        position = Math.max(position, upTo);
        break;
      }
    }
    return { events, position };
  }

  /** Closes every stream of a token (it was revoked). */
  closeToken(tokenId: string): void {
    for (const s of [...this.subs]) if (s.caller.tokenId === tokenId) s.finish('closed', undefined, 'the token of this stream was revoked');
  }

  /** Streams open now (tests, host-status). */
  get streams(): number {
    return this.subs.size;
  }

  close(): void {
    for (const s of [...this.subs]) s.close();
  }
}
