/**
 * Activity queries over a large log (default 1,000,000 rows,
 * BENCH_ACTIVITY_ROWS to change), through the API of a real daemon:
 *
 *   activity_first_page_ms   p50 of GET /activity?limit=50 (no filter): the baseline
 *   activity_query_ms        p50 of a filtered query: category, severity, since/until and search together
 *   activity_query_ratio     activity_query_ms / activity_first_page_ms (target < 3)
 *
 * and, for the record, each filter on its own against the same baseline:
 * activity_category_ratio (a rare category), activity_search_ratio (a word
 * in about 1 row in 2,000), activity_search_rare_ratio (a word in about 1 row in
 * 200,000), activity_window_ratio (since/until a day, 10 days back).
 *
 * The rows are written straight into the data dir first (the log's own bulk
 * write, not synced), then the daemon is started on it.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { Store } from '../../daemon/store/store.js';
import { ActivityLog, INDEX_FORMAT, type NewActivity } from '../../daemon/activity/log.js';
import { startDaemon, tempDir } from '../helpers/daemon.js';
import { median, p50Of, print } from './lib.js';

const CATEGORIES: Array<[NewActivity['category'], number]> = [
  ['file', 0.45],
  ['system', 0.2],
  ['auth', 0.12],
  ['storage', 0.1],
  ['app', 0.08],
  ['backup', 0.04],
  ['update', 0.01],
];
const SEVERITIES: Array<[NewActivity['severity'], number]> = [
  ['info', 0.85],
  ['warning', 0.14],
  ['critical', 0.01],
];

function weighted<T>(list: Array<[T, number]>, x: number): T {
  let acc = 0;
  for (const [v, w] of list) {
    acc += w;
    if (x < acc) return v;
  }
  return list[list.length - 1][0];
}

/** A plausible row; `i` makes ids and names vary like real ones. */
function row(i: number, ms: number, r: () => number): NewActivity {
  const category = weighted(CATEGORIES, r());
  const severity = weighted(SEVERITIES, r());
  const id = ((i * 2654435761) >>> 0).toString(16).padStart(8, '0');
  const token = `agent-${i % 37}`;
  // A word in 1 row in 2,000, another in 1 row in 200,000.
  const extra = (i % 2000 === 3 ? ' (snapshot kept)' : '') + (i % 200_000 === 7 ? ' (quarantine)' : '');
  const summaries = [
    'Create a folder',
    `Delete a folder failed: folder 'f_${id}' not found`,
    `Update a proxy entry for app-${i % 500}.example.org`,
    `Token '${token}' created with scopes files.read, files.manage`,
    `Create a folder failed: token '${token}' lacks scope 'files.manage' needed by folders_create`,
    `Node 'host-${i % 7}' joined the cluster from 10.0.0.${i % 250}:8788`,
  ];
  return {
    timestamp: new Date(ms).toISOString(),
    category,
    severity,
    summary: summaries[i % summaries.length] + extra,
    target: `folders/f_${id}`,
    actor: token,
    metadata: { transport: 'api', operation: 'folders_create', request_id: `req-${id}`, status: severity === 'info' ? 201 : 403 },
  };
}

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

/** One keep-alive GET, body drained; resolves with the parsed JSON. */
function getter(base: string, token: string): (p: string) => Promise<any> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const u = new URL(base);
  return (p) =>
    new Promise((resolve, reject) => {
      const req = http.request({ host: u.hostname, port: u.port, path: p, agent, headers: { authorization: `Bearer ${token}` } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () =>
          res.statusCode === 200 ? resolve(JSON.parse(Buffer.concat(chunks).toString('utf8'))) : reject(new Error(`${p}: ${res.statusCode}`)),
        );
      });
      req.on('error', reject);
      req.end();
    });
}

/** Bump when `row()` or the spread of the rows changes: the cached log is rebuilt. */
const RECIPE = 'activity-bench-rows-v1';
const SPAN_MS = 30 * 86_400_000;

/**
 * Writes the rows into `<dir>/db`, or copies them from the cache of an
 * earlier run (HOSTD_TEST_CACHE, default /var/cache/hostd-test), keyed by the
 * recipe and the row count. Returns the time the newest row was written for.
 */
