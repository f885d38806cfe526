/**
 * The activity log: rows, their indexes, and their retention.
 *
 * Rows (sublevel `activity`) are keyed by time: zero-padded epoch
 * milliseconds, a per-process sequence and a random tail for uniqueness
 * across restarts, so since/until/cursor are bounds of one reverse range
 * scan, newest first.
 *
 * Indexes (sublevel `activity_ix`), written in the same batch as their row:
 *   a|<key>                         every row
 *   c|<category>|<key>              by category
 *   s|<severity>|<key>              by severity
 *   cs|<category>|<severity>|<key>  by both
 * A filtered query walks the narrowest of them over its time range, so it
 * reads only matching keys. Each entry's value is the row's search signature
 * (grams.ts): a search reads the entries of the blocks whose bloom may hold
 * the needle, fetches only the rows whose signature covers it, and checks the
 * real text.
 *
 * Blocks: consecutive rows, BLOCK_ROWS at a time, each with a bloom of its
 * rows' grams. Sealed blocks are stored (sublevel `activity_blocks`) in the
 * batch of the row that fills them, with their rows' list (sublevel
 * `activity_block_rows`: each row's key and signature, in one record), so
 * that a search without a category or severity reads one record per block,
 * many blocks per read, instead of seeking into the index once per block; the open block is rebuilt at start from
 * the rows after the last sealed one. Every block covers a disjoint key range
 * [first, last]; a row whose key falls in a sealed block's range (a clock that
 * went back) is added to that block, whose record is rewritten in the row's
 * batch, and whose rows' list is dropped (a search then walks that block's
 * index entries instead).
 *
 * Retention (docs/api-decisions.md, "Activity"): rows older than
 * `maxAgeDays` and the oldest rows beyond `maxRows` are deleted, with their
 * index entries, in the background every `pruneEveryMs` and soon after the
 * log grows a block past `maxRows`.
 */
import crypto from 'node:crypto';
import type { AbstractSublevel } from 'abstract-level';
import type { Level } from 'level';
import { LAZY, SYNC, type BatchOp, type BatchParticipant, type Store, type Sub } from '../store/store.js';
import { activityEvent } from '../events/sources.js';
import type { NewEvent } from '../events/types.js';
import { DEFAULT_ACTIVITY_RETENTION, type ActivityRetention } from '../config.js';
import type { ActivityRow, NewActivity } from '../../api/registry/types.js';
import { badRequest } from '../lib/errors.js';
import { SerialQueue } from '../lib/serial.js';
import { BLOOM_BITS, Bloom, covers, decodeSignature, encodeSignature, needleHashes, needleMask, signatureOf, type Signature } from './grams.js';

export type { ActivityRow, NewActivity } from '../../api/registry/types.js';

export interface ActivityQuery {
  category?: string;
  severity?: string;
  search?: string;
  since?: string;
  until?: string;
  limit?: number;
  cursor?: string;
}

export interface ActivityPage {
  events: ActivityRow[];
  next_cursor: string | null;
}

export type Retention = ActivityRetention;
export const DEFAULT_RETENTION: Retention = DEFAULT_ACTIVITY_RETENTION;
/** Rows per block of the search index. */
export const BLOCK_ROWS = 64;

/** Bounds on one row, so that no caller can make one row large (what is cut says so). */
export const ROW_LIMITS = { summary: 1000, target: 500, actor: 128, metadata: 4096, metadataString: 512 };

const pad = (n: number, w: number) => String(n).padStart(w, '0');
const keyPrefix = (ms: number) => pad(Math.max(0, ms), 15);
/** Above every key that starts with `key` and below every larger key (keys have one length). */
const after = (key: string) => key + '~';
const KEY_RE = /^\d{15}\.\d{6}\.[0-9a-f]{6}$/;
const INDEX_VERSION = 4;
/** Names the layout of the indexes (a cache of a filled log must match it). */
export const INDEX_FORMAT = `v${INDEX_VERSION}-rows${BLOCK_ROWS}-bloom${BLOOM_BITS}`;
/**
 * The format before this one: the same indexes and blocks, with the rows'
 * lists in JSON. A log in it has only its lists rewritten at start
 * (`convertLists`), not every index rebuilt.
 */
const LISTS_IN_JSON_FORMAT = `v3-rows${BLOCK_ROWS}-bloom${BLOOM_BITS}`;
const CHUNK = 256;

interface Block {
  id: string;
  first: string;
  last: string;
  count: number;
  bloom: Bloom;
  /** The rows, while the block is open (sealed blocks keep theirs in the store). */
  entries: RowEntry[] | null;
}

/** A row of a block: what a search needs of it before fetching it. */
interface RowEntry {
  key: string;
  sig: Signature;
}

/**
 * A sealed block's rows' list in the JSON of index format v3 (keys, and the
 * signatures end to end in base64url): still read, for a list a conversion
 * has not reached yet. Lists are written in binary (`encodeRows`).
 */
interface JsonRows {
  keys: string[];
  sigs: string;
}

interface StoredBlock {
  id: string;
  first: string;
  last: string;
  count: number;
  bloom: string;
}

type Ix = AbstractSublevel<Level<string, unknown>, string | Buffer | Uint8Array, string, string>;
type Op = BatchOp;

