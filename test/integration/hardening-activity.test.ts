/**
 * Hardening item 5: the activity log cannot be flooded by one token, keeps a
 * bounded size and age, and answers filtered queries from its indexes.
 *
 * In process (a real LevelDB in a temp dir): filtered queries and paging
 * through the indexes give exactly what a scan of every row gives, for random
 * rows and filters, across blocks, rows written out of time order, a restart
 * and a log written before the indexes existed; retention deletes rows with
 * their index entries. Through a daemon: a token with no scopes hammering a
 * mutating operation leaves a bounded number of rows and one summary.
 * (How fast the indexes are is the bench's job: `npm run bench activity`.)
 */
import path from 'node:path';
import { expect } from 'chai';
import { Store } from '../../daemon/store/store.js';
import { ActivityLog, BLOCK_ROWS, DEFAULT_RETENTION, ROW_LIMITS, type ActivityRow, type NewActivity } from '../../daemon/activity/log.js';
import { RefusalThrottle } from '../../daemon/lib/throttle.js';
import { REFUSED_CALL_TRACE } from '../../api/dispatch.js';
import { startDaemon, tempDir } from '../helpers/daemon.js';
import { traceAllowance } from '../helpers/expect.js';

const CATEGORIES = ['auth', 'file', 'system', 'storage', 'app'] as const;
const SEVERITIES = ['info', 'warning', 'critical'] as const;
const WORDS = ['folder', 'token', 'Backup', 'proxy', 'member', 'joined', 'refused', 'scope', 'files.manage', 'ÉTÉ', 'vm-104', 'f_ab12'];

/** A deterministic pseudo-random source, so a failure can be replayed. */
function rng(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 0x100000000;
  };
}

function randomRow(r: () => number, ms: number): NewActivity {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)];
  const words = Array.from({ length: 2 + Math.floor(r() * 5) }, () => pick(WORDS));
  return {
    timestamp: new Date(ms).toISOString(),
    category: pick(CATEGORIES),
    severity: pick(SEVERITIES),
    summary: words.join(' '),
    target: `${pick(['folders', 'tokens', 'peers'])}/${Math.floor(r() * 50)}`,
    actor: 'tester',
    metadata: { transport: 'api' },
  };
}

/** What a query must answer, by scanning every row. */
function brute(all: ActivityRow[], q: { category?: string; severity?: string; search?: string; since?: string; until?: string }): ActivityRow[] {
  const needle = q.search?.toLowerCase();
  return all
    .filter(
      (row) =>
        (!q.category || row.category === q.category) &&
        (!q.severity || row.severity === q.severity) &&
        (!needle || row.summary.toLowerCase().includes(needle) || row.target.toLowerCase().includes(needle)) &&
        (!q.since || Date.parse(row.timestamp) >= Date.parse(q.since)) &&
        (!q.until || Date.parse(row.timestamp) <= Date.parse(q.until)),
    )
    .sort((a, b) => (a.id < b.id ? 1 : -1));
}

/** Every page of a query, followed through next_cursor. */
async function allPages(log: ActivityLog, q: Record<string, string | undefined>, limit: number): Promise<ActivityRow[]> {
  const out: ActivityRow[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 10_000; i++) {
    const page = await log.query({ ...q, limit, cursor });
    out.push(...page.events);
    if (!page.next_cursor) return out;
    expect(page.events.length, 'a page before the last is full').to.equal(limit);
    cursor = page.next_cursor;
  }
  throw new Error('paging did not end');
}

async function allRows(log: ActivityLog): Promise<ActivityRow[]> {
  return allPages(log, {}, 200);
}

const ids = (rows: ActivityRow[]) => rows.map((r) => r.id);

