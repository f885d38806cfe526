/**
 * `hostctl ops`: every operation of the registry with its method, path and
 * scopes, the same list the catalog serves, with or without a daemon.
 */
import { expect } from 'chai';
import { operations } from '../../api/registry/index.js';
import { hostctl, startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';

describe('hostctl ops', function () {
  this.timeout(60_000);
  let d: TestDaemon;

  before(async () => {
    d = await startDaemon();
  });
  after(async () => {
    await d?.stop();
  });

  const tableOf = (stdout: string) => {
    const lines = stdout.split('\n').filter(Boolean);
    expect(lines[0]).to.match(/^OPERATION\s+METHOD\s+PATH\s+SCOPES$/);
    return new Map(
      lines.slice(1).map((l) => {
        const [name, method, p, ...scopes] = l.split(/\s{2,}/);
        return [name, { method, path: p, scopes: scopes.join(' ') }];
      }),
    );
  };

  it('lists every operation the catalog serves, with its method, path and scopes', async () => {
    const r = await hostctl(d.dataDir, ['ops']);
    expect(r.code, r.stderr).to.equal(0);
    const table = tableOf(r.stdout);
    const cat = await d.admin.request('GET', '/api/v1/catalog');
    expect(cat.status).to.equal(200);
    const endpoints = cat.body.endpoints as Array<{ operation: string; method: string; path: string; scopes: string[] }>;
    expect([...table.keys()].sort()).to.deep.equal(endpoints.map((e) => e.operation).sort());
    for (const e of endpoints) {
      expect(table.get(e.operation), e.operation).to.deep.equal({ method: e.method, path: e.path, scopes: e.scopes.join(' + ') || '(any token)' });
    }
  });

  it('needs no daemon: the list is the registry', async () => {
    const r = await hostctl(tempDir('hostd-ops-none-'), ['ops']);
    expect(r.code, r.stderr).to.equal(0);
    expect(tableOf(r.stdout).size).to.equal(operations.length);
  });
});