export class ActivityLog {
  private readonly rows: Sub<ActivityRow>;
  private readonly ix: Ix;
  private readonly blockSub: Sub<StoredBlock>;
  /** Rows' lists as bytes (`encodeRows`): a search reads many of them, and JSON made it parse every key of every block. */
  private readonly blockRows: AbstractSublevel<Level<string, unknown>, string | Buffer | Uint8Array, string, Buffer>;
  private readonly meta: Sub<unknown>;
  private lastMs = 0;
  private seq = 0;
  /** Random bytes for the keys' tails, drawn a thousand at a time (one draw per row costs more than the row). */
  private random: Buffer = Buffer.alloc(0);
  private randomAt = 0;
  /** Sealed blocks, oldest first, disjoint ranges. */
  private blocks: Block[] = [];
  /** The sealed blocks' blooms by word, for the walk of a search (made when first needed, then kept in step; null: to make). */
  private columns: BloomColumns | null = null;
  /** The block being filled: rows with keys above the last sealed block's. */
  private open: Block = emptyBlock('open');
  private nextBlockId = 1;
  private loaded = false;
  private readonly ready: Promise<void>;
  /** Writes that rewrite a block record, one at a time, so a record is never overwritten by an older state. */
  private readonly blockWrites = new SerialQueue();
  private pruneTimer: NodeJS.Timeout | null = null;
  private pruning: Promise<void> | null = null;
  private pruneSoon = false;
  private closed = false;
  private readonly closeHooks: Array<() => void | Promise<void>> = [];

  constructor(
    private readonly store: Store,
    readonly retention: Retention = DEFAULT_RETENTION,
    private readonly now: () => number = Date.now,
    /** The event log: each row's `activity` event is written in the row's batch. */
    private readonly events?: BatchParticipant<NewEvent | NewEvent[]>,
  ) {
    this.rows = store.sub<ActivityRow>('activity');
    this.ix = store.db.sublevel<string, string>('activity_ix', { valueEncoding: 'utf8' }) as unknown as Ix;
    this.blockSub = store.sub<StoredBlock>('activity_blocks');
    this.blockRows = store.db.sublevel<string, Buffer>('activity_block_rows', { valueEncoding: 'buffer' }) as unknown as typeof this.blockRows;
    this.meta = store.sub<unknown>('activity_meta');
    this.ready = this.load();
    // A failed load is reported by the calls that wait for it.
    this.ready.catch(() => undefined);
    store.beforeClose(() => this.close());
  }

  /** Rows in the log (exact for this process's writes; rebuilt at start). */
  get size(): number {
    return this.blocks.reduce((n, b) => n + b.count, this.open.count);
  }

  /** Runs `fn` before the log closes (writers with pending rows, like summaries of refused calls). */
  beforeClose(fn: () => void | Promise<void>): void {
    this.closeHooks.push(fn);
  }

  /** Waits until the indexes are loaded (or rebuilt from the rows, once, after an upgrade). */
  async init(): Promise<void> {
    await this.ready;
  }

  private async load(): Promise<void> {
    const format = await this.meta.get('index_format');
    if (format === LISTS_IN_JSON_FORMAT) await this.convertLists();
    if (format === INDEX_FORMAT || format === LISTS_IN_JSON_FORMAT) {
      for (const b of await this.blockSub.values().all()) {
        this.blocks.push({ id: b.id, first: b.first, last: b.last, count: b.count, bloom: Bloom.decode(b.bloom), entries: null });
        this.nextBlockId = Math.max(this.nextBlockId, Number(b.id.slice(1)) + 1);
      }
      this.blocks.sort((x, y) => (x.first < y.first ? -1 : 1));
      this.columns = null;
      // The open block: the rows after the last sealed one (fewer than a block, unless a crash came at a seal).
      const lastSealed = this.blocks.at(-1)?.last;
      for await (const [key, row] of this.rows.iterator(lastSealed ? { gt: lastSealed } : {})) {
        this.addToOpen(key, row);
        if (this.open.count >= BLOCK_ROWS) await this.writeBlock(this.seal());
      }
    } else {
      await this.rebuild();
    }
    this.loaded = true;
    this.schedulePrune(this.retention.pruneEveryMs);
  }

  /**
   * Rewrites every rows' list of a v3 log in binary, then marks the log v4.
   * Crash-safe at any point: a list is one record rewritten with the same
   * rows, a search reads a list in either form, and the mark is written
   * (synced) only after the last list, so a cut-short conversion runs again.
   */
  private async convertLists(): Promise<void> {
    let ops: Op[] = [];
    for await (const [id, raw] of this.blockRows.iterator()) {
      if (raw[0] !== JSON_OPEN) continue;
      const json = JSON.parse(raw.toString('utf8')) as JsonRows;
      const sigs = Buffer.from(json.sigs, 'base64url');
      const entries = json.keys.map((key, i) => ({ key, sig: sigs.length >= (i + 1) * 16 ? readSig(sigs, i * 16) : FULL_SIG }));
      ops.push({ type: 'put', sub: this.blockRows, key: id, value: encodeRows(entries) });
      if (ops.length >= CHUNK) {
        await this.store.batch(ops, LAZY);
        ops = [];
      }
    }
    ops.push({ type: 'put', sub: this.meta, key: 'index_format', value: INDEX_FORMAT });
    await this.store.batch(ops, SYNC);
  }

  /** Writes every index entry and block from the rows (a log written before the indexes existed). */
  private async rebuild(): Promise<void> {
    await this.ix.clear();
    await this.blockSub.clear();
    await this.blockRows.clear();
    this.blocks = [];
    this.columns = null;
    this.open = emptyBlock(this.newBlockId());
    let ops: Op[] = [];
    for await (const [key, row] of this.rows.iterator()) {
      this.addToOpen(key, row);
      ops.push(...this.indexOps(key, row, 'put'));
      if (this.open.count >= BLOCK_ROWS) ops.push(...this.sealOps(this.seal()));
      if (ops.length >= CHUNK * 5) {
        await this.store.batch(ops, LAZY);
        ops = [];
      }
    }
    ops.push({ type: 'put', sub: this.meta, key: 'index_format', value: INDEX_FORMAT });
    await this.store.batch(ops, SYNC);
  }

