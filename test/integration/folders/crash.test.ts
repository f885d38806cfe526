/**
 * kill -9 in the middle of multi-step folder operations (copy, tree delete,
 * batch move, batch subfolder create): the daemon stops for good at a named
 * step (HOSTD_TEST_PAUSE_AT), the test kills it there, restarts it on the same
 * data dir and finds the operation either undone or finished, never half
 * done, and the retry answering what the state says.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { API_PREFIX as API } from '../../../api/catalog.js';
import { isPauseLine } from '../../../daemon/lib/test-pause.js';
import { eventually, startDaemon } from '../../helpers/daemon.js';
import { crashAt, pausedFolderDaemon, type FolderRound } from '../../helpers/folders-crash.js';

const SCOPES = ['files.read', 'files.manage'];

/** Every entry under `dir`: type, mode, content, link text (not times). */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (abs: string, rel: string) => {
    const st = fs.lstatSync(abs);
    let desc = `${st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'l' : 'f'} ${st.mode}`;
    if (st.isFile()) desc += ` ${fs.readFileSync(abs, 'utf8')}`;
    if (st.isSymbolicLink()) desc += ` -> ${fs.readlinkSync(abs)}`;
    out[rel] = desc;
    if (st.isDirectory()) for (const n of fs.readdirSync(abs).sort()) walk(path.join(abs, n), `${rel}/${n}`);
  };
  walk(dir, '.');
  return out;
}

/** The daemon's own temporary entries left in a folder (copies and deletions in progress). */
function leftovers(dir: string): string[] {
  const out: string[] = [];
  const walk = (abs: string) => {
    for (const e of fs.readdirSync(abs, { withFileTypes: true })) {
      if (e.name.startsWith('.hostd-')) out.push(path.relative(dir, path.join(abs, e.name)));
      else if (e.isDirectory()) walk(path.join(abs, e.name));
    }
  };
  walk(dir);
  return out;
}

