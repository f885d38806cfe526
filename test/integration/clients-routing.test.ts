/**
 * Routing as real clients meet it: fixed paths answer with exactly their own
 * methods (405 otherwise), HEAD and OPTIONS, an empty peer_id, and
 * multi-segment parameters sent percent-encoded (`%2F`) as generated clients
 * send them, still confined to the folder.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { ALL_SCOPES } from '../../api/registry/index.js';
import { startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { API, expectError, raw } from '../helpers/conformance.js';

describe('routing for real clients', function () {
  let d: TestDaemon;
  let token: string;
  let poolDir: string;
  let folderId: string;
  let folderDir: string;

  before(async function () {
    this.timeout(60_000);
    poolDir = tempDir('hostd-routing-pool-');
    d = await startDaemon({ configYaml: `storage_pools:\n  - id: p\n    path: ${JSON.stringify(poolDir)}\n` });
    token = await d.token('routing', [...ALL_SCOPES]);
    const f = await d.request('POST', `${API}/folders`, { token, body: { storage_id: 'p', name: 'routed' } });
    expect(f.status, f.text).to.equal(201);
    folderId = f.body.folder.folder_id;
    folderDir = path.join(poolDir, 'routed');
  });

  const send = (method: string, p: string, body?: string, withToken = true) => raw(d.url, method, p, { token: withToken ? token : undefined, body });

  it("fixed paths answer 405 with exactly their own methods, not their templated siblings'", async () => {
    const cases: Array<[string, string, string]> = [
      ['DELETE', '/apps/discovered', 'GET, HEAD, OPTIONS'],
      ['DELETE', '/apps/templates', 'GET, HEAD, OPTIONS'],
      ['DELETE', '/sandboxes/images', 'GET, HEAD, OPTIONS'],
      ['DELETE', '/vms/images/catalog', 'GET, HEAD, OPTIONS'],
      ['GET', '/locations/discover', 'POST, OPTIONS'],
      ['DELETE', '/locations/discover', 'POST, OPTIONS'],
      ['PATCH', `/folders/0/entries/batch`, 'POST, OPTIONS'],
      ['DELETE', `/folders/${folderId}/entries/batch`, 'POST, OPTIONS'],
    ];
    for (const [m, p, allow] of cases) {
      const r = await send(m, API + p, m === 'GET' || m === 'DELETE' ? undefined : '{}');
      expectError(r, 405, `method ${m} is not allowed here`);
      expect(r.headers.allow, `${m} ${p}`).to.equal(allow);
    }
    // Without a token too: routing comes before authentication.
    const r = await send('DELETE', `${API}/apps/discovered`, undefined, false);
    expect([r.status, r.headers.allow]).to.deep.equal([405, 'GET, HEAD, OPTIONS']);
  });

  it('a multi-segment path ending in a literal stays one resource with the entry of that path', async () => {
    fs.mkdirSync(path.join(folderDir, 'a', 'b'), { recursive: true });
    fs.writeFileSync(path.join(folderDir, 'a', 'b', 'copy'), 'x');
    // `a/b/copy` is an entry (DELETE) and also `a/b` + the copy endpoint (POST): the method tells.
    const o = await send('OPTIONS', `${API}/folders/${folderId}/entries/a/b/copy`, undefined, false);
    expect([o.status, o.headers.allow]).to.deep.equal([204, 'POST, PATCH, DELETE, OPTIONS']);
    const del = await send('DELETE', `${API}/folders/${folderId}/entries/a/b/copy`);
    expect(del.status, del.text).to.equal(200);
    expect(fs.existsSync(path.join(folderDir, 'a', 'b', 'copy'))).to.equal(false);
    expect(fs.existsSync(path.join(folderDir, 'a', 'b'))).to.equal(true);
  });

  it('HEAD answers like GET without a body; OPTIONS answers 204 with Allow, without a token', async () => {
    const get = await send('GET', `${API}/catalog`);
    const head = await send('HEAD', `${API}/catalog`);
    expect(head.status).to.equal(200);
    expect(head.text).to.equal('');
    expect(head.headers['content-type']).to.equal(get.headers['content-type']);
    expect(head.headers['content-length']).to.equal(String(Buffer.byteLength(get.text)));
    // Authentication and scopes apply to HEAD as to GET.
    expect((await send('HEAD', `${API}/folders`, undefined, false)).status).to.equal(401);
    const nested = await send('HEAD', `${API}/folders/${folderId}/contents`);
    expect([nested.status, nested.text]).to.deep.equal([200, '']);
    const missing = await send('HEAD', `${API}/folders/f_nope/contents`);
    expect([missing.status, missing.text]).to.deep.equal([404, '']);

    const o = await send('OPTIONS', `${API}/folders`, undefined, false);
    expect(o.status).to.equal(204);
    expect(o.text).to.equal('');
    expect(o.headers.allow).to.equal('GET, HEAD, POST, OPTIONS');
    expect(o.headers['x-request-id']).to.be.a('string');
    const fixed = await send('OPTIONS', `${API}/apps/discovered`, undefined, false);
    expect([fixed.status, fixed.headers.allow]).to.deep.equal([204, 'GET, HEAD, OPTIONS']);
    expectError(await send('OPTIONS', `${API}/zz-nope`, undefined, false), 404, 'no endpoint');
    // 405 lists HEAD and OPTIONS with the rest.
    const put = await send('PUT', `${API}/folders`, '{}');
    expect(put.headers.allow).to.equal('GET, HEAD, POST, OPTIONS');
  });

  it("an empty peer_id is a 400 naming it (query string or body), never a 404 for a peer named ''", async () => {
    // (`POST /lxc/images/catalog` itself is a fixed path with GET only: 405 before any argument is read.)
    expectError(await send('POST', `${API}/lxc/images/catalog?peer_id=`, '{}'), 405, 'allowed: GET, HEAD, OPTIONS');
    expectError(await send('POST', `${API}/lxc/images/debian-12?peer_id=`, '{}'), 400, "'peer_id'");
    expectError(await send('POST', `${API}/folders`, JSON.stringify({ storage_id: 'p', name: 'y', peer_id: '' })), 400, "'peer_id'");
    const r = await send('GET', `${API}/folders?peer_id=`);
    expectError(r, 400, "'peer_id'");
    expect(r.body.error).to.equal("argument 'peer_id' must not be empty");
  });

  it('accepts %2F inside multi-segment parameters: delete, move and copy of nested entries', async () => {
    fs.mkdirSync(path.join(folderDir, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(folderDir, 'sub', 'b.txt'), 'b');
    fs.writeFileSync(path.join(folderDir, 'sub', 'c.txt'), 'c');
    fs.writeFileSync(path.join(folderDir, 'sub', 'd.txt'), 'd');

    const del = await send('DELETE', `${API}/folders/${folderId}/entries/sub%2Fb.txt`);
    expect(del.status, del.text).to.equal(200);
    expect(fs.existsSync(path.join(folderDir, 'sub', 'b.txt'))).to.equal(false);

    const mv = await send('PATCH', `${API}/folders/${folderId}/entries/sub%2Fc.txt`, JSON.stringify({ dst_sub_path: 'sub/moved.txt' }));
    expect(mv.status, mv.text).to.equal(200);
    expect(fs.readFileSync(path.join(folderDir, 'sub', 'moved.txt'), 'utf8')).to.equal('c');

    const cp = await send(
      'POST',
      `${API}/folders/${folderId}/entries/sub%2Fd.txt/copy`,
      JSON.stringify({ dst_folder_id: folderId, dst_sub_path: 'd-copy.txt' }),
    );
    expect(cp.status, cp.text).to.be.oneOf([200, 201]);
    // The copy may run as a task: wait for the file.
    for (let i = 0; i < 100 && !fs.existsSync(path.join(folderDir, 'd-copy.txt')); i++) await new Promise((r) => setTimeout(r, 50));
    expect(fs.readFileSync(path.join(folderDir, 'd-copy.txt'), 'utf8')).to.equal('d');

    // Encoded and unencoded separators may be mixed; both mean the same path.
    fs.mkdirSync(path.join(folderDir, 'x', 'y'), { recursive: true });
    fs.writeFileSync(path.join(folderDir, 'x', 'y', 'z.txt'), 'z');
    const mixed = await send('DELETE', `${API}/folders/${folderId}/entries/x/y%2Fz.txt`);
    expect(mixed.status, mixed.text).to.equal(200);
    expect(fs.existsSync(path.join(folderDir, 'x', 'y', 'z.txt'))).to.equal(false);
  });

  it('encoded separators stay confined to the folder: ../ in any spelling is refused', async () => {
    const outside = path.join(poolDir, 'outside.txt');
    fs.writeFileSync(outside, 'keep');
    for (const p of ['..%2Foutside.txt', '%2E%2E%2Foutside.txt', 'sub%2F..%2F..%2Foutside.txt', '%2Fetc%2Fpasswd', 'sub/..%2F..%2Foutside.txt']) {
      const r = await send('DELETE', `${API}/folders/${folderId}/entries/${p}`);
      expect(r.status, `${p}: ${r.text}`).to.equal(400);
      expect(r.body.error, p).to.contain("'sub_path'");
    }
    expect(fs.readFileSync(outside, 'utf8')).to.equal('keep');
  });
});