  private newBlockId(): string {
    return 'b' + pad(this.nextBlockId++, 12);
  }

  private nextKey(ms: number): string {
    if (ms === this.lastMs) this.seq++;
    else {
      this.lastMs = ms;
      this.seq = 0;
    }
    if (this.randomAt + 3 > this.random.length) {
      this.random = crypto.randomBytes(3 * 1024);
      this.randomAt = 0;
    }
    const tail = this.random.toString('hex', this.randomAt, (this.randomAt += 3));
    return `${keyPrefix(ms)}.${pad(this.seq, 6)}.${tail}`;
  }

  /**
   * Writes one row with its index entries in one batch. `durable` (the
   * default) waits until it is synced to the disk: an answered call's row
   * survives a power loss (docs/durability.md).
   */
  async record(row: NewActivity, opts: { durable?: boolean } = {}): Promise<ActivityRow> {
    if (!this.loaded) await this.ready;
    const ts = row.timestamp ? new Date(row.timestamp) : new Date(this.now());
    const key = this.nextKey(ts.getTime());
    const full: ActivityRow = { ...bounded(row), id: key, timestamp: ts.toISOString() };
    const ops: Op[] = [{ type: 'put', sub: this.rows, key, value: full }, ...this.indexOps(key, full, 'put')];
    const sync = opts.durable === false ? LAZY : SYNC;
    const lastSealed = this.blocks.at(-1);
    let write: (extra: BatchOp[]) => Promise<void>;
    if (!lastSealed || key > lastSealed.last) {
      this.addToOpen(key, full);
      if (this.open.count < BLOCK_ROWS) {
        write = (extra) => this.store.batch([...ops, ...extra], sync);
      } else {
        const sealOps = this.sealOps(this.seal());
        write = (extra) => this.blockWrites.run(() => this.store.batch([...ops, ...sealOps, ...extra], sync));
      }
    } else {
      // A key inside the sealed blocks' range (the clock went back, or a row with an old timestamp).
      const block = this.addToSealed(key, full);
      write = (extra) => this.blockWrites.run(() => this.store.batch([...ops, this.blockOp(block), this.dropRows(block), ...extra], sync));
    }
    await (this.events ? this.events.join(activityEvent(full), write) : write([]));
    if (this.size > this.retention.maxRows + BLOCK_ROWS) this.schedulePrune(0);
    return full;
  }

  /** Several rows in one batch, not synced (imports and benchmarks). */
  async recordMany(rows: NewActivity[]): Promise<void> {
    if (!this.loaded) await this.ready;
    const ops: Op[] = [];
    const written: ActivityRow[] = [];
    for (const row of rows) {
      const ts = row.timestamp ? new Date(row.timestamp) : new Date(this.now());
      const key = this.nextKey(ts.getTime());
      const full: ActivityRow = { ...bounded(row), id: key, timestamp: ts.toISOString() };
      ops.push({ type: 'put', sub: this.rows, key, value: full }, ...this.indexOps(key, full, 'put'));
      written.push(full);
      const lastSealed = this.blocks.at(-1);
      if (!lastSealed || key > lastSealed.last) {
        this.addToOpen(key, full);
        if (this.open.count >= BLOCK_ROWS) ops.push(...this.sealOps(this.seal()));
      } else {
        const block = this.addToSealed(key, full);
        ops.push(this.blockOp(block), this.dropRows(block));
      }
    }
    const write = (extra: BatchOp[]) => this.blockWrites.run(() => this.store.batch([...ops, ...extra], LAZY));
    await (this.events ? this.events.join(written.map(activityEvent), write) : write([]));
  }

  private indexOps(key: string, row: Pick<ActivityRow, 'category' | 'severity' | 'summary' | 'target'>, type: 'put' | 'del'): Op[] {
    const keys = [`a|${key}`, `c|${row.category}|${key}`, `s|${row.severity}|${key}`, `cs|${row.category}|${row.severity}|${key}`];
    if (type === 'del') return keys.map((k) => ({ type, sub: this.ix, key: k }));
    const sig = encodeSignature(signatureOf(searchable(row)));
    return keys.map((k) => ({ type, sub: this.ix, key: k, value: sig }));
  }

  private addToOpen(key: string, row: ActivityRow): void {
    if (this.open.count === 0) this.open = { ...emptyBlock(this.open.id === 'open' ? this.newBlockId() : this.open.id), first: key };
    addRow(this.open, key, row);
    // In key order: a row may come in below the open block's newest one (a clock that went back a little).
    const entries = this.open.entries!;
    let at = entries.length;
    while (at > 0 && entries[at - 1].key > key) at--;
    entries.splice(at, 0, { key, sig: signatureOf(searchable(row)) });
  }

  /** Seals the open block (full); the next row starts a new one. */
  private seal(): Block {
    const sealed = this.open;
    this.blocks.push(sealed);
    this.columns?.push(sealed.bloom.bits);
    this.open = emptyBlock(this.newBlockId());
    return sealed;
  }

  /** The sealed block whose range takes `key` (below the last sealed key). */
  private sealedBlockFor(key: string): Block {
    return this.blocks[this.sealedIndexFor(key)];
  }

  private sealedIndexFor(key: string): number {
    let lo = 0;
    let hi = this.blocks.length - 1;
    // The last block whose first key is <= key; keys below every block go to the first one.
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.blocks[mid].first <= key) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** Adds a row whose key falls in the sealed blocks' range to its block (bloom and its column copy too). */
  private addToSealed(key: string, row: ActivityRow): Block {
    const i = this.sealedIndexFor(key);
    const block = this.blocks[i];
    addRow(block, key, row);
    this.columns?.set(i, block.bloom.bits);
    return block;
  }