describe('folders: kill -9 in the middle of multi-step operations', function () {
  this.timeout(120_000);

  /** A daemon that pauses at `step`, with a folder holding `src/` (a tree of 12 files) and files a, b, c. */
  async function setUp(step: string): Promise<FolderRound> {
    const r = await pausedFolderDaemon(step, 'crash', SCOPES);
    const dir = r.dir;
    fs.mkdirSync(path.join(dir, 'src', 'inner'), { recursive: true });
    for (let i = 0; i < 8; i++) fs.writeFileSync(path.join(dir, 'src', `f${i}.txt`), `file ${i}`);
    for (let i = 0; i < 4; i++) fs.writeFileSync(path.join(dir, 'src', 'inner', `g${i}.txt`), `inner ${i}`);
    fs.symlinkSync('f0.txt', path.join(dir, 'src', 'link'));
    for (const n of ['a', 'b', 'c']) fs.writeFileSync(path.join(dir, n), n);
    return r;
  }

  const crash = (r: FolderRound, step: string, method: string, url: string, body?: unknown) => crashAt(r, step, SCOPES, method, url, body);

  it('a copy killed half-way leaves no partial tree, and the retry copies it all', async () => {
    let r = await setUp('folders.copy');
    const url = `${API}/folders/${r.folderId}/entries/src/copy`;
    const before = tree(path.join(r.dir, 'src'));
    const pending = r.d.request('POST', url, { token: r.token, body: { dst_sub_path: 'dst' } }).catch(() => undefined);
    await eventually(() => r.d.logs.some((l) => isPauseLine(l, 'folders.copy')), 20_000, 'the copy to stop');
    // The partial copy is there, under the daemon's temporary name, when the daemon dies.
    const partial = leftovers(r.dir);
    expect(partial).to.have.length(1);
    expect(Object.keys(tree(path.join(r.dir, partial[0]))).length).to.be.within(2, Object.keys(before).length - 1);
    await r.d.kill();
    await pending;
    const d = await startDaemon({ dataDir: r.dataDir });
    r = { ...r, d, token: await d.token('after', SCOPES) };
    expect(leftovers(r.dir)).to.deep.equal([]);
    expect(fs.existsSync(path.join(r.dir, 'dst'))).to.equal(false);
    const again = await r.d.request('POST', url, { token: r.token, body: { dst_sub_path: 'dst' } });
    expect(again.status, again.text).to.equal(200);
    expect(again.body.to).to.deep.equal({ kind: 'folder', id: r.folderId, path: 'dst' });
    expect(tree(path.join(r.dir, 'dst'))).to.deep.equal(before);
  });

  it('a copy killed after it was put in place is kept, and the retry answers 409', async () => {
    let r = await setUp('folders.copy.placed');
    const url = `${API}/folders/${r.folderId}/entries/src/copy`;
    const before = tree(path.join(r.dir, 'src'));
    r = await crash(r, 'folders.copy.placed', 'POST', url, { dst_sub_path: 'dst' });
    expect(leftovers(r.dir)).to.deep.equal([]);
    expect(tree(path.join(r.dir, 'dst'))).to.deep.equal(before);
    const again = await r.d.request('POST', url, { token: r.token, body: { dst_sub_path: 'dst' } });
    expect(again.status).to.equal(409);
    expect(again.body).to.deep.equal({ error: "'dst' already exists" });
  });

  it('a tree delete killed half-way is finished at the start', async () => {
    let r = await setUp('folders.remove');
    r = await crash(r, 'folders.remove', 'DELETE', `${API}/folders/${r.folderId}/entries/src`);
    expect(leftovers(r.dir)).to.deep.equal([]);
    expect(fs.readdirSync(r.dir).sort()).to.deep.equal(['a', 'b', 'c']);
    const again = await r.d.request('DELETE', `${API}/folders/${r.folderId}/entries/src`, { token: r.token });
    expect(again.status).to.equal(404);
    expect(again.body).to.deep.equal({ error: "no such file or folder 'src'" });
  });

  it('a batch move killed after its first move is put back, and the retry moves them all', async () => {
    let r = await setUp('folders.moves');
    const url = `${API}/folders/${r.folderId}/entries/batch`;
    const moves = [
      { src_sub_path: 'a', dst_sub_path: 'src/a' },
      { src_sub_path: 'b', dst_sub_path: 'src/inner/b' },
      { src_sub_path: 'c', dst_sub_path: 'c2' },
    ];
    const before = tree(r.dir);
    r = await crash(r, 'folders.moves', 'POST', url, { moves });
    expect(tree(r.dir)).to.deep.equal(before);
    const again = await r.d.request('POST', url, { token: r.token, body: { moves } });
    expect(again.status, again.text).to.equal(200);
    expect(again.body.moved).to.deep.equal(moves);
    expect(fs.readFileSync(path.join(r.dir, 'src', 'inner', 'b'), 'utf8')).to.equal('b');
    expect(fs.readdirSync(r.dir).sort()).to.deep.equal(['c2', 'src']);
  });

  it('a batch subfolder create killed after its first folder is undone, and the retry makes them all', async () => {
    let r = await setUp('folders.mkdirs');
    const url = `${API}/folders/${r.folderId}/subfolders/batch`;
    const before = tree(r.dir);
    r = await crash(r, 'folders.mkdirs', 'POST', url, { names: ['n1', 'n2', 'n3'], sub_path: 'src' });
    expect(tree(r.dir)).to.deep.equal(before);
    const again = await r.d.request('POST', url, { token: r.token, body: { names: ['n1', 'n2', 'n3'], sub_path: 'src' } });
    expect(again.status, again.text).to.equal(201);
    expect(again.body.entries.map((e: { path: string }) => e.path)).to.deep.equal(['src/n1', 'src/n2', 'src/n3']);
  });
});
