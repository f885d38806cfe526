/**
 * How a search without a category or severity reads the activity log: each
 * sealed block's rows' list (keys and signatures, one record per block, many
 * blocks per read) rather than one seek into the index per block, which made
 * a common word cost ten times a plain page (docs/performance.md). Counted
 * here by what the search asks of the index, never by time. A block that took
 * a row out of order has no list and is searched through its index entries.
 * In process, on a real LevelDB in a temp dir.
 */
import path from 'node:path';
import { expect } from 'chai';
import { Store } from '../../daemon/store/store.js';
import { ActivityLog, BLOCK_ROWS, DEFAULT_RETENTION, type ActivityRow, type NewActivity } from '../../daemon/activity/log.js';
import { tempDir } from '../helpers/daemon.js';

const noPrune = { ...DEFAULT_RETENTION, pruneEveryMs: 3_600_000 };
const T0 = Date.parse('2025-03-01T00:00:00Z');

function row(i: number, summary: string, ms = T0 + i * 1000): NewActivity {
  // Every fourth block's rows are 'auth', the others 'file'.
  return {
    timestamp: new Date(ms).toISOString(),
    category: Math.floor(i / BLOCK_ROWS) % 4 === 0 ? 'auth' : 'file',
    severity: 'info',
    summary,
    target: `folders/f_${i}`,
    actor: 'tester',
    metadata: { transport: 'api' },
  };
}

/** Opens a store whose activity index counts the iterators opened on it and their seeks. */
async function countingStore(dir: string): Promise<{ store: Store; reads: { iterators: number; seeks: number } }> {
  const store = await Store.open(path.join(dir, 'db'));
  const reads = { iterators: 0, seeks: 0 };
  const db = store.db as unknown as { sublevel: (name: string, opts?: unknown) => any };
  const sublevel = db.sublevel.bind(store.db);
  db.sublevel = (name, opts) => {
    const sub = sublevel(name, opts);
    if (name !== 'activity_ix') return sub;
    const iterator = sub.iterator.bind(sub);
    sub.iterator = (o: unknown) => {
      reads.iterators++;
      const it = iterator(o);
      const seek = it.seek.bind(it);
      it.seek = (target: string) => {
        reads.seeks++;
        return seek(target);
      };
      return it;
    };
    return sub;
  };
  return { store, reads };
}

async function allPages(log: ActivityLog, q: Record<string, string>): Promise<ActivityRow[]> {
  const out: ActivityRow[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 1000; i++) {
    const page = await log.query({ ...q, limit: 7, cursor });
    out.push(...page.events);
    if (!page.next_cursor) return out;
    cursor = page.next_cursor;
  }
  throw new Error('paging did not end');
}