  private blockOp(b: Block): Op {
    const value: StoredBlock = { id: b.id, first: b.first, last: b.last, count: b.count, bloom: b.bloom.encode() };
    return { type: 'put', sub: this.blockSub, key: b.id, value };
  }

  /** The writes that store a block just sealed: its record and its rows' list (which then leaves memory). */
  private sealOps(b: Block): Op[] {
    const value = encodeRows(b.entries ?? []);
    b.entries = null;
    return [this.blockOp(b), { type: 'put', sub: this.blockRows, key: b.id, value }];
  }

  /** A sealed block took a row out of order: its rows' list is dropped (a search walks its index entries). */
  private dropRows(b: Block): Op {
    return { type: 'del', sub: this.blockRows, key: b.id };
  }

  private async writeBlock(b: Block): Promise<void> {
    const ops = this.sealOps(b);
    await this.blockWrites.run(() => this.store.batch(ops, LAZY));
  }

  // ---------------------------------------------------------------- queries

  async query(q: ActivityQuery): Promise<ActivityPage> {
    if (!this.loaded) await this.ready;
    const limit = q.limit ?? 50;
    let lo: string | undefined;
    let hi: string | undefined;
    if (q.until) hi = keyPrefix(parseTime(q.until, 'until') + 1);
    if (q.since) lo = keyPrefix(parseTime(q.since, 'since'));
    if (q.cursor) {
      const c = decodeCursor(q.cursor);
      if (hi === undefined || c < hi) hi = c;
    }
    const needle = q.search ? q.search.toLowerCase() : '';
    const prefix =
      q.category && q.severity ? `cs|${q.category}|${q.severity}|` : q.category ? `c|${q.category}|` : q.severity ? `s|${q.severity}|` : needle ? 'a|' : '';
    const found = !prefix
      ? await this.rowsIn(lo, hi, limit + 1)
      : !needle
        ? await this.indexedIn(prefix, lo, hi, limit + 1)
        : prefix === 'a|'
          ? await this.searchIn(needle, lo, hi, limit + 1)
          : await this.searchIndexIn(prefix, needle, lo, hi, limit + 1);
    const events = found.slice(0, limit);
    // One more match exists beyond this page: the cursor resumes after the page's last row.
    return { events, next_cursor: found.length > limit ? encodeCursor(events[events.length - 1].id) : null };
  }

  /** Newest rows in [lo, hi), no filter. */
  private async rowsIn(lo: string | undefined, hi: string | undefined, n: number): Promise<ActivityRow[]> {
    return this.rows.values({ ...range(lo, hi), reverse: true, limit: n }).all();
  }

  /** Newest rows of an index in [lo, hi). */
  private async indexedIn(prefix: string, lo: string | undefined, hi: string | undefined, n: number): Promise<ActivityRow[]> {
    const keys = await this.ix.keys({ ...indexRange(prefix, lo, hi), reverse: true, limit: n }).all();
    return this.fetch(keys.map((k) => k.slice(prefix.length)));
  }

  /**
   * Newest rows in [lo, hi) whose summary or target contains `needle`, any
   * category and severity. Only the blocks whose bloom may hold the needle are
   * looked at, newest first, in batches: one read fetches the rows' lists of
   * a batch of blocks, and of their rows only those whose signature covers
   * the needle's are fetched and checked against the real text. A block
   * without a list (it took a row out of order) has its index entries walked
   * instead.
   *
   * Batches: 4 blocks first (a common word fills the page from the newest
   * ones); then as many as the candidates found per block so far say the
   * page still needs, with a margin, up to 64: a word in one block of 30
   * takes two reads of lists where doubling batches took four.
   */
  private async searchIn(needle: string, lo: string | undefined, hi: string | undefined, n: number): Promise<ActivityRow[]> {
    const prefix = 'a|';
    const mask = needleMask(needle);
    const probes = bloomProbes(needleHashes(needle));
    const out: ActivityRow[] = [];
    let stream: EntryStream | undefined;
    let candidates: string[] = [];
    /** Checks the candidates once they can fill the page; true once the page is full. */
    const enough = async (force: boolean): Promise<boolean> => {
      if (!force && candidates.length < n - out.length) return false;
      const done = await this.check(candidates, needle, out, n);
      candidates = [];
      return done;
    };
    try {
      let batch: Span[] = [];
      let batchSize = 4;
      let blocksRead = 0;
      let found = 0;
      const runBatch = async (): Promise<boolean> => {
        const sealed = batch.filter((sp) => sp.block !== this.open);
        const lists = sealed.length ? await this.blockRows.getMany(sealed.map((sp) => sp.block.id)) : [];
        const byId = new Map(sealed.map((sp, i) => [sp.block.id, lists[i]]));
        for (const span of batch) {
          const before = candidates.length;
          if (span.block === this.open) openCandidates(this.open.entries ?? [], span, mask, candidates);
          else {
            const list = rowsView(byId.get(span.block.id));
            if (list) list.candidates(span, mask, candidates);
            else {
              stream ??= new EntryStream(this.ix.iterator({ ...indexRange(prefix, lo, undefined), reverse: true }));
              await this.walkIndex(stream, prefix, span, mask, candidates);
            }
          }
          found += candidates.length - before;
          blocksRead++;
          if (await enough(false)) return true;
        }
        batch = [];
        // What the page still needs at the rate seen so far, a quarter more; 64 when nothing was seen yet.
        const missing = n - out.length - candidates.length;
        batchSize = found ? Math.min(64, Math.max(4, Math.ceil(((missing * blocksRead) / found) * 1.25))) : 64;
        return false;
      };
      for (const span of this.spans(lo, hi, probes)) {
        batch.push(span);
        if (batch.length >= batchSize && (await runBatch())) return out;
      }
      if (batch.length && (await runBatch())) return out;
      await enough(true);
      return out;
    } finally {
      await stream?.close();
    }
  }

