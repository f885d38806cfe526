/**
 * The event log: every event of this member, by seq, in the store (sublevel
 * `events`), written in the same batch as what it reports (a writer joins
 * its batch: `join`), and released to live readers in seq order once durable.
 *
 * Seq: strictly increasing per member, never reused. Seqs are handed out
 * from a block reserved durably ahead (`events_meta/mark`, synced before any
 * seq of the block is used); a restart, a `kill -9` or a power loss
 * continues after the reserved mark. Gaps are allowed (the rest of a block at
 * a restart; a batch that failed; a lazily written event a power loss took),
 * reuse never.
 *
 * Release: an event with seq n reaches live readers only when every lower
 * seq of this process is written or abandoned (the watermark, `head`), so a
 * reader never sees n+1 before n, and never an event whose batch could still
 * fail.
 *
 * Retention: events older than `maxAgeDays` and the oldest beyond
 * `maxEvents` are deleted in the background in bounded batches; the highest
 * deleted seq (`events_meta/pruned`) is written in the same batch, so a
 * cursor below it is answered `reset`.
 */
import crypto from 'node:crypto';
import { LAZY, SYNC, type BatchOp, type BatchParticipant, type Store, type Sub } from '../store/store.js';
import { DEFAULT_EVENT_SETTINGS, type EventSettings } from './settings.js';
import type { NewEvent, StoredEvent } from './types.js';

const SEQ_WIDTH = 16;
export const seqKey = (seq: number) => String(seq).padStart(SEQ_WIDTH, '0');
const PRUNE_CHUNK = 256;
const PENDING = Symbol('pending');

export type Listener = (e: StoredEvent) => void;

export class EventLog implements BatchParticipant<NewEvent | NewEvent[]> {
  private readonly events: Sub<StoredEvent>;
  private readonly meta: Sub<unknown>;
  private epochId = '';
  /** The next seq to hand out, and the highest one reserved durably. */
  private next = 1;
  private mark = 0;
  private reserving: Promise<void> | null = null;
  /** Seqs handed out and not yet released: the event once written, null once abandoned. */
  private readonly inflight = new Map<number, StoredEvent | null | typeof PENDING>();
  /** The next seq to release. */
  private releaseFrom = 1;
  private released = 0;
  private pruned = 0;
  private count = 0;
  private readonly listeners = new Set<Listener>();
  private pruneTimer: NodeJS.Timeout | null = null;
  private pruning: Promise<number> | null = null;
  private closed = false;

  constructor(
    private readonly store: Store,
    readonly nodeId: string,
    readonly settings: EventSettings = DEFAULT_EVENT_SETTINGS,
    private readonly now: () => number = Date.now,
  ) {
    this.events = store.sub<StoredEvent>('events');
    this.meta = store.sub<unknown>('events_meta');
  }

  /** Reads (or creates) the epoch and the reserved mark, and reserves the next block. */
  async init(): Promise<void> {
    const [epoch, mark, pruned] = await this.meta.getMany(['epoch', 'mark', 'pruned']);
    if (typeof epoch === 'string') this.epochId = epoch;
    else {
      this.epochId = crypto.randomBytes(9).toString('base64url');
      await this.meta.put('epoch', this.epochId, SYNC);
    }
    this.mark = typeof mark === 'number' ? mark : 0;
    this.pruned = typeof pruned === 'number' ? pruned : 0;
    // Every seq up to the old mark may have been handed out: the head starts there, the next seq after it.
    this.next = this.mark + 1;
    this.releaseFrom = this.next;
    this.released = this.mark;
    for await (const _k of this.events.keys()) this.count++;
    await this.reserve();
    this.schedulePrune(this.settings.pruneEveryMs);
    this.store.beforeClose(() => this.close());
  }

  /** The random id of this member's log (a new one when the data dir is new). */
  get epoch(): string {
    return this.epochId;
  }

  /** The highest released seq: every event up to it that exists is in the store and was published. */
  get head(): number {
    return this.released;
  }

  /** The highest seq deleted by retention (a cursor below it has lost events: `reset`). */
  get prunedThrough(): number {
    return this.pruned;
  }

  /** Events in the store (this process's count). */
  get size(): number {
    return this.count;
  }

  private reserve(): Promise<void> {
    this.reserving ??= (async () => {
      const target = Math.max(this.mark, this.next - 1) + this.settings.reserveBlock;
      await this.meta.put('mark', target, SYNC);
      this.mark = Math.max(this.mark, target);
    })().finally(() => {
      this.reserving = null;
    });
    return this.reserving;
  }

