/**
 * One reader of this member's events, over any transport (a `Sink`).
 *
 * Live events wait in a bounded queue (`queueEvents`, `queueBytes`). When it
 * overflows, the queue is dropped and the reader is served from the store
 * instead (reads by seq range) until it has caught up; memory never grows
 * with the reader's backlog. A reader that stopped reading (its connection's
 * buffer is full) while more than `queueEvents` events are waiting for it
 * gets `lagged` and is closed: it resumes from its own last cursor and loses
 * nothing. A cursor older than retention, or from another epoch of the log
 * (a wiped data dir), gets `reset` carrying the head's cursor.
 */
import type { Caller } from '../lib/caller.js';
import { encodeCursor } from './cursor.js';
import { matches, visibleTo, type EventFilter } from './filter.js';
import type { EventLog } from './log.js';
import type { EventSettings } from './settings.js';
import type { PublicEvent, StoredEvent } from './types.js';

/** Where a subscription writes: one text per event. */
export interface Sink {
  /** Writes one message; false when the connection's buffer is full (wait for `drained`). */
  send(text: string, id: string): boolean;
  /** Resolves when the buffer has room again (or the connection closed). */
  drained(): Promise<void>;
  /** Ends the connection (after what was sent). */
  end(): void;
}

const PAGE = 256;

/** The cursor of one seq of this member's log. */
export function cursorAt(log: EventLog, seq: number): string {
  return encodeCursor({ [log.nodeId]: { epoch: log.epoch, seq } });
}

/** What a client receives: the stored event without who may read it, with its cursor. */
export function publicEvent(log: EventLog, e: StoredEvent): PublicEvent {
  return {
    cursor: cursorAt(log, e.seq),
    seq: e.seq,
    node_id: e.node_id,
    time: e.time,
    type: e.type,
    domain: e.domain,
    resource: e.resource,
    actor: e.actor,
    summary: e.summary,
    data: e.data,
  };
}

/** A message that is not an event of the log: bookmark, reset, lagged, closed. */
export function controlEvent(
  log: EventLog,
  type: 'bookmark' | 'reset' | 'lagged' | 'closed',
  seq: number,
  summary: string,
  data: Record<string, unknown> = {},
): PublicEvent {
  return {
    cursor: cursorAt(log, seq),
    seq,
    node_id: log.nodeId,
    time: new Date().toISOString(),
    type,
    domain: 'events',
    resource: '',
    actor: '',
    summary,
    data,
  };
}

/** Options of one reader. */
export interface SubscriptionOptions {
  /**
   * Send a `bookmark` with `data.caught_up` the first time the reader has
   * every event up to the head (its backlog is sent): a `members=all` stream
   * orders members' backlogs by time until each is caught up (all-members.ts).
   */
  announceCaughtUp?: boolean;
}

/** Serialised events, shared by every reader (a single member's cursor is the same for all). */
const texts = new WeakMap<StoredEvent, string>();
function textOf(log: EventLog, e: StoredEvent): string {
  let t = texts.get(e);
  if (t === undefined) {
    t = JSON.stringify(publicEvent(log, e));
    texts.set(e, t);
  }
  return t;
}

export class Subscription {
  /** The last seq handed to the sink or passed over. */
  private position: number;
  /** The last seq this subscription saw live (valid while it is not behind). */
  private seen: number;
  private queue: StoredEvent[] = [];
  private queuedBytes = 0;
  /** Served from the store rather than the queue. */
  private behind = true;
  private blocked = false;
  private pumping = false;
  private closed = false;
  private readonly unlisten: () => void;
  private readonly bookmarkTimer: NodeJS.Timeout;
  private announceCaughtUp: boolean;