  /**
   * Newest rows of a category or severity index in [lo, hi) whose summary or
   * target contains `needle`. Such an index holds only the rows of its kind,
   * so its entries are read rather than the blocks' lists: only the blocks whose bloom may hold the needle are read: one
   * iterator seeks from one such block to the next, newest first; of their
   * entries, only those whose signature covers the needle's are fetched and
   * checked against the real text.
   */
  private async searchIndexIn(prefix: string, needle: string, lo: string | undefined, hi: string | undefined, n: number): Promise<ActivityRow[]> {
    const mask = needleMask(needle);
    const probes = bloomProbes(needleHashes(needle));
    const out: ActivityRow[] = [];
    // The iterator's range must hold every seek target (a target outside it ends the iterator): its
    // upper end is the index's, and `until`/the cursor are applied entry by entry.
    const stream = new EntryStream(this.ix.iterator({ ...indexRange(prefix, lo, undefined), reverse: true }));
    try {
      let candidates: string[] = [];
      let scanned = -2; // position of the last block read: the stream stands right below it
      for (const span of this.spans(lo, hi, probes)) {
        const ceiling = prefix + (span.lt ?? TOP);
        const floor = prefix + (span.gte ?? '');
        // Blocks were skipped since the last one read: jump over them.
        if (scanned !== span.index + 1) stream.seek(ceiling, span.block.count + 1);
        scanned = span.index;
        for (;;) {
          const entry = await stream.next();
          if (!entry) break;
          const [k, sig] = entry;
          if (k < floor) {
            stream.unread();
            break;
          }
          if (k >= ceiling) continue; // the exclusive upper end itself (a cursor's row)
          if (covers(decodeSignature(sig), mask)) candidates.push(k.slice(prefix.length));
          if (candidates.length >= CHUNK) {
            if (await this.check(candidates, needle, out, n)) return out;
            candidates = [];
          }
        }
        // Rows are checked a block at a time once there are enough candidates to fill the page.
        if (candidates.length >= n - out.length) {
          if (await this.check(candidates, needle, out, n)) return out;
          candidates = [];
        }
      }
      await this.check(candidates, needle, out, n);
      return out;
    } finally {
      await stream.close();
    }
  }

  /** The entries of one block's part of an index whose signature covers `mask`, newest first, into `candidates`. */
  private async walkIndex(stream: EntryStream, prefix: string, span: Span, mask: Signature, candidates: string[]): Promise<void> {
    const ceiling = prefix + (span.lt ?? TOP);
    const floor = prefix + (span.gte ?? '');
    stream.seek(ceiling, span.block.count + 1);
    for (;;) {
      const entry = await stream.next();
      if (!entry) return;
      const [k, sig] = entry;
      if (k < floor) return;
      if (k >= ceiling) continue; // the exclusive upper end itself (a cursor's row)
      if (covers(decodeSignature(sig), mask)) candidates.push(k.slice(prefix.length));
    }
  }

  /** Fetches candidate rows, keeps those that contain `needle`; true once `out` holds `n`. */
  private async check(keys: string[], needle: string, out: ActivityRow[], n: number): Promise<boolean> {
    for (const row of await this.fetch(keys)) {
      if (!row.summary.toLowerCase().includes(needle) && !row.target.toLowerCase().includes(needle)) continue;
      out.push(row);
      if (out.length >= n) return true;
    }
    return false;
  }

  /**
   * The blocks that meet [lo, hi) and whose bloom has every bit of `probes`,
   * newest first, each with the part of its key range inside [lo, hi) (`gte`
   * inclusive, `lt` exclusive, undefined: unbounded) and its position counted
   * from the newest block (consecutive positions: adjacent blocks). A rare
   * word walks every block's bloom: the probes' words and bits are worked out
   * once per query, not once per block.
   */
  private *spans(lo: string | undefined, hi: string | undefined, probes: Int32Array): Generator<Span> {
    const blocks = this.blocks;
    const lastSealed = blocks.at(-1);
    if (this.open.count && bloomHas(this.open.bloom.bits, probes)) {
      const gte = maxKey(lo, lastSealed ? after(lastSealed.last) : undefined);
      if (hi === undefined || gte === undefined || gte < hi) yield { block: this.open, index: blocks.length, gte, lt: hi };
    }
    // The newest sealed block that starts below `hi`, and the oldest that ends at or above `lo` (blocks are in key order).
    let start = blocks.length - 1;
    if (hi !== undefined) {
      let low = 0;
      let high = blocks.length - 1;
      start = -1;
      while (low <= high) {
        const mid = (low + high) >> 1;
        if (blocks[mid].first < hi) {
          start = mid;
          low = mid + 1;
        } else high = mid - 1;
      }
    }
    let end = 0;
    if (lo !== undefined) {
      let low = 0;
      let high = blocks.length;
      while (low < high) {
        const mid = (low + high) >> 1;
        if (blocks[mid].last < lo) low = mid + 1;
        else high = mid;
      }
      end = low;
    }
    // The walk reads the blooms' words by column, block after block: no block object is touched
    // until its bloom says it may hold the needle.
    const cols = this.bloomColumns();
    for (let i = start; i >= end; i--) {
      if (!cols.has(i, probes)) continue;
      const b = blocks[i];
      if (!b.count) continue;
      yield { block: b, index: i, gte: maxKey(lo, b.first), lt: minKey(hi, after(b.last)) };
    }
  }