describe("activity search: blocks read through their rows' lists", function () {
  this.timeout(120_000);
  const stores: Store[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close().catch(() => undefined);
  });

  it('a word in one row of every other block: found, newest first, without a single read of the index', async () => {
    const dir = tempDir('hostd-activity-lists-');
    const { store, reads } = await countingStore(dir);
    stores.push(store);
    const log = new ActivityLog(store, noPrune);
    const rows: NewActivity[] = [];
    const expected: number[] = [];
    for (let i = 0; i < BLOCK_ROWS * 24 + 10; i++) {
      // Row 5 of every even block, and one in the open block at the end.
      const marked = (Math.floor(i / BLOCK_ROWS) % 2 === 0 && i % BLOCK_ROWS === 5) || i === BLOCK_ROWS * 24 + 3;
      if (marked) expected.push(i);
      rows.push(row(i, marked ? 'Snapshot kept for folder' : 'Create a folder'));
    }
    await log.recordMany(rows);
    const before = { ...reads };
    const page = await log.query({ search: 'snapshot', limit: 50 });
    expect(page.events.map((e) => e.target)).to.deep.equal(expected.reverse().map((i) => `folders/f_${i}`));
    expect(page.next_cursor).to.equal(null);
    expect(reads, 'index iterators opened and seeks made by the search').to.deep.equal(before);
    // Paged, the same rows.
    expect((await allPages(log, { search: 'snapshot' })).map((e) => e.target)).to.deep.equal(page.events.map((e) => e.target));
    expect(reads).to.deep.equal(before);
    // A category narrows to its own index, which holds only its rows: that one is walked.
    const auth = await log.query({ search: 'snapshot', category: 'auth', limit: 50 });
    expect(auth.events.map((e) => e.target)).to.deep.equal(page.events.filter((e) => e.category === 'auth').map((e) => e.target));
    expect(auth.events).to.have.length(8); // blocks 0, 4, ... 20, and two rows of the open block 24
    expect(reads.seeks, 'the category index walked').to.be.greaterThan(before.seeks);
  });

  it('a row written into a sealed block (a clock that went back) is found through the index; a restart keeps the lists', async () => {
    const dir = tempDir('hostd-activity-lists-');
    let { store, reads } = await countingStore(dir);
    stores.push(store);
    let log = new ActivityLog(store, noPrune);
    const rows: NewActivity[] = [];
    for (let i = 0; i < BLOCK_ROWS * 6; i++) rows.push(row(i, i === 10 ? 'quarantine begun' : 'Create a folder'));
    await log.recordMany(rows);
    // Between rows 70 and 71: inside the second block's range.
    await log.record(row(9999, 'quarantine ended', T0 + 70_500));
    const lists = await store.sub('activity_block_rows').keys().all();
    expect(lists, 'one list per sealed block, but the block that took a row out of order').to.have.length(5);
    let before = { ...reads };
    const found = await log.query({ search: 'quarantine', limit: 50 });
    expect(found.events.map((e) => e.summary)).to.deep.equal(['quarantine ended', 'quarantine begun']);
    expect(reads.seeks - before.seeks, 'one seek: the block without a list').to.equal(1);

    await store.close();
    ({ store, reads } = await countingStore(dir));
    stores.push(store);
    log = new ActivityLog(store, noPrune);
    await log.init();
    before = { ...reads };
    expect((await log.query({ search: 'quarantine', limit: 50 })).events.map((e) => e.summary)).to.deep.equal(['quarantine ended', 'quarantine begun']);
    expect(reads.seeks - before.seeks).to.equal(1);
    expect(await store.sub('activity_block_rows').keys().all()).to.have.length(5);
  });

  it('a log whose lists are in the JSON of format v3 has them rewritten once at start, also after a conversion cut short; searches find the same rows', async () => {
    const dir = tempDir('hostd-activity-lists-');
    let { store, reads } = await countingStore(dir);
    stores.push(store);
    let log = new ActivityLog(store, noPrune);
    const rows: NewActivity[] = [];
    for (let i = 0; i < BLOCK_ROWS * 10 + 7; i++) rows.push(row(i, i % 50 === 3 ? 'Snapshot kept for folder' : 'Create a folder'));
    await log.recordMany(rows);
    const want = (await log.query({ search: 'snapshot', limit: 200 })).events.map((e) => e.id);
    expect(want).to.have.length(13);
    const raw = store.db.sublevel<string, Buffer>('activity_block_rows', { valueEncoding: 'buffer' });
    const binary = await raw.iterator().all();
    expect(binary).to.have.length(10);
    // The layout: tag 1, the row count, the keys' common length, the keys, then 16 bytes of signature per row.
    const asJson = (b: Buffer) => {
      const n = b.readUInt16LE(1);
      const len = b[3];
      expect([b[0], n, len]).to.deep.equal([1, BLOCK_ROWS, 29]);
      const keys = Array.from({ length: n }, (_, i) => b.toString('latin1', 4 + i * len, 4 + (i + 1) * len));
      return { keys, sigs: b.subarray(4 + n * len).toString('base64url') };
    };
    // Back to v3: every list in JSON but the first (a conversion cut short), and the v3 mark.
    const json = store.sub<unknown>('activity_block_rows');
    for (const [id, b] of binary.slice(1)) await json.put(id, asJson(b));
    await store.sub<unknown>('activity_meta').put('index_format', `v3-rows${BLOCK_ROWS}-bloom4096`);
    await store.close();

    ({ store, reads } = await countingStore(dir));
    stores.push(store);
    log = new ActivityLog(store, noPrune);
    await log.init();
    expect(await store.sub<unknown>('activity_meta').get('index_format')).to.match(/^v4-/);
    const after = await store.db.sublevel<string, Buffer>('activity_block_rows', { valueEncoding: 'buffer' }).iterator().all();
    expect(after.map(([id, b]) => [id, b.toString('hex')])).to.deep.equal(binary.map(([id, b]) => [id, b.toString('hex')]));
    const before = { ...reads };
    expect((await log.query({ search: 'snapshot', limit: 200 })).events.map((e) => e.id)).to.deep.equal(want);
    expect((await allPages(log, { search: 'snapshot' })).map((e) => e.id)).to.deep.equal(want);
    expect(reads, 'the lists served the search: no index read').to.deep.equal(before);
  });

  it('the blooms walked by a search follow the blocks: a row added to an old block, blocks sealed and pruned between searches', async () => {
    const dir = tempDir('hostd-activity-lists-');
    const { store } = await countingStore(dir);
    stores.push(store);
    // No pruning until the test lowers the row limit (a pruning in the background would race the checks).
    const retention = { maxAgeDays: 0, maxRows: 1_000_000, pruneEveryMs: 3_600_000 };
    const log = new ActivityLog(store, retention);
    const rows: NewActivity[] = [];
    for (let i = 0; i < BLOCK_ROWS * 12; i++) rows.push(row(i, i % 97 === 5 ? 'quarantine begun' : 'Create a folder'));
    await log.recordMany(rows);
    const all = async () => (await log.query({ search: 'quarantine', limit: 200 })).events.map((e) => e.target);
    const plain = async () => {
      const out: string[] = [];
      let cursor: string | undefined;
      for (;;) {
        const page = await log.query({ limit: 200, cursor });
        out.push(...page.events.filter((e) => e.summary.includes('quarantine')).map((e) => e.target));
        if (!page.next_cursor) return out;
        cursor = page.next_cursor;
      }
    };
    expect(await all()).to.deep.equal(await plain());
    expect(await all()).to.have.length(8);
    // Into the third block's range (between rows 130 and 131): its bloom takes the word after the first search.
    await log.record(row(5000, 'quarantine ended', T0 + 130_500));
    expect(await all()).to.include('folders/f_5000');
    expect(await all()).to.deep.equal(await plain());
    // More blocks sealed after the walk began, then the oldest pruned away.
    const more: NewActivity[] = [];
    for (let i = BLOCK_ROWS * 12; i < BLOCK_ROWS * 15; i++) more.push(row(i, i % 97 === 5 ? 'quarantine begun' : 'Create a folder'));
    await log.recordMany(more);
    expect(await all()).to.deep.equal(await plain());
    retention.maxRows = BLOCK_ROWS * 10;
    expect(await log.prune()).to.be.at.least(BLOCK_ROWS * 2);
    const left = await all();
    expect(left).to.deep.equal(await plain());
    expect(left).to.not.include('folders/f_5');
    expect(left).to.include('folders/f_878');
  });

  it('reads a list still in JSON (a conversion that has not reached it) as it reads a binary one', async () => {
    const dir = tempDir('hostd-activity-lists-');
    const { store, reads } = await countingStore(dir);
    stores.push(store);
    const log = new ActivityLog(store, noPrune);
    const rows: NewActivity[] = [];
    for (let i = 0; i < BLOCK_ROWS * 4; i++) rows.push(row(i, i % 20 === 1 ? 'quarantine begun' : 'Create a folder'));
    await log.recordMany(rows);
    const want = (await log.query({ search: 'quarantine', limit: 100 })).events.map((e) => e.id);
    const raw = store.db.sublevel<string, Buffer>('activity_block_rows', { valueEncoding: 'buffer' });
    const [[id, b]] = await raw.iterator({ limit: 1 }).all();
    const n = b.readUInt16LE(1);
    const keys = Array.from({ length: n }, (_, i) => b.toString('latin1', 4 + i * b[3], 4 + (i + 1) * b[3]));
    await store.sub<unknown>('activity_block_rows').put(id, { keys, sigs: b.subarray(4 + n * b[3]).toString('base64url') });
    const before = { ...reads };
    expect((await log.query({ search: 'quarantine', limit: 100 })).events.map((e) => e.id)).to.deep.equal(want);
    expect(reads).to.deep.equal(before);
  });
});