describe('hardening: activity indexes give what a scan gives', function () {
  this.timeout(120_000);
  const noPrune = { ...DEFAULT_RETENTION, pruneEveryMs: 3_600_000 };

  async function checkQueries(log: ActivityLog, all: ActivityRow[], r: () => number, n: number): Promise<void> {
    const times = all.map((x) => Date.parse(x.timestamp)).sort((a, b) => a - b);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)];
    for (let i = 0; i < n; i++) {
      const q: Record<string, string | undefined> = {};
      if (r() < 0.5) q.category = pick(CATEGORIES);
      if (r() < 0.4) q.severity = pick(SEVERITIES);
      if (r() < 0.5) q.search = pick([...WORDS.map((w) => w.slice(0, 3 + Math.floor(r() * 4))), 'é', 'zzq', '/1', 'd f', 'ÉtÉ']);
      if (r() < 0.3) q.since = new Date(pick(times)).toISOString();
      if (r() < 0.3) q.until = new Date(pick(times)).toISOString();
      const expected = brute(all, q);
      const limit = pick([1, 7, 50, 200]);
      const first = await log.query({ ...q, limit });
      expect(ids(first.events), JSON.stringify(q)).to.deep.equal(ids(expected.slice(0, limit)));
      expect(first.next_cursor === null, `${JSON.stringify(q)} next_cursor`).to.equal(expected.length <= limit);
      if (i % 5 === 0) expect(ids(await allPages(log, q, pick([13, 200]))), `${JSON.stringify(q)} paged`).to.deep.equal(ids(expected));
    }
  }

  it('random rows over several blocks, some out of time order; after a restart; after an upgrade from unindexed rows', async () => {
    const dir = tempDir('hostd-activity-');
    const r = rng(20240611);
    const t0 = Date.parse('2025-01-01T00:00:00Z');
    const rows: NewActivity[] = [];
    for (let i = 0; i < BLOCK_ROWS * 40 + 321; i++) {
      // Mostly in order, a few seconds apart; one in fifty goes back in time (a clock that jumped back).
      const ms = r() < 0.02 ? t0 + Math.floor(r() * i) * 3000 : t0 + i * 3000;
      rows.push(randomRow(r, ms));
    }
    let store = await Store.open(path.join(dir, 'db'));
    let log = new ActivityLog(store, noPrune);
    await log.recordMany(rows.slice(0, 3000));
    for (const row of rows.slice(3000, 3100)) await log.record(row);
    await log.recordMany(rows.slice(3100));
    let all = await allRows(log);
    expect(all).to.have.length(rows.length);
    expect(log.size).to.equal(rows.length);
    await checkQueries(log, all, r, 150);

    // A restart: sealed blocks are loaded, the open one rebuilt from its rows.
    await store.close();
    store = await Store.open(path.join(dir, 'db'));
    log = new ActivityLog(store, noPrune);
    await log.init();
    expect(log.size).to.equal(rows.length);
    all = await allRows(log);
    await checkQueries(log, all, r, 60);

    // A log written before the indexes existed: only rows. Its first start builds them.
    await store.close();
    store = await Store.open(path.join(dir, 'db'));
    await store.sub('activity_meta').clear();
    await store.db.sublevel('activity_ix').clear();
    await store.sub('activity_blocks').clear();
    log = new ActivityLog(store, noPrune);
    await log.init();
    expect(log.size).to.equal(rows.length);
    expect(ids(await allRows(log))).to.deep.equal(ids(all));
    await checkQueries(log, all, r, 60);
    await store.close();
  });

  it('a row is bounded: long text is cut and says so, oversized metadata is reduced', async () => {
    const store = await Store.open(path.join(tempDir('hostd-activity-'), 'db'));
    const log = new ActivityLog(store, noPrune);
    const row = await log.record({
      category: 'auth',
      severity: 'warning',
      summary: 'x'.repeat(100_000),
      target: 'y'.repeat(10_000),
      actor: 'z'.repeat(1000),
      metadata: { transport: 'api', operation: 'folders_create', blob: 'b'.repeat(100_000) },
    });
    expect(row.summary).to.have.length(ROW_LIMITS.summary);
    expect(row.summary.endsWith('… (cut)')).to.equal(true);
    expect(row.target).to.have.length(ROW_LIMITS.target);
    expect(row.actor).to.have.length(ROW_LIMITS.actor);
    expect(JSON.stringify(row.metadata).length).to.be.at.most(ROW_LIMITS.metadata);
    expect(row.metadata.operation).to.equal('folders_create');
    expect((await log.query({ search: 'xxxx' })).events.map((e) => e.id)).to.deep.equal([row.id]);
    await store.close();
  });
});