  /**
   * Adds one event (or several) to a writer's batch: `write` gets the ops to
   * put in its batch; once it resolves the events are released in seq order;
   * when it rejects their seqs are abandoned (a gap).
   */
  async join<T>(items: NewEvent | NewEvent[], write: (ops: BatchOp[]) => Promise<T>): Promise<T> {
    const list = Array.isArray(items) ? items : [items];
    while (this.next + list.length - 1 > this.mark) await this.reserve();
    const time = new Date(this.now()).toISOString();
    const recs: StoredEvent[] = list.map((e) => ({
      seq: this.next++,
      node_id: this.nodeId,
      time: e.time ?? time,
      type: e.type,
      domain: e.domain,
      resource: e.resource,
      actor: e.actor,
      summary: e.summary,
      data: e.data ?? {},
      acl: e.acl,
    }));
    for (const r of recs) this.inflight.set(r.seq, PENDING);
    // Reserve the next block before this one runs out, so that writers rarely wait for it.
    if (this.mark - this.next < this.settings.reserveBlock / 2) void this.reserve().catch(() => undefined);
    let result: T;
    try {
      result = await write(recs.map((r) => ({ type: 'put' as const, sub: this.events, key: seqKey(r.seq), value: r })));
    } catch (err) {
      for (const r of recs) this.inflight.set(r.seq, null);
      this.release();
      throw err;
    }
    this.count += recs.length;
    for (const r of recs) this.inflight.set(r.seq, r);
    this.release();
    if (this.count > this.settings.maxEvents + PRUNE_CHUNK) this.schedulePrune(0);
    return result;
  }

  /** Events written on their own (a state change that is not part of another write). */
  append(items: NewEvent | NewEvent[], durable = true): Promise<void> {
    return this.join(items, (ops) => this.store.batch(ops, durable ? SYNC : LAZY));
  }

  private release(): void {
    for (;;) {
      const v = this.inflight.get(this.releaseFrom);
      if (v === undefined || v === PENDING) break;
      this.inflight.delete(this.releaseFrom);
      this.released = this.releaseFrom;
      this.releaseFrom++;
      if (v) for (const l of this.listeners) l(v);
    }
  }

  /** Calls `fn` with every released event from now on (in seq order), until the returned function is called. */
  listen(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Released events after `after`, up to `limit` of them (and up to `upTo`, the head by default). */
  async read(after: number, limit: number, upTo = this.released): Promise<StoredEvent[]> {
    if (after >= upTo) return [];
    return this.events.values({ gt: seqKey(after), lte: seqKey(upTo), limit }).all();
  }

  // ---------------------------------------------------------------- retention

  private schedulePrune(ms: number): void {
    if (this.closed || (ms === 0 && this.pruneTimer && this.pruneSoon)) return;
    if (this.pruneTimer) clearTimeout(this.pruneTimer);
    this.pruneSoon = ms === 0;
    this.pruneTimer = setTimeout(() => {
      this.pruneTimer = null;
      void this.prune()
        .catch(() => undefined)
        .finally(() => this.schedulePrune(this.settings.pruneEveryMs));
    }, ms);
    this.pruneTimer.unref();
  }

  private pruneSoon = false;

  /** Deletes what retention no longer keeps, a chunk per batch; answers how many events it deleted. */
  prune(): Promise<number> {
    const run = (this.pruning ?? Promise.resolve(0)).then(() => this.pruneNow());
    this.pruning = run.catch(() => 0);
    return run;
  }

  private async pruneNow(): Promise<number> {
    const cutoff = this.settings.maxAgeDays > 0 ? this.now() - this.settings.maxAgeDays * 86_400_000 : undefined;
    let deleted = 0;
    while (!this.closed) {
      const excess = this.count - this.settings.maxEvents;
      const oldest = await this.events.values({ limit: PRUNE_CHUNK }).all();
      const doomed = oldest.filter((e, i) => i < excess || (cutoff !== undefined && Date.parse(e.time) < cutoff));
      // Only a prefix: retention deletes from the oldest end, so `pruned` covers every seq below it.
      let n = 0;
      while (n < doomed.length && doomed[n] === oldest[n]) n++;
      if (!n) break;
      const top = oldest[n - 1].seq;
      const ops: BatchOp[] = oldest.slice(0, n).map((e) => ({ type: 'del' as const, sub: this.events, key: seqKey(e.seq) }));
      ops.push({ type: 'put', sub: this.meta, key: 'pruned', value: top });
      // Not synced: a pruning lost to a power loss is done again.
      await this.store.batch(ops, LAZY);
      this.pruned = Math.max(this.pruned, top);
      this.count -= n;
      deleted += n;
      if (n < oldest.length) break;
      await new Promise((r) => setImmediate(r));
    }
    return deleted;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.pruneTimer) clearTimeout(this.pruneTimer);
    this.pruneTimer = null;
    await this.pruning;
    await this.reserving?.catch(() => undefined);
  }
}
