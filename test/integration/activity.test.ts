/**
 * The activity log end to end (issue 2, item 5): one row per mutating call
 * (warning when it fails), none for read-only calls, GET /activity filters and
 * cursor pagination, and token secrets never reaching a row, a response or the
 * daemon's log.
 */
import { expect } from 'chai';
import type { Operation } from '../../api/registry/types.js';
import { ALL_SCOPES, operations, getOperation } from '../../api/registry/index.js';
import { eventually, startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { API, Problems, callFor, minimalArgs, pool, raw, show, type RawReply } from '../helpers/conformance.js';

interface Row {
  id: string;
  timestamp: string;
  category: string;
  severity: string;
  summary: string;
  target: string;
  actor: string;
  metadata: Record<string, any> & { transport: string };
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

describe('activity log', function () {
  let d: TestDaemon;
  let tok: string;
  let reader: string;
  const secrets: string[] = [];
  let stdout = '';
  /** Every response body this file received from the API. */
  const seen: string[] = [];

  async function api(method: string, path: string, body?: unknown, token: string | null = tok, rawBody?: string | Buffer): Promise<RawReply> {
    const r = await raw(d.url, method, path, { token: token ?? undefined, body: rawBody ?? (body === undefined ? undefined : JSON.stringify(body)) });
    seen.push(r.text);
    return r;
  }

  async function page(query: string): Promise<{ events: Row[]; next_cursor: string | null }> {
    const r = await api('GET', `${API}/activity${query ? '?' + query : ''}`);
    expect(r.status, show(r)).to.equal(200);
    return r.body;
  }

  /** Every row of a query, following next_cursor. */
  async function everything(query: string, limit: number): Promise<{ rows: Row[]; pages: number }> {
    const rows: Row[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = [query, `limit=${limit}`, cursor ? `cursor=${encodeURIComponent(cursor)}` : ''].filter(Boolean).join('&');
      const p = await page(q);
      expect(p.events.length).to.be.at.most(limit);
      if (p.next_cursor) expect(p.events.length).to.equal(limit);
      rows.push(...p.events);
      cursor = p.next_cursor;
      pages++;
      expect(pages).to.be.below(500);
    } while (cursor);
    return { rows, pages };
  }

  /** The rows written while `fn` ran (nothing else writes meanwhile). */
  async function written<T>(fn: () => Promise<T>): Promise<{ result: T; rows: Row[] }> {
    const before = new Set((await page('limit=200')).events.map((e) => e.id));
    const result = await fn();
    const after = (await page('limit=200')).events;
    return { result, rows: after.filter((e) => !before.has(e.id)) };
  }

  before(async function () {
    this.timeout(60_000);
    d = await startDaemon();
    d.proc.stdout!.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    d.proc.stderr!.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    tok = await d.token('act-bot', [...ALL_SCOPES]);
    reader = await d.token('act-reader', ['files.read', 'system.read']);
    secrets.push(tok, reader);
  });

  const checkRow = (r: Row, op: Operation, actor: string, severity: string, t0: number, t1: number) => {
    expect(r.category, op.name).to.equal(op.category);
    expect(r.severity, op.name).to.equal(severity);
    expect(r.summary, op.name).to.be.a('string').and.not.equal('');
    expect(r.target, op.name).to.be.a('string');
    expect(r.timestamp, op.name).to.match(RFC3339);
    const ts = Date.parse(r.timestamp);
    expect(ts, `${op.name} timestamp`).to.be.within(t0 - 5, t1 + 5);
    expect(r.actor, op.name).to.equal(actor);
    expect(r.metadata.transport, op.name).to.equal('api');
  };

  describe('rows', () => {
    it('a successful mutating call writes exactly one info row: category, summary, target, timestamp, actor, transport api', async () => {
      const op = getOperation('folders_create')!;
      const t0 = Date.now();
      const { result, rows } = await written(() => api('POST', `${API}/folders`, { storage_id: 'default', name: 'act-first' }));
      const t1 = Date.now();
      expect(result.status, show(result)).to.equal(201);
      expect(rows).to.have.length(1);
      checkRow(rows[0], op, 'act-bot', 'info', t0, t1);
      expect(rows[0].target).to.contain('act-first');
      expect(rows[0].summary).to.contain('act-first');
      expect(rows[0].metadata.operation).to.equal('folders_create');
    });

    it('every mutating operation of the registry writes exactly one row per call (warning when it fails); read-only ones none', async function () {
      // 129 operations, three requests each, one at a time: minutes on a loaded machine.
      this.timeout(300_000);
      const p = new Problems();
      for (const op of operations) {
        const c = callFor(op, minimalArgs(op));
        const t0 = Date.now();
        const { result, rows } = await written(() => api(c.method, c.path, undefined, tok, c.body));
        const t1 = Date.now();
        if (op.readOnly) {
          p.add(op.name, rows.length === 0 ? undefined : `read-only call (${result.status}) wrote ${rows.length} rows`);
          continue;
        }
        if (rows.length !== 1) {
          p.add(op.name, `mutating call (${result.status}) wrote ${rows.length} rows`);
          continue;
        }
        let problem: string | undefined;
        try {
          checkRow(rows[0], op, 'act-bot', result.status < 400 ? 'info' : 'warning', t0, t1);
          expect(rows[0].metadata.status).to.equal(result.status);
          if (result.status >= 400) expect(rows[0].summary).to.contain(result.body.error);
        } catch (e) {
          problem = (e as Error).message;
        }
        p.add(op.name, problem);
      }
      p.check(129);
    });

    it('each folders operation that succeeds writes one info row naming its folder', async () => {
      const mk = await api('POST', `${API}/folders`, { storage_id: 'default', name: 'act-life' });
      expect(mk.status).to.equal(201);
      const id = mk.body.folder.folder_id as string;
      const f = `${API}/folders/${id}`;
      const steps: Array<[string, string, string, unknown]> = [
        ['folders_subfolders_create', 'POST', `${f}/subfolders`, { name: 'docs' }],
        ['folders_subfolders_batch_create', 'POST', `${f}/subfolders/batch`, { names: ['b1', 'b2'] }],
        ['folders_entries_move', 'PATCH', `${f}/entries/docs`, { dst_sub_path: 'docs2' }],
        ['folders_entries_copy', 'POST', `${f}/entries/docs2/copy`, { dst_sub_path: 'copy1' }],
        ['folders_entries_batch_move', 'POST', `${f}/entries/batch`, { moves: [{ src_sub_path: 'b1', dst_sub_path: 'b1m' }] }],
        ['folders_entries_delete', 'DELETE', `${f}/entries/copy1`, undefined],
        ['folders_update', 'PATCH', f, { new_name: 'act-life2' }],
        ['folders_delete', 'DELETE', f, undefined],
      ];
      for (const [name, method, path, body] of steps) {
        const op = getOperation(name)!;
        const t0 = Date.now();
        const { result, rows } = await written(() => api(method, path, body));
        const t1 = Date.now();
        expect(result.status, `${name}: ${show(result)}`).to.be.within(200, 299);
        expect(rows, name).to.have.length(1);
        checkRow(rows[0], op, 'act-bot', 'info', t0, t1);
        expect(rows[0].target, name).to.match(/act-life/);
        expect(rows[0].metadata.operation).to.equal(name);
      }
    });

    it("failed mutating calls write exactly one warning row: 409 name taken, 400 schema, 400 handler, 400 body, 403, 404, 413, and a runtime domain's failure", async () => {
      const cases: Array<[string, string, string, () => Promise<RawReply>, number | number[]]> = [
        ['409 name taken', 'folders_create', 'act-bot', () => api('POST', `${API}/folders`, { storage_id: 'default', name: 'act-first' }), 409],
        ['400 unknown argument', 'folders_create', 'act-bot', () => api('POST', `${API}/folders`, { storage_id: 'default', name: 'n', zz: 1 }), 400],
        ['400 bad name', 'folders_create', 'act-bot', () => api('POST', `${API}/folders`, { storage_id: 'default', name: '..' }), 400],
        ['400 not JSON', 'folders_create', 'act-bot', () => api('POST', `${API}/folders`, undefined, tok, '{oops'), 400],
        ['403 scope', 'folders_create', 'act-reader', () => api('POST', `${API}/folders`, { storage_id: 'default', name: 'n' }, reader), 403],
        ['404 pool', 'folders_create', 'act-bot', () => api('POST', `${API}/folders`, { storage_id: 'nope', name: 'n' }), 404],
        ['404 folder', 'folders_delete', 'act-bot', () => api('DELETE', `${API}/folders/f_nope`), 404],
        ['413', 'folders_create', 'act-bot', () => api('POST', `${API}/folders`, undefined, tok, Buffer.alloc(1048577, 0x20)), 413],
        // An unknown image is 404 where QEMU is installed, 503 naming it where not: one row either way.
        ['vms image', 'vms_create', 'act-bot', () => api('POST', `${API}/vms`, { name: 'v', image_id: 'i' }), [404, 503]],
      ];
      for (const [what, name, actor, call, status] of cases) {
        const t0 = Date.now();
        const { result, rows } = await written(call);
        const t1 = Date.now();
        expect(result.status, `${what}: ${show(result)}`).to.be.oneOf([status].flat());
        expect(rows, what).to.have.length(1);
        checkRow(rows[0], getOperation(name)!, actor, 'warning', t0, t1);
        expect(rows[0].metadata.status, what).to.equal(result.status);
        expect(rows[0].summary, what).to.contain(result.body.error);
      }
    });

    it('failed read-only calls write no row', async () => {
      for (const call of [
        () => api('GET', `${API}/tasks/task_nope`),
        () => api('GET', `${API}/activity?limit=0`),
        () => api('GET', `${API}/folders`, undefined, tok, '{}'),
        () => api('GET', `${API}/vms`),
        () => api('GET', `${API}/system/health`, undefined, reader),
      ]) {
        const { result, rows } = await written(call);
        expect(result.status).to.be.at.least(200);
        expect(rows, show(result)).to.have.length(0);
      }
    });
  });

  describe('GET /activity', () => {
    let pageRows: Row[] = [];
    const PG = 'zpg-';

    before(async function () {
      this.timeout(60_000);
      // ~120 rows quickly: 60 creates and 60 deletes, ten at a time (several per millisecond).
      const names = Array.from({ length: 60 }, (_, i) => `${PG}${String(i).padStart(3, '0')}`);
      const ids: string[] = [];
      await pool(names, 10, async (name) => {
        const r = await api('POST', `${API}/folders`, { storage_id: 'default', name });
        expect(r.status, show(r)).to.equal(201);
        ids.push(r.body.folder.folder_id);
      });
      await pool(ids, 10, async (id) => {
        const r = await api('DELETE', `${API}/folders/${id}`);
        expect(r.status, show(r)).to.equal(200);
      });
      pageRows = (await page(`search=${PG}&limit=200`)).events;
    });

    it('has the 120 rows, newest first', () => {
      expect(pageRows).to.have.length(120);
      for (let i = 1; i < pageRows.length; i++) {
        expect(pageRows[i - 1].id > pageRows[i].id, 'ids descend').to.equal(true);
        expect(Date.parse(pageRows[i - 1].timestamp)).to.be.at.least(Date.parse(pageRows[i].timestamp));
      }
    });

    it('limit: default 50, 1 to 200, 0 and 201 are 400', async () => {
      expect((await page('')).events).to.have.length(50);
      expect((await page('limit=1')).events).to.have.length(1);
      expect((await page('limit=200')).events).to.have.length(200);
      for (const bad of ['0', '201', '-1', 'abc', '1.5']) {
        const r = await api('GET', `${API}/activity?limit=${bad}`);
        expect(r.status, `limit=${bad}`).to.equal(400);
        expect(Object.keys(r.body)).to.deep.equal(['error']);
        expect(r.body.error).to.contain("'limit'");
      }
    });

    it('cursor pagination walks every row once, newest first, with no gaps, for several page sizes and filters', async () => {
      for (const limit of [1, 7, 50, 200]) {
        const { rows, pages } = await everything(`search=${PG}`, limit);
        expect(
          rows.map((r) => r.id),
          `limit ${limit}`,
        ).to.deep.equal(pageRows.map((r) => r.id));
        expect(pages, `pages of ${limit}`).to.equal(Math.ceil(120 / limit));
      }
      // The whole log, unfiltered, pages the same as one big read.
      const whole = await everything('', 13);
      const ids = whole.rows.map((r) => r.id);
      expect(new Set(ids).size).to.equal(ids.length);
      const big = await everything('', 200);
      expect(ids).to.deep.equal(big.rows.map((r) => r.id));
      // With a category filter: only creates (storage) of the batch... and deletes are storage too.
      const storage = await everything(`category=storage&search=${PG}`, 9);
      expect(storage.rows).to.have.length(120);
      expect(storage.rows.every((r) => r.category === 'storage')).to.equal(true);
    });

    it('rows written after a cursor was issued do not appear on later pages', async () => {
      const first = await page(`search=${PG}&limit=5`);
      const mk = await api('POST', `${API}/folders`, { storage_id: 'default', name: 'zlate-written-after' });
      expect(mk.status).to.equal(201);
      const second = await page(`search=${PG}&limit=5&cursor=${first.next_cursor}`);
      expect(second.events.map((r) => r.id)).to.deep.equal(pageRows.slice(5, 10).map((r) => r.id));
      expect((await api('DELETE', `${API}/folders/${mk.body.folder.folder_id}`)).status).to.equal(200);
    });

    it('a bad cursor is 400', async () => {
      for (const bad of [
        'garbage!',
        Buffer.from('hello').toString('base64url'),
        'MDAw',
        '%00',
        Buffer.from('999999999999999.000000.zzzzzz').toString('base64url'),
      ]) {
        const r = await api('GET', `${API}/activity?cursor=${encodeURIComponent(bad)}`);
        expect(r.status, `${bad}: ${show(r)}`).to.equal(400);
        expect(r.body.error).to.contain("'cursor'");
      }
    });

    it('filters by category and severity (valid values only)', async () => {
      const storage = await page('category=storage&limit=200');
      expect(storage.events.length).to.be.greaterThan(100);
      expect(storage.events.every((r) => r.category === 'storage')).to.equal(true);
      const file = await page('category=file&limit=200');
      expect(file.events.length).to.be.greaterThan(0);
      expect(file.events.every((r) => r.category === 'file')).to.equal(true);
      const warn = await page('severity=warning&limit=200');
      expect(warn.events.length).to.be.greaterThan(5);
      expect(warn.events.every((r) => r.severity === 'warning')).to.equal(true);
      const both = await page('severity=warning&category=storage&limit=200');
      expect(both.events.every((r) => r.severity === 'warning' && r.category === 'storage')).to.equal(true);
      expect((await page('severity=critical')).events).to.have.length(0);
      for (const bad of ['category=nope', 'severity=error', 'category=', 'severity=INFO']) {
        const r = await api('GET', `${API}/activity?${bad}`);
        expect(r.status, bad).to.equal(400);
        expect(r.body.error).to.contain(`'${bad.split('=')[0]}'`);
      }
    });

    it('search matches a substring of the summary or of the target label, case-insensitively', async () => {
      const mk = await api('POST', `${API}/folders`, { storage_id: 'default', name: 'TgtOnlyXq' });
      expect(mk.status).to.equal(201);
      const sub = await api('POST', `${API}/folders/${mk.body.folder.folder_id}/subfolders`, { name: 'inner' });
      expect(sub.status).to.equal(201);
      const byTarget = (await page('search=tgtonlyxq&limit=200')).events;
      const subRow = byTarget.find((r) => r.metadata.operation === 'folders_subfolders_create');
      expect(subRow, 'the subfolder row is found by its target').to.not.equal(undefined);
      expect(subRow!.summary.toLowerCase()).to.not.contain('tgtonlyxq');
      expect(subRow!.target.toLowerCase()).to.contain('tgtonlyxq');
      // By summary only: the failed vms_create row ('Create a VM from an image or captured template failed: ...') has target 'vms'.
      const bySummary = (await page('search=CAPTURED%20TEMPLATE&limit=200')).events;
      expect(bySummary.length).to.be.greaterThan(0);
      expect(bySummary.every((r) => r.summary.toLowerCase().includes('captured template'))).to.equal(true);
      expect(bySummary.some((r) => !r.target.toLowerCase().includes('captured template'))).to.equal(true);
      expect((await page('search=zz-no-such-text-anywhere')).events).to.have.length(0);
    });

    it('since and until are inclusive RFC 3339 bounds (Z or offset), and combine with cursors', async () => {
      const mid = pageRows[60];
      const t = Date.parse(mid.timestamp);
      const iso = (ms: number) => new Date(ms).toISOString();
      const atOrAfter = (await everything(`search=${PG}&since=${encodeURIComponent(mid.timestamp)}`, 200)).rows;
      expect(atOrAfter.map((r) => r.id)).to.include(mid.id);
      expect(atOrAfter.every((r) => Date.parse(r.timestamp) >= t)).to.equal(true);
      expect(atOrAfter.length).to.equal(pageRows.filter((r) => Date.parse(r.timestamp) >= t).length);
      const atOrBefore = (await everything(`search=${PG}&until=${encodeURIComponent(mid.timestamp)}`, 200)).rows;
      expect(atOrBefore.map((r) => r.id)).to.include(mid.id);
      expect(atOrBefore.every((r) => Date.parse(r.timestamp) <= t)).to.equal(true);
      expect(atOrBefore.length).to.equal(pageRows.filter((r) => Date.parse(r.timestamp) <= t).length);
      const exactly = (await everything(`search=${PG}&since=${encodeURIComponent(mid.timestamp)}&until=${encodeURIComponent(mid.timestamp)}`, 3)).rows;
      expect(exactly.map((r) => r.id)).to.deep.equal(pageRows.filter((r) => Date.parse(r.timestamp) === t).map((r) => r.id));
      const after = (await page(`search=${PG}&limit=200&since=${encodeURIComponent(iso(t + 1))}`)).events;
      expect(after.map((r) => r.id)).to.not.include(mid.id);
      const before = (await page(`search=${PG}&limit=200&until=${encodeURIComponent(iso(t - 1))}`)).events;
      expect(before.map((r) => r.id)).to.not.include(mid.id);
      // The same instant written with an offset.
      const d0 = new Date(t + 2 * 3600_000);
      const offset = `${d0.toISOString().slice(0, 23)}+02:00`;
      const viaOffset = (await everything(`search=${PG}&since=${encodeURIComponent(offset)}`, 200)).rows;
      expect(viaOffset.map((r) => r.id)).to.deep.equal(atOrAfter.map((r) => r.id));
      // since after until: nothing.
      expect((await page(`since=${encodeURIComponent(iso(t + 1000))}&until=${encodeURIComponent(iso(t))}`)).events).to.have.length(0);
      for (const bad of ['since=yesterday', 'until=2024-13-45T00:00:00Z', 'since=2024-01-01', 'until=1700000000000']) {
        const r = await api('GET', `${API}/activity?${bad}`);
        expect(r.status, `${bad}: ${show(r)}`).to.equal(400);
        expect(r.body.error).to.contain(`'${bad.split('=')[0]}'`);
      }
    });
  });

  describe('secrets', () => {
    it('a token secret never appears in an activity row, an API response or the daemon log', async () => {
      // More uses of the secrets: failing ones too.
      await api('GET', `${API}/folders`, undefined, reader);
      await api('POST', `${API}/folders`, { storage_id: 'default', name: 'x' }, reader);
      await api('GET', `${API}/folders`, undefined, `${tok}x`);
      await raw(d.url, 'GET', `${API}/folders`, { headers: { authorization: `Basic ${tok}` } });
      await api('GET', `${API}/nope`, undefined, tok);
      const all = await everything('', 200);
      expect(all.rows.length).to.be.greaterThan(200);
      const rowsText = JSON.stringify(all.rows);
      const admin = await d.admin.request('GET', '/admin/tokens');
      // The daemon's log is one stream written in order: once the line of a later request has reached us, every earlier line has.
      const marker = `act-flush-${Date.now()}`;
      expect((await raw(d.url, 'GET', `${API}/system/health`, { token: reader, headers: { 'x-request-id': marker } })).status).to.equal(200);
      await eventually(() => stdout.includes(marker) && d.logs.some((l) => l.req_id === marker), 30_000, 'the request line of the last request in the log');
      const logText = JSON.stringify(d.logs);
      expect(stdout.length).to.be.greaterThan(1000);
      for (const s of secrets) {
        const core = s.replace(/^hostd_/, '');
        for (const [what, text] of [
          ['activity rows', rowsText],
          ['API responses', seen.join('\n')],
          ['admin token list', JSON.stringify(admin.body)],
          ['parsed log', logText],
          ['raw stdout/stderr', stdout],
        ] as const) {
          expect(text.includes(core), `secret found in ${what}`).to.equal(false);
        }
      }
      expect(seen.length).to.be.greaterThan(300);
    });
  });
});