  /** The sealed blocks' blooms by column, made from the blocks when missing. */
  private bloomColumns(): BloomColumns {
    if (!this.columns || this.columns.length !== this.blocks.length) this.columns = BloomColumns.of(this.blocks);
    return this.columns;
  }

  /** The rows of these keys, in this order (a key pruned meanwhile is skipped). */
  private async fetch(keys: string[]): Promise<ActivityRow[]> {
    if (!keys.length) return [];
    const rows = await this.rows.getMany(keys);
    return rows.filter((r): r is ActivityRow => r !== undefined);
  }

  // ---------------------------------------------------------------- retention

  private schedulePrune(ms: number): void {
    if (this.closed) return;
    if (ms === 0) {
      if (this.pruneSoon) return;
      this.pruneSoon = true;
    }
    if (this.pruneTimer) clearTimeout(this.pruneTimer);
    this.pruneTimer = setTimeout(() => {
      this.pruneTimer = null;
      this.pruneSoon = false;
      void this.prune()
        .catch(() => undefined)
        .finally(() => this.schedulePrune(this.retention.pruneEveryMs));
    }, ms);
    this.pruneTimer.unref();
  }

  /**
   * Deletes rows older than the maximum age and the oldest rows beyond the
   * maximum count, with their index entries, a chunk at a time (the writes of
   * API calls go between chunks). Returns the number of rows deleted.
   */
  prune(): Promise<number> {
    const run = (this.pruning ?? Promise.resolve()).then(() => this.pruneNow());
    this.pruning = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  private async pruneNow(): Promise<number> {
    if (!this.loaded) await this.ready;
    const cutoff = this.retention.maxAgeDays > 0 ? keyPrefix(this.now() - this.retention.maxAgeDays * 86_400_000) : undefined;
    let deleted = 0;
    while (!this.closed) {
      const excess = this.size - this.retention.maxRows;
      const oldest = await this.rows.iterator({ limit: CHUNK }).all();
      const doomed = oldest.filter(([key], i) => i < excess || (cutoff !== undefined && key < cutoff));
      if (!doomed.length) break;
      deleted += await this.blockWrites.run(async () => {
        const ops: Op[] = [];
        const touched = new Set<Block>();
        for (const [key, row] of doomed) {
          ops.push({ type: 'del', sub: this.rows, key }, ...this.indexOps(key, row, 'del'));
          const block = this.blocks.length && key <= this.blocks[this.blocks.length - 1].last ? this.sealedBlockFor(key) : this.open;
          block.count = Math.max(0, block.count - 1);
          touched.add(block);
        }
        const emptied = new Set<Block>();
        for (const b of touched) {
          if (b === this.open) continue;
          if (b.count === 0) {
            ops.push({ type: 'del', sub: this.blockSub, key: b.id }, this.dropRows(b));
            emptied.add(b);
          } else ops.push(this.blockOp(b));
        }
        if (emptied.size) {
          // Pruning empties the oldest blocks: the columns drop as many from their front; anything else remakes them.
          let front = 0;
          while (front < this.blocks.length && emptied.has(this.blocks[front])) front++;
          if (front === emptied.size) this.columns?.dropFront(front);
          else this.columns = null;
          this.blocks = this.blocks.filter((x) => !emptied.has(x));
        }
        // Not synced: a pruning lost to a power loss is done again.
        await this.store.batch(ops, LAZY);
        return doomed.length;
      });
      if (doomed.length < oldest.length) break;
      await new Promise((r) => setImmediate(r));
    }
    return deleted;
  }

  /** Stops pruning and lets the writers that asked for it write their last rows. */
  async close(): Promise<void> {
    if (this.closed) return;
    for (const fn of this.closeHooks) {
      try {
        await fn();
      } catch {
        /* a writer's failure is its own */
      }
    }
    this.closed = true;
    if (this.pruneTimer) clearTimeout(this.pruneTimer);
    this.pruneTimer = null;
    await this.pruning;
    await this.blockWrites.run(async () => undefined);
  }
}

/**
 * Index entries read ahead in growing batches, newest first, and seeks that
 * drop what was read ahead.
 */
class EntryStream {
  private buf: Array<[string, string]> = [];
  private at = 0;
  private size = 16;
  private done = false;

  constructor(private readonly it: { nextv(n: number): Promise<unknown>; seek(target: string): void; close(): Promise<void> }) {}

  async next(): Promise<[string, string] | undefined> {
    if (this.at < this.buf.length) return this.buf[this.at++];
    if (this.done) return undefined;
    this.buf = (await this.it.nextv(this.size)) as Array<[string, string]>;
    this.at = 0;
    this.size = Math.min(CHUNK, this.size * 4);
    if (!this.buf.length) {
      this.done = true;
      return undefined;
    }
    return this.buf[this.at++];
  }

  /** Jumps to `target`; the first read takes `expected` entries (a block's worth: one read per block). */
  seek(target: string, expected: number): void {
    this.it.seek(target);
    this.buf = [];
    this.at = 0;
    this.size = Math.max(2, Math.min(CHUNK, expected));
    this.done = false;
  }

  unread(): void {
    this.at--;
  }