describe('hardening: activity retention', function () {
  this.timeout(60_000);

  it('deletes rows older than the maximum age and the oldest beyond the maximum count, with their index entries', async () => {
    const dir = tempDir('hostd-activity-');
    let now = Date.parse('2025-06-01T00:00:00Z');
    const day = 86_400_000;
    const store = await Store.open(path.join(dir, 'db'));
    const log = new ActivityLog(store, { maxAgeDays: 30, maxRows: 2500, pruneEveryMs: 3_600_000 }, () => now);
    const r = rng(7);
    // 3000 rows over 60 days, oldest first.
    const rows = Array.from({ length: 3000 }, (_, i) => randomRow(r, now - 60 * day + i * ((60 * day) / 3000)));
    await log.recordMany(rows);
    expect(log.size).to.equal(3000);

    // Age: everything before day -30 goes (1500 rows), then the count is under the maximum.
    const deleted = await log.prune();
    expect(deleted).to.equal(1500);
    let all = await allRows(log);
    expect(all).to.have.length(1500);
    expect(all.every((x) => Date.parse(x.timestamp) >= now - 30 * day)).to.equal(true);
    expect(log.size).to.equal(1500);
    // Filtered queries see exactly the rows that are left (their index entries went with the old rows).
    for (const q of [
      { category: 'auth' },
      { severity: 'critical' },
      { category: 'file', severity: 'info' },
      { search: 'folder' },
      { category: 'auth', search: 'tok' },
    ]) {
      expect(ids(await allPages(log, q, 200)), JSON.stringify(q)).to.deep.equal(ids(brute(all, q)));
    }
    const ixEntries = await store.db.sublevel('activity_ix').keys().all();
    expect(ixEntries).to.have.length(1500 * 4);

    // Count: 1500 more rows now; the oldest 500 beyond 2500 go, the newest stay.
    now += day;
    const newer = Array.from({ length: 1500 }, (_, i) => randomRow(r, now - day + i * 1000));
    await log.recordMany(newer);
    expect(await log.prune()).to.equal(500);
    all = await allRows(log);
    expect(all).to.have.length(2500);
    expect(log.size).to.equal(2500);
    const kept = all.map((x) => Date.parse(x.timestamp)).sort((a, b) => a - b);
    expect(kept[kept.length - 1]).to.equal(Date.parse(newer[newer.length - 1].timestamp!));
    expect(await store.db.sublevel('activity_ix').keys().all()).to.have.length(2500 * 4);
    await store.close();
  });

  it('prunes in the background once the log grows a block past its maximum', async () => {
    const store = await Store.open(path.join(tempDir('hostd-activity-'), 'db'));
    const log = new ActivityLog(store, { maxAgeDays: 0, maxRows: 200, pruneEveryMs: 3_600_000 });
    const r = rng(3);
    await log.recordMany(Array.from({ length: BLOCK_ROWS + 300 }, (_, i) => randomRow(r, Date.now() - 100_000 + i)));
    await log.record(randomRow(r, Date.now())); // crosses max + one block: pruning is scheduled at once
    for (let i = 0; i < 200 && log.size > 200; i++) await new Promise((ok) => setTimeout(ok, 25));
    expect(log.size).to.equal(200);
    expect(await allRows(log)).to.have.length(200);
    await store.close();
  });
});