async function fill(dir: string, n: number): Promise<number> {
  const cacheRoot = path.join(process.env.HOSTD_TEST_CACHE ?? '/var/cache/hostd-test', 'bench-activity');
  const key = crypto
    .createHash('sha256')
    .update(`${RECIPE}|${INDEX_FORMAT}|${n}|${fs.readFileSync(new URL(import.meta.url))}`)
    .digest('hex')
    .slice(0, 16);
  const cached = path.join(cacheRoot, key);
  const t0 = performance.now();
  if (fs.existsSync(path.join(cached, 'complete'))) {
    fs.cpSync(path.join(cached, 'db'), path.join(dir, 'db'), { recursive: true });
    const end = Number(fs.readFileSync(path.join(cached, 'complete'), 'utf8'));
    print('activity_fill_s', (performance.now() - t0) / 1000, 1);
    return end;
  }
  const end = Date.now() - 60_000;
  const r = rng(42);
  const store = await Store.open(path.join(dir, 'db'));
  const log = new ActivityLog(store, { maxAgeDays: 0, maxRows: n * 2, pruneEveryMs: 3_600_000 });
  const chunk = 5000;
  for (let i = 0; i < n; i += chunk) {
    const rows: NewActivity[] = [];
    for (let j = i; j < Math.min(n, i + chunk); j++) rows.push(row(j, end - SPAN_MS + Math.floor((j / n) * SPAN_MS), r));
    await log.recordMany(rows);
  }
  await store.close();
  print('activity_fill_s', (performance.now() - t0) / 1000, 1);
  try {
    const tmp = `${cached}.${process.pid}.tmp`;
    fs.mkdirSync(tmp, { recursive: true });
    fs.cpSync(path.join(dir, 'db'), path.join(tmp, 'db'), { recursive: true });
    fs.writeFileSync(path.join(tmp, 'complete'), String(end));
    fs.rmSync(cached, { recursive: true, force: true });
    fs.renameSync(tmp, cached);
  } catch (err) {
    process.stdout.write(`# activity: could not cache the filled log in ${cacheRoot}: ${(err as Error).message}\n`);
  }
  return end;
}

export async function activityQueries(): Promise<void> {
  const n = Number(process.env.BENCH_ACTIVITY_ROWS ?? 1_000_000);
  const dir = tempDir('hostd-bench-activity-');
  print('activity_rows', n, 0);
  const end = await fill(dir, n);

  const d = await startDaemon({ dataDir: dir, env: { HOSTD_ACTIVITY_MAX_ROWS: String(n * 2), HOSTD_ACTIVITY_MAX_AGE_DAYS: '0' }, logToFile: true });
  try {
    const token = await d.token('bench', ['system.read']);
    const get = getter(d.url, token);
    const day = 86_400_000;
    const iso = (ms: number) => encodeURIComponent(new Date(ms).toISOString());
    const window = `since=${iso(end - 20 * day)}&until=${iso(end - 10 * day)}`;
    const queries: Record<string, string> = {
      first_page: 'limit=50',
      query: `category=auth&severity=warning&search=lacks%20scope&${window}&limit=50`,
      category: 'category=update&severity=critical&limit=50',
      search: 'search=snapshot&limit=50',
      search_rare: 'search=quarantine&limit=50',
      window: `since=${iso(end - 10 * day - day)}&until=${iso(end - 10 * day)}&limit=50`,
    };
    const counts: Record<string, number> = {};
    for (const [k, q] of Object.entries(queries)) counts[k] = (await get(`/api/v1/activity?${q}`)).events.length;
    // Warm up, then alternate rounds so that drift on a shared machine hits every query alike.
    for (const q of Object.values(queries)) await p50Of(20, () => get(`/api/v1/activity?${q}`));
    const rounds: Record<string, number[]> = Object.fromEntries(Object.keys(queries).map((k) => [k, []]));
    for (let i = 0; i < 5; i++) {
      for (const [k, q] of Object.entries(queries)) rounds[k].push(await p50Of(40, () => get(`/api/v1/activity?${q}`)));
    }
    const p50 = (k: string) => median(rounds[k]);
    const base = p50('first_page');
    print('activity_first_page_ms', base);
    print('activity_query_ms', p50('query'));
    print('activity_query_ratio', p50('query') / base);
    for (const k of ['category', 'search', 'search_rare', 'window']) {
      print(`activity_${k}_ms`, p50(k));
      print(`activity_${k}_ratio`, p50(k) / base);
    }
    for (const [k, c] of Object.entries(counts)) print(`activity_${k}_events`, c, 0);
  } finally {
    await d.stop();
  }
}
