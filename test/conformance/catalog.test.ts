/**
 * GET /api/v1/catalog against a real daemon: the same operations as the
 * registry, each with what the spec lists for it (item 3 of issue 2, the half
 * that the conformance walk relies on).
 */
import { expect } from 'chai';
import { ALL_SCOPES, operations } from '../../api/registry/index.js';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import type { CatalogEntry } from '../../api/catalog.js';
import { API, Problems, errorProblem, raw } from '../helpers/conformance.js';

type Entry = CatalogEntry;

describe('GET /api/v1/catalog', function () {
  let d: TestDaemon;
  let token: string;
  let body: { count: number; endpoints: Entry[] };

  before(async function () {
    this.timeout(60_000);
    d = await startDaemon();
    token = await d.token('catalog-reader', ['system.read']);
    const r = await d.request('GET', `${API}/catalog`, { token });
    expect(r.status).to.equal(200);
    body = r.body;
  });

  it('lists every operation of the registry, each once', () => {
    expect(body.count).to.equal(operations.length);
    expect(body.endpoints).to.have.length(operations.length);
    const names = body.endpoints.map((e) => e.operation);
    expect(new Set(names).size).to.equal(operations.length);
    expect([...names].sort()).to.deep.equal(operations.map((o) => o.name).sort());
  });

  it('gives each its method, full path, summary, scopes, hints, and argument schema, as the registry says', () => {
    const p = new Problems();
    const byName = new Map(body.endpoints.map((e) => [e.operation, e]));
    for (const op of operations) {
      const e = byName.get(op.name)!;
      const want = {
        method: op.method,
        path: API + op.path,
        summary: op.summary,
        scopes: [...op.scopes],
        hints: [...op.hints],
        arguments: op.schema,
      };
      const got = { method: e.method, path: e.path, summary: e.summary, scopes: e.scopes, hints: e.hints, arguments: e.arguments };
      p.add(op.name, JSON.stringify(got) === JSON.stringify(want) ? undefined : `catalog ${JSON.stringify(got).slice(0, 300)}`);
      p.add(op.name, typeof e.summary === 'string' && e.summary.length > 0 ? undefined : 'no summary');
      p.add(op.name, e.read_only === op.hints.includes('RO') ? undefined : 'read_only disagrees with the RO hint');
    }
    p.check(operations.length * 3);
  });

  it('names only the scopes the spec defines', () => {
    expect([...ALL_SCOPES].sort()).to.deep.equal([
      'apps.manage',
      'apps.read',
      'connections.manage',
      'connections.read',
      'files.manage',
      'files.read',
      'lxc.exec',
      'lxc.manage',
      'lxc.read',
      'proxy.manage',
      'proxy.read',
      'sandbox.manage',
      'sandbox.read',
      'system.read',
      'vm.exec',
      'vm.manage',
      'vm.read',
    ]);
    for (const e of body.endpoints) for (const s of e.scopes) expect(ALL_SCOPES.has(s), `${e.operation}: ${s}`).to.equal(true);
  });

  it('needs a valid token (401 without), but no particular scope', async () => {
    expect(errorProblem(await raw(d.url, 'GET', `${API}/catalog`), 401)).to.equal(undefined);
    const bare = await d.token('catalog-bare', []);
    expect((await d.request('GET', `${API}/catalog`, { token: bare })).status).to.equal(200);
  });

  it('is stable: a second call answers the same document', async () => {
    const again = await d.request('GET', `${API}/catalog`, { token });
    expect(again.body).to.deep.equal(body);
  });
});