describe('hardening: one token cannot flood the activity log', function () {
  this.timeout(120_000);

  it('the throttle: a burst one by one, then one per interval, the rest counted into one summary per key', () => {
    let now = 0;
    const summaries: any[] = [];
    const t = new RefusalThrottle<string>(
      { burst: 3, everyMs: 1000, windowMs: 60_000, maxKeys: 2 },
      (s) => summaries.push(s),
      () => now,
    );
    const admitted = Array.from({ length: 10 }, () => t.admit('tok', '403 op', 'ctx')).filter(Boolean).length;
    expect(admitted).to.equal(3);
    now += 2500;
    expect(t.admit('tok', '400 op', 'ctx')).to.equal(true);
    expect(t.admit('tok', '400 op', 'ctx')).to.equal(true);
    expect(t.admit('tok', '400 op', 'ctx')).to.equal(false);
    // Another key has its own bucket; a third key beyond maxKeys shares '*'.
    expect(t.admit('other', '403 op', 'ctx2')).to.equal(true);
    expect(t.admit('third', '403 op', 'ctx3')).to.equal(true);
    t.flush();
    t.stop();
    expect(summaries).to.have.length(1);
    expect(summaries[0]).to.include({ key: 'tok', context: 'ctx', count: 8 });
    expect(summaries[0].details).to.deep.equal({ '403 op': 7, '400 op': 1 });
  });

  it('a token with no scopes making 300 refused calls leaves at most the burst and one summary, attributed to it', async () => {
    const dir = tempDir('hostd-flood-');
    const d = await startDaemon({ dataDir: dir });
    const flood = await d.token('flood', []);
    const attempts = 300;
    let sent = 0;
    const t0 = Date.now();
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (sent < attempts) {
          sent++;
          const res = await d.request('POST', '/api/v1/folders', { token: flood, body: { storage_id: 'default', name: 'x' } });
          expect(res.status).to.equal(403);
        }
      }),
    );
    // A call by another token is still recorded one by one.
    const other = await d.token('other', ['files.manage']);
    expect((await d.request('POST', '/api/v1/folders', { token: other, body: { name: 'x' } })).status).to.equal(400);
    await d.stop(); // the pending summary is written as the daemon stops
    const allowed = traceAllowance(REFUSED_CALL_TRACE, Date.now() - t0);
    const d2 = await startDaemon({ dataDir: dir });
    const reader = await d2.token('reader', ['system.read']);
    const rows: any[] = [];
    let cursor = '';
    for (;;) {
      const page = await d2.request('GET', `/api/v1/activity?limit=200${cursor ? `&cursor=${cursor}` : ''}`, { token: reader });
      rows.push(...page.body.events);
      if (!page.body.next_cursor) break;
      cursor = page.body.next_cursor;
    }
    const byFlood = rows.filter((r) => r.actor === 'flood');
    const single = byFlood.filter((r) => r.metadata.operation === 'folders_create');
    const summaries = byFlood.filter((r) => r.metadata.suppressed !== undefined);
    expect(single.length).to.be.within(REFUSED_CALL_TRACE.burst, allowed.single);
    expect(summaries.length).to.be.within(1, allowed.summaries);
    expect(single.length + summaries.reduce((n, r) => n + r.metadata.suppressed, 0)).to.equal(attempts);
    for (const s of summaries) {
      expect(s.category).to.equal('auth');
      expect(s.severity).to.equal('warning');
      expect(s.target).to.equal('tokens/flood');
      expect(s.metadata.details['403 folders_create']).to.equal(s.metadata.suppressed);
      expect(s.summary).to.match(/^\d+ more refused calls by token 'flood' between .+, not recorded one by one \(\d+ × 403 folders_create\)$/);
    }
    expect(rows.filter((r) => r.actor === 'other' && r.metadata.status === 400)).to.have.length(1);
    await d2.stop();
  });
});
