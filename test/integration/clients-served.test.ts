/**
 * "Say what works": which domains this build serves comes from one source,
 * the catalog's `implemented` flags (each handler's isBuilt), and is said the
 * same way by `hostctl ops` and by the README's first lines.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { operations } from '../../api/registry/index.js';
import { README_BEGIN, README_END, servedLines, servedMarkdown, servedOf, type CatalogRow } from '../../daemon/cli/served.js';
import { ROOT, hostctl, startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';

describe('what this build serves', function () {
  let d: TestDaemon;
  let rows: CatalogRow[];

  before(async function () {
    this.timeout(60_000);
    d = await startDaemon();
    const r = await d.admin.request('GET', '/api/v1/catalog');
    expect(r.status).to.equal(200);
    rows = r.body.endpoints;
  });

  it('groups the catalog by domain: all built, some built, none built', () => {
    const fake: CatalogRow[] = [
      { operation: 'a_1', domain: 'a', implemented: true },
      { operation: 'a_2', domain: 'a', implemented: true },
      { operation: 'b_1', domain: 'b', implemented: true },
      { operation: 'b_2', domain: 'b', implemented: false },
      { operation: 'c_1', domain: 'c', implemented: false },
    ];
    expect(servedLines(servedOf(fake))).to.deep.equal(['serves: a', 'partly: b (1 of 2 operations)', 'not yet: c (their operations answer 501)']);
    // When the last one lands, it moves on its own.
    expect(servedLines(servedOf(fake.map((r) => ({ ...r, implemented: true }))))).to.deep.equal(['serves: a, b, c']);
  });

  it('hostctl ops begins with it and marks each operation built or not, as the catalog does', async function () {
    this.timeout(30_000);
    const r = await hostctl(d.dataDir, ['ops']);
    expect(r.code, r.stderr).to.equal(0);
    const want = servedLines(servedOf(rows));
    const lines = r.stdout.split('\n');
    expect(lines.slice(0, want.length)).to.deep.equal(want);
    expect(lines[want.length]).to.equal('');
    expect(lines[want.length + 1]).to.match(/^OPERATION\s+METHOD\s+PATH\s+SCOPES\s+BUILT$/);
    const table = new Map(lines.slice(want.length + 2).filter(Boolean).map((l) => {
      const cells = l.split(/\s{2,}/);
      return [cells[0], cells[cells.length - 1]];
    }));
    expect(table.size).to.equal(operations.length);
    for (const e of rows) expect(table.get(e.operation), e.operation).to.equal(e.implemented ? 'yes' : 'no (501)');
    expect(rows.some((e) => e.implemented)).to.equal(true);
  });

  it('hostctl ops without a daemon lists the registry and says the built state is unknown', async function () {
    this.timeout(30_000);
    const r = await hostctl(tempDir('hostd-served-none-'), ['ops']);
    expect(r.code).to.equal(0);
    expect(r.stderr).to.contain('which operations this build serves is unknown without the daemon');
    expect(r.stdout.split('\n')[0]).to.match(/^OPERATION\s+/);
  });

  it("the README's first lines say the same (else: run `npm run readme`)", () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const b = readme.indexOf(README_BEGIN);
    const e = readme.indexOf(README_END);
    expect(b, 'README has no served block').to.be.greaterThan(0);
    // Among the first lines: right after the title and the one-paragraph description.
    expect(readme.slice(0, b).split('\n').length).to.be.below(10);
    const block = readme.slice(b, e + README_END.length);
    expect(block, "README's served block is stale: run `npm run readme`").to.equal(servedMarkdown(servedOf(rows)));
  });
});