  constructor(
    private readonly log: EventLog,
    readonly caller: Caller,
    private readonly filter: EventFilter,
    start: number,
    private readonly sink: Sink,
    private readonly settings: EventSettings,
    private readonly onClose: (s: Subscription) => void,
    options: SubscriptionOptions = {},
  ) {
    this.announceCaughtUp = options.announceCaughtUp === true;
    this.position = start;
    this.seen = start;
    this.unlisten = log.listen((e) => this.onEvent(e));
    this.bookmarkTimer = setInterval(() => this.bookmark(), settings.bookmarkMs);
    this.bookmarkTimer.unref();
    void this.pump();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private wants(e: StoredEvent): boolean {
    return visibleTo(e.acl, this.caller) && matches(this.filter, e);
  }

  private onEvent(e: StoredEvent): void {
    if (this.closed) return;
    if (this.behind) {
      // Served from the store, and not reading: past the bound it is told so, as a live reader would be.
      if (this.blocked && this.log.head - this.position > this.settings.queueEvents) {
        this.finish(
          'lagged',
          this.position,
          `this reader fell more than ${this.settings.queueEvents} events behind without reading; resume from its last cursor`,
        );
      }
      return;
    }
    if (e.seq <= this.seen) return;
    this.seen = e.seq;
    if (!this.wants(e)) {
      if (!this.queue.length && !this.pumping) this.position = e.seq;
      return;
    }
    const size = textOf(this.log, e).length;
    if (this.queue.length >= this.settings.queueEvents || this.queuedBytes + size > this.settings.queueBytes) {
      if (this.blocked) {
        this.finish(
          'lagged',
          this.position,
          `this reader fell more than ${this.settings.queueEvents} events behind without reading; resume from its last cursor`,
        );
        return;
      }
      // Read from the store from here on until caught up; nothing is held for this reader meanwhile.
      this.queue = [];
      this.queuedBytes = 0;
      this.behind = true;
    } else {
      this.queue.push(e);
      this.queuedBytes += size;
    }
    void this.pump();
  }

  /** Sends what is due: from the store while behind, else from the queue; waits while the sink is full. */
  private async pump(): Promise<void> {
    if (this.pumping || this.closed) return;
    this.pumping = true;
    try {
      while (!this.closed) {
        if (this.blocked) {
          await this.sink.drained();
          this.blocked = false;
          continue;
        }
        if (this.behind) {
          if (this.position < this.log.prunedThrough) {
            this.finish('reset', this.log.head, 'the cursor is older than the events retained; list what you need and resume from this cursor');
            return;
          }
          const upTo = this.log.head;
          const page = await this.log.read(this.position, PAGE, upTo);
          if (this.closed) return;
          for (const e of page) {
            this.position = e.seq;
            if (this.wants(e) && !this.write(textOf(this.log, e), e.seq)) break;
          }
          if (this.blocked) {
            // Still behind; how far is checked against the bound as events come.
            if (this.log.head - this.position > this.settings.queueEvents) {
              this.finish(
                'lagged',
                this.position,
                `this reader fell more than ${this.settings.queueEvents} events behind without reading; resume from its last cursor`,
              );
              return;
            }
            continue;
          }
          if (page.length < PAGE) this.position = Math.max(this.position, upTo);
          // Caught up: live events (every one after `position`) come through the queue from now on.
          if (this.position >= this.log.head) {
            this.behind = false;
            this.seen = this.position;
            if (this.announceCaughtUp) {
              this.announceCaughtUp = false;
              const mark = controlEvent(this.log, 'bookmark', this.position, 'caught up: live events from here', { caught_up: true });
              this.write(JSON.stringify(mark), this.position);
            }
          }
          continue;
        }
        const e = this.queue.shift();
        if (!e) {
          this.position = Math.max(this.position, this.seen);
          return;
        }
        const text = textOf(this.log, e);
        this.queuedBytes -= text.length;
        this.position = e.seq;
        this.write(text, e.seq);
      }
    } catch {
      this.close();
    } finally {
      this.pumping = false;
    }
  }

  private write(text: string, seq: number): boolean {
    const ok = this.sink.send(text, cursorAt(this.log, seq));
    if (!ok) this.blocked = true;
    return ok;
  }

  /** A `bookmark` with the cursor this reader has reached, when it is caught up (so a filtered reader moves on). */
  private bookmark(): void {
    if (this.closed || this.behind || this.queue.length || this.pumping || this.blocked) return;
    this.position = Math.max(this.position, this.seen);
    this.write(JSON.stringify(controlEvent(this.log, 'bookmark', this.position, 'the current cursor')), this.position);
  }

  /** Sends a last control event (reset, lagged, closed) and ends the stream. */
  finish(type: 'reset' | 'lagged' | 'closed', seq: number | undefined, summary: string): void {
    if (this.closed) return;
    seq ??= this.position;
    this.sink.send(JSON.stringify(controlEvent(this.log, type, seq, summary)), cursorAt(this.log, seq));
    this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unlisten();
    clearInterval(this.bookmarkTimer);
    this.queue = [];
    this.sink.end();
    this.onClose(this);
  }
}
