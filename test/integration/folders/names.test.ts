/**
 * Names and destinations through the real daemon: control characters are
 * refused in every name the API creates, the schema refuses what the server
 * would, and an omitted copy destination path means the source's name at the
 * destination's root.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { API_PREFIX as API } from '../../../api/catalog.js';
import { startDaemon, type TestDaemon } from '../../helpers/daemon.js';

describe('folders: names and destinations over HTTP', function () {
  this.timeout(60_000);
  let d: TestDaemon;
  let token: string;
  let a: { folder_id: string; path: string };
  let b: { folder_id: string; path: string };

  const call = (method: string, p: string, body?: unknown) => d.request(method, `${API}${p}`, { token, body });

  before(async () => {
    d = await startDaemon();
    token = await d.token('names', ['files.read', 'files.manage']);
    a = (await call('POST', '/folders', { storage_id: 'default', name: 'a' })).body.folder;
    b = (await call('POST', '/folders', { storage_id: 'default', name: 'b' })).body.folder;
    fs.mkdirSync(path.join(a.path, 'docs'));
    fs.writeFileSync(path.join(a.path, 'docs', 'r.txt'), 'r');
  });

  after(async () => {
    await d?.stop();
  });

  it('refuses control characters in folder and subfolder names, creating nothing', async () => {
    const poolBefore = fs.readdirSync(path.dirname(a.path)).sort();
    for (const name of ['nl\nname', 'tab\tname', 'esc\u001bname', 'del\u007fname', 'c1\u0085name']) {
      const r = await call('POST', '/folders', { storage_id: 'default', name });
      expect(r.status, JSON.stringify(name)).to.equal(400);
      expect(r.body).to.deep.equal({
        error:
          "argument 'name' must be a name of 1-255 bytes of UTF-8 without control characters, '/' or '\\', not '.' or '..', not '.vms' and not starting with '.hostd-', in any case (hostd's own directories)",
      });
      const s = await call('POST', `/folders/${a.folder_id}/subfolders`, { name });
      expect(s.status).to.equal(400);
      expect(s.body).to.deep.equal({
        error: "argument 'name' must be a name of 1-255 bytes of UTF-8 without control characters, '/' or '\\', not '.' or '..'",
      });
      const u = await call('PATCH', `/folders/${a.folder_id}`, { new_name: name });
      expect(u.body).to.deep.equal({
        error:
          "argument 'new_name' must be a name of 1-255 bytes of UTF-8 without control characters, '/' or '\\', not '.' or '..', not '.vms' and not starting with '.hostd-', in any case (hostd's own directories)",
      });
    }
    expect(fs.readdirSync(path.dirname(a.path)).sort()).to.deep.equal(poolBefore);
    expect(fs.readdirSync(a.path)).to.deep.equal(['docs']);
  });

  it('refuses control characters in the name a move or copy creates', async () => {
    const m = await call('PATCH', `/folders/${a.folder_id}/entries/docs/r.txt`, { dst_sub_path: 'docs/r\n.txt' });
    expect(m.status).to.equal(400);
    expect(m.body).to.deep.equal({ error: "argument 'dst_sub_path' must not contain control characters in the name it creates" });
    const c = await call('POST', `/folders/${a.folder_id}/entries/docs/r.txt/copy`, { dst_target: { kind: 'folder', id: b.folder_id, path: 'r\t.txt' } });
    expect(c.status).to.equal(400);
    expect(c.body).to.deep.equal({ error: "argument 'dst_target.path' must not contain control characters in the name it creates" });
    const bm = await call('POST', `/folders/${a.folder_id}/entries/batch`, { moves: [{ src_sub_path: 'docs/r.txt', dst_sub_path: 'r\u0085' }] });
    expect(bm.body).to.deep.equal({ error: "argument 'moves[0].dst_sub_path' must not contain control characters in the name it creates" });
    expect(fs.readdirSync(path.join(a.path, 'docs'))).to.deep.equal(['r.txt']);
  });

  it('refuses by schema the empty name, new_name, pattern, names[] and moves[]', async () => {
    expect((await call('POST', '/folders', { storage_id: 'default', name: '' })).body).to.deep.equal({ error: "argument 'name' must not be empty" });
    expect((await call('PATCH', `/folders/${a.folder_id}`, { new_name: '' })).body).to.deep.equal({ error: "argument 'new_name' must not be empty" });
    expect((await d.request('GET', `${API}/folders/${a.folder_id}/search?pattern=`, { token })).body).to.deep.equal({
      error: "argument 'pattern' must not be empty",
    });
    const names = await call('POST', `/folders/${a.folder_id}/subfolders/batch`, { names: [] });
    expect(names.status).to.equal(400);
    expect(names.body.error).to.match(/^argument 'names' must NOT have fewer than 1 items/);
    const moves = await call('POST', `/folders/${a.folder_id}/entries/batch`, { moves: [] });
    expect(moves.status).to.equal(400);
    expect(moves.body.error).to.match(/^argument 'moves' must NOT have fewer than 1 items/);
  });

  it('copies to the root of a named destination under the same name when dst_sub_path is omitted', async () => {
    const r = await call('POST', `/folders/${a.folder_id}/entries/docs/r.txt/copy`, { dst_folder_id: b.folder_id });
    expect(r.status, r.text).to.equal(200);
    expect(r.body.to).to.deep.equal({ kind: 'folder', id: b.folder_id, path: 'r.txt' });
    expect(fs.readFileSync(path.join(b.path, 'r.txt'), 'utf8')).to.equal('r');
    const t = await call('POST', `/folders/${a.folder_id}/entries/docs/copy`, { dst_target: { kind: 'folder', id: b.folder_id } });
    expect(t.status, t.text).to.equal(200);
    expect(t.body.to).to.deep.equal({ kind: 'folder', id: b.folder_id, path: 'docs' });
    // Again: the name is taken now.
    const again = await call('POST', `/folders/${a.folder_id}/entries/docs/r.txt/copy`, { dst_folder_id: b.folder_id });
    expect(again.status).to.equal(409);
    expect(again.body).to.deep.equal({ error: "'r.txt' already exists" });
    // No destination named at all: a copy onto itself is never meant.
    const none = await call('POST', `/folders/${a.folder_id}/entries/docs/r.txt/copy`, {});
    expect(none.status).to.equal(400);
    expect(none.body).to.deep.equal({ error: "argument 'dst_sub_path' is required" });
    const mv = await call('PATCH', `/folders/${a.folder_id}/entries/docs/r.txt`, {});
    expect(mv.body).to.deep.equal({ error: "argument 'dst_sub_path' is required" });
  });
});