  close(): Promise<void> {
    return this.it.close();
  }
}

/** A block's part of a searched range: `gte` inclusive, `lt` exclusive (undefined: unbounded); `index` its position from the oldest block. */
interface Span {
  block: Block;
  index: number;
  gte?: string;
  lt?: string;
}

/** Whether a span cuts into its block (keys must be compared), rather than holding it whole. */
function cuts(span: Span): boolean {
  return (span.gte !== undefined && span.gte > span.block.first) || (span.lt !== undefined && span.lt <= span.block.last);
}

/** Whether every bit of the signature at `at` in `b` is set where `mask` has one. */
function sigCovers(b: Buffer, at: number, mask: Signature): boolean {
  return (
    (mask[0] & ~b.readUInt32LE(at)) === 0 &&
    (mask[1] & ~b.readUInt32LE(at + 4)) === 0 &&
    (mask[2] & ~b.readUInt32LE(at + 8)) === 0 &&
    (mask[3] & ~b.readUInt32LE(at + 12)) === 0
  );
}

function readSig(b: Buffer, at: number): Signature {
  return new Uint32Array([b.readUInt32LE(at), b.readUInt32LE(at + 4), b.readUInt32LE(at + 8), b.readUInt32LE(at + 12)]);
}

/** A signature that covers every needle (a row whose signature was lost: always a candidate). */
const FULL_SIG: Signature = new Uint32Array([~0, ~0, ~0, ~0]);
const JSON_OPEN = 0x7b; // '{': a list in the JSON of format v3
const ROWS_TAG = 1;

/**
 * A sealed block's rows' list as stored, oldest first: a tag byte (1), the
 * row count (uint16 LE), the keys' common length in bytes (0: each key
 * prefixed by its own length byte), the keys (ASCII), then each row's
 * 128-bit signature (4 uint32 LE). A search checks signatures in place and
 * makes a key string only for a candidate (or for a block the searched range
 * cuts into); JSON made it parse every key of every block it read.
 */
function encodeRows(entries: RowEntry[]): Buffer {
  const n = entries.length;
  const first = entries[0]?.key.length ?? 0;
  const fixed = first > 0 && first < 256 && entries.every((e) => e.key.length === first) ? first : 0;
  const keyBytes = fixed ? n * fixed : entries.reduce((sum, e) => sum + 1 + e.key.length, 0);
  const buf = Buffer.alloc(4 + keyBytes + n * 16);
  buf[0] = ROWS_TAG;
  buf.writeUInt16LE(n, 1);
  buf[3] = fixed;
  let at = 4;
  for (const e of entries) {
    if (!fixed) buf[at++] = e.key.length;
    at += buf.write(e.key, at, 'latin1');
  }
  for (const e of entries) for (let w = 0; w < 4; w++, at += 4) buf.writeUInt32LE(e.sig[w], at);
  return buf;
}

/** Reads a stored rows' list (binary, or the JSON of format v3). */
class RowsView {
  private constructor(
    private readonly n: number,
    /** Where each key starts and ends (binary), or the keys themselves (JSON). */
    private readonly keyAt: (i: number) => string,
    private readonly sigs: Buffer,
    private readonly sigBase: number,
  ) {}

  static of(raw: Buffer): RowsView | undefined {
    if (raw[0] === JSON_OPEN) {
      const json = JSON.parse(raw.toString('utf8')) as JsonRows;
      const sigs = Buffer.from(json.sigs, 'base64url');
      // A list whose signatures are cut short is not used: the block's index entries are walked instead.
      if (sigs.length < json.keys.length * 16) return undefined;
      return new RowsView(json.keys.length, (i) => json.keys[i], sigs, 0);
    }
    if (raw[0] !== ROWS_TAG || raw.length < 4) return undefined;
    const n = raw.readUInt16LE(1);
    const fixed = raw[3];
    if (fixed) {
      const base = 4 + n * fixed;
      if (raw.length < base + n * 16) return undefined;
      return new RowsView(n, (i) => raw.toString('latin1', 4 + i * fixed, 4 + (i + 1) * fixed), raw, base);
    }
    const starts = new Int32Array(n + 1);
    let at = 4;
    for (let i = 0; i < n; i++) {
      if (at >= raw.length) return undefined;
      starts[i] = at + 1;
      at += 1 + raw[at];
    }
    starts[n] = at + 1;
    if (raw.length < at + n * 16) return undefined;
    return new RowsView(n, (i) => raw.toString('latin1', starts[i], starts[i] + raw[starts[i] - 1]), raw, at);
  }

  /** The keys of the rows in `span` whose signature covers `mask`, newest first, into `out`. */
  candidates(span: Span, mask: Signature, out: string[]): void {
    const bounded = cuts(span);
    for (let i = this.n - 1; i >= 0; i--) {
      if (!sigCovers(this.sigs, this.sigBase + i * 16, mask)) continue;
      const key = this.keyAt(i);
      if (bounded && ((span.gte !== undefined && key < span.gte) || (span.lt !== undefined && key >= span.lt))) continue;
      out.push(key);
    }
  }
}

function rowsView(raw: Buffer | undefined): RowsView | undefined {
  return raw ? RowsView.of(raw) : undefined;
}

/** The open block's rows (in memory, in key order) in `span` whose signature covers `mask`, newest first, into `out`. */
function openCandidates(entries: RowEntry[], span: Span, mask: Signature, out: string[]): void {
  for (let i = entries.length - 1; i >= 0; i--) {
    const { key, sig } = entries[i];
    if ((span.gte !== undefined && key < span.gte) || (span.lt !== undefined && key >= span.lt)) continue;
    if (covers(sig, mask)) out.push(key);
  }
}

const BLOOM_WORDS = BLOOM_BITS / 32;

/**
 * The sealed blocks' blooms by word: column w holds word w of every block's
 * bloom, by block position. A search for a rare word checks a bloom per
 * block, thousands per query: read across separate bloom objects, each check
 * cost several cache misses; by column, the blocks' words for one probe are
 * next to each other. A copy of the blooms (512 bytes per block, 8 bytes per
 * row), kept in step with the blocks: a sealed block is pushed, a block that
 * takes a row out of order is written again, pruned blocks leave from the
 * front, and anything else makes the columns again from the blocks.
 */
class BloomColumns {
  private cols: Uint32Array[];
  /** Where position 0 is in the columns (pruned blocks leave from the front), and how many positions are used. */
  private off = 0;
  private n = 0;

  private constructor(private cap: number) {
    this.cols = Array.from({ length: BLOOM_WORDS }, () => new Uint32Array(cap));
  }

  static of(blocks: Block[]): BloomColumns {
    const c = new BloomColumns(blocks.length + Math.max(1024, blocks.length >> 2));
    for (const b of blocks) c.push(b.bloom.bits);
    return c;
  }

  get length(): number {
    return this.n;
  }

  push(bits: Uint32Array): void {
    if (this.off + this.n >= this.cap) this.grow();
    this.set(this.n++, bits);
  }

  set(pos: number, bits: Uint32Array): void {
    const p = this.off + pos;
    for (let w = 0; w < BLOOM_WORDS; w++) this.cols[w][p] = bits[w];
  }

  dropFront(k: number): void {
    this.off += k;
    this.n -= k;
  }

  /** Whether the bloom at `pos` has every probe's bits. */
  has(pos: number, probes: Int32Array): boolean {
    const p = this.off + pos;
    for (let i = 0; i < probes.length; i += 2) if ((this.cols[probes[i]][p] & probes[i + 1]) !== probes[i + 1]) return false;
    return true;
  }

  private grow(): void {
    const cap = this.n + Math.max(1024, this.n >> 2);
    this.cols = this.cols.map((c) => {
      const next = new Uint32Array(cap);
      next.set(c.subarray(this.off, this.off + this.n));
      return next;
    });
    this.off = 0;
    this.cap = cap;
  }
}

/** A needle's gram hashes as bloom probes: pairs of (word index, bit mask), each once. */
function bloomProbes(hashes: number[]): Int32Array {
  const seen = new Map<number, number>();
  for (const h of hashes) {
    const w = (h >>> 5) & (BLOOM_BITS / 32 - 1);
    seen.set(w, (seen.get(w) ?? 0) | (1 << (h & 31)));
  }
  const out = new Int32Array(seen.size * 2);
  let i = 0;
  for (const [w, m] of seen) {
    out[i++] = w;
    out[i++] = m;
  }
  return out;
}

/** Whether a bloom's bits hold every probe (a block that may hold the needle). */
function bloomHas(bits: Uint32Array, probes: Int32Array): boolean {
  for (let i = 0; i < probes.length; i += 2) if ((bits[probes[i]] & probes[i + 1]) !== probes[i + 1]) return false;
  return true;
}

function emptyBlock(id: string): Block {
  return { id, first: '', last: '', count: 0, bloom: new Bloom(), entries: [] };
}

function addRow(b: Block, key: string, row: Pick<ActivityRow, 'summary' | 'target'>): void {
  if (!b.first || key < b.first) b.first = key;
  if (key > b.last) b.last = key;
  b.count++;
  for (const t of searchable(row)) b.bloom.add(t);
}

function searchable(row: Pick<ActivityRow, 'summary' | 'target'>): string[] {
  return [row.summary.toLowerCase(), row.target.toLowerCase()];
}

function range(lo: string | undefined, hi: string | undefined): { gte?: string; lt?: string } {
  const r: { gte?: string; lt?: string } = {};
  if (lo !== undefined) r.gte = lo;
  if (hi !== undefined) r.lt = hi;
  return r;
}

/** Above every key and below '~', the end of an index prefix's range: a seek target inside it. */
const TOP = '}';

function indexRange(prefix: string, lo: string | undefined, hi: string | undefined): { gte: string; lt: string } {
  return { gte: prefix + (lo ?? ''), lt: prefix + (hi ?? '~') };
}

const maxKey = (a: string | undefined, b: string | undefined) => (a === undefined ? b : b === undefined ? a : a > b ? a : b);
const minKey = (a: string | undefined, b: string | undefined) => (a === undefined ? b : b === undefined ? a : a < b ? a : b);

/** A row within ROW_LIMITS: long text is cut (and says so), oversized metadata is reduced. */
function bounded(row: NewActivity): Omit<ActivityRow, 'id' | 'timestamp'> {
  const { timestamp: _ignored, ...rest } = row;
  void _ignored;
  const out = { ...rest, summary: cut(row.summary, ROW_LIMITS.summary), target: cut(row.target, ROW_LIMITS.target), actor: cut(row.actor, ROW_LIMITS.actor) };
  let metadata = row.metadata;
  if (JSON.stringify(metadata).length > ROW_LIMITS.metadata) {
    const small: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(metadata)) small[k] = typeof v === 'string' ? cut(v, ROW_LIMITS.metadataString) : v;
    metadata = small as ActivityRow['metadata'];
    if (JSON.stringify(metadata).length > ROW_LIMITS.metadata) {
      const keep: Record<string, unknown> = { transport: row.metadata.transport, truncated: true };
      for (const k of ['operation', 'request_id', 'status', 'origin', 'peer_id', 'error']) if (small[k] !== undefined) keep[k] = small[k];
      metadata = keep as ActivityRow['metadata'];
    }
  }
  return { ...out, metadata };
}

function cut(s: string, max: number): string {
  const text = String(s ?? '');
  return text.length <= max ? text : `${text.slice(0, max - 7)}… (cut)`;
}

function parseTime(v: string, name: string): number {
  const ms = Date.parse(v);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(v) || Number.isNaN(ms)) throw badRequest(`argument '${name}' must be an RFC 3339 date-time`);
  return ms;
}

const encodeCursor = (key: string) => Buffer.from(key, 'utf8').toString('base64url');
function decodeCursor(c: string): string {
  const key = Buffer.from(c, 'base64url').toString('utf8');
  if (!KEY_RE.test(key)) throw badRequest("argument 'cursor' is not a cursor this server issued");
  return key;
}
