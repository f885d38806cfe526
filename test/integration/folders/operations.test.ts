/**
 * Folders domain against a real temp pool and a real Store: every operation,
 * its 404/409 answers, and every escape attempt (`..`, `a/../../x`, `/etc`,
 * NUL, backslash, symlinks inside a folder pointing outside, as a component
 * and as the target). After each test the directory outside the pool must be
 * exactly as it was.
 */
import { expect } from 'chai';
import { rejectsApi as rejects } from '../../helpers/expect.js';
import { execFileSync } from 'node:child_process';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { notFound } from '../../../daemon/lib/errors.js';
import type { ActivityNote, CallContext } from '../../../daemon/lib/caller.js';
import { folderHandlers } from '../../../daemon/folders/handlers.js';
import { openFoldersService, type FoldersService, type Folder, type Target } from '../../helpers/folders-service.js';
import { Store } from '../../../daemon/store/store.js';

// ---------------------------------------------------------------------------
// helpers

function recorder() {
  const notes: ActivityNote[] = [];
  const ctx: CallContext = {
    caller: { tokenId: 't1', tokenName: 'test', scopes: ['files.read', 'files.manage'], transport: 'api', origin: 'node-1' },
    requestId: 'r1',
    note(n) {
      notes.push(n);
    },
  };
  return { notes, ctx };
}

/** Everything under `dir`: type, size, mode, mtime (unless times is false), file content, link text. */
async function snapshot(dir: string, times = true): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  async function walk(abs: string, rel: string): Promise<void> {
    const st = await fsp.lstat(abs);
    let desc = `${st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'l' : st.isFile() ? 'f' : 'o'} ${st.mode}${times ? ` ${st.mtimeMs}` : ''}`;
    if (st.isFile()) desc += ` ${st.size} ${await fsp.readFile(abs, 'base64')}`;
    if (st.isSymbolicLink()) desc += ` -> ${await fsp.readlink(abs)}`;
    out[rel] = desc;
    if (st.isDirectory()) for (const n of (await fsp.readdir(abs)).sort()) await walk(path.join(abs, n), `${rel}/${n}`);
  }
  await walk(dir, '.');
  return out;
}

async function exists(p: string): Promise<boolean> {
  try {
    await fsp.lstat(p);
    return true;
  } catch {
    return false;
  }
}

const ESCAPE = 'must stay inside the folder';
const NUL = 'must not contain NUL bytes';
const BACKSLASH = 'must not contain backslashes';

// ---------------------------------------------------------------------------

describe('folders service (real filesystem and store)', function () {
  let tmp: string;
  let poolDir: string;
  let pool2Dir: string;
  let outside: string;
  let share: string;
  let store: Store;
  let svc: FoldersService;
  let outsideBefore: Record<string, string>;
  let tmpNamesBefore: string[];
  let seq = 0;

  const resolveConnection = async (id: string) => {
    if (id === 'share1') return share;
    throw notFound(`location '${id}' not found`);
  };

  /** A folder with a fixed tree, including symlinks that point inside and outside. */
  async function fixture(prefix = 'fx'): Promise<Folder> {
    const { folder } = await svc.create({ storage_id: 'main', name: `${prefix}-${++seq}` });
    const d = folder.path;
    await fsp.writeFile(path.join(d, 'a.txt'), 'hello');
    await fsp.mkdir(path.join(d, 'sub', 'deep'), { recursive: true });
    await fsp.writeFile(path.join(d, 'sub', 'b.TXT'), 'bee');
    await fsp.writeFile(path.join(d, 'sub', 'deep', 'c.md'), 'c');
    await fsp.mkdir(path.join(d, 'Zeta'));
    await fsp.symlink('sub', path.join(d, 'link-in'));
    await fsp.symlink(outside, path.join(d, 'link-out'));
    await fsp.symlink('../../outside', path.join(d, 'rel-out'));
    return folder;
  }

  before(async () => {
    tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'hostd-folders-'));
    poolDir = path.join(tmp, 'pool');
    pool2Dir = path.join(tmp, 'pools', 'second'); // does not exist: init creates it
    outside = path.join(tmp, 'outside');
    share = path.join(tmp, 'share');
    await fsp.mkdir(poolDir);
    await fsp.mkdir(path.join(outside, 'dir'), { recursive: true });
    await fsp.writeFile(path.join(outside, 'secret.txt'), 'top secret');
    await fsp.writeFile(path.join(outside, 'dir', 'x.txt'), 'x');
    await fsp.mkdir(path.join(share, 'docs'), { recursive: true });
    await fsp.writeFile(path.join(share, 'docs', 'report.pdf'), 'pdf');
    store = await Store.open(path.join(tmp, 'db'));
    svc = await openFoldersService(
      store,
      [
        { id: 'main', path: poolDir, name: 'Main' },
        { id: 'second', path: pool2Dir },
      ],
      { resolveConnection },
    );
    outsideBefore = await snapshot(outside);
    tmpNamesBefore = (await fsp.readdir(tmp)).sort();
  });

  afterEach(async () => {
    expect(await snapshot(outside)).to.deep.equal(outsideBefore);
    expect((await fsp.readdir(tmp)).sort()).to.deep.equal(tmpNamesBefore);
  });

  after(async () => {
    await store?.close();
    if (tmp) await fsp.rm(tmp, { recursive: true, force: true });
  });

  // -------------------------------------------------------------------------
  describe('folders', () => {
    it('init creates missing pool directories', async () => {
      expect((await fsp.stat(pool2Dir)).isDirectory()).to.equal(true);
    });

    it('creates a folder: directory, record, note, list', async () => {
      const { notes, ctx } = recorder();
      const res = await svc.create({ storage_id: 'main', name: 'media' }, ctx);
      expect(res.folder).to.include({ name: 'media', storage_id: 'main', path: path.join(poolDir, 'media') });
      expect(res.folder.folder_id).to.match(/^f_[A-Za-z0-9_-]{10}$/);
      expect(Date.parse(res.folder.created_at)).to.be.a('number').and.not.NaN;
      expect((await fsp.stat(path.join(poolDir, 'media'))).isDirectory()).to.equal(true);
      expect(notes).to.have.length(1);
      expect(notes[0]).to.include({ summary: 'Created folder media', target: 'media' });
      const stored = await store.sub<Folder>('folders').get(res.folder.folder_id);
      expect(stored).to.deep.equal(res.folder);
      const list = await svc.list({});
      expect(list.folders.map((f) => f.folder_id)).to.include(res.folder.folder_id);
      expect(list.folders.find((f) => f.folder_id === res.folder.folder_id)).to.deep.equal(res.folder);
    });

    it('404 for an unknown pool', async () => {
      await rejects(svc.create({ storage_id: 'nope', name: 'x' }), 404, "storage pool 'nope' not found");
    });

    it('409 for a name taken by a record or by an unmanaged directory', async () => {
      await svc.create({ storage_id: 'main', name: 'taken' });
      await rejects(svc.create({ storage_id: 'main', name: 'taken' }), 409, "a folder named 'taken' already exists in storage pool 'main'");
      await fsp.mkdir(path.join(poolDir, 'unmanaged'));
      await rejects(svc.create({ storage_id: 'main', name: 'unmanaged' }), 409, "a folder named 'unmanaged' already exists in storage pool 'main'");
      // The same name in another pool is fine.
      const other = await svc.create({ storage_id: 'second', name: 'taken' });
      expect(other.folder.path).to.equal(path.join(pool2Dir, 'taken'));
    });

    it('400 for bad names, creating nothing', async () => {
      const before = (await fsp.readdir(poolDir)).sort();
      await rejects(svc.create({ storage_id: 'main', name: '' }), 400, "argument 'name' must not be empty");
      await rejects(svc.create({ storage_id: 'main', name: '..' }), 400, "argument 'name' must not be '.' or '..'");
      await rejects(svc.create({ storage_id: 'main', name: '.' }), 400, "argument 'name' must not be '.' or '..'");
      await rejects(svc.create({ storage_id: 'main', name: '../outside' }), 400, "argument 'name' must be a single name without '/'");
      await rejects(svc.create({ storage_id: 'main', name: '/etc' }), 400, "argument 'name' must be a single name without '/'");
      await rejects(svc.create({ storage_id: 'main', name: 'a\\b' }), 400, "argument 'name' must not contain backslashes");
      await rejects(svc.create({ storage_id: 'main', name: 'a\0b' }), 400, "argument 'name' must not contain NUL bytes");
      await rejects(svc.create({ storage_id: 'main', name: 'n'.repeat(256) }), 400, "argument 'name' must be at most 255 bytes");
      expect((await fsp.readdir(poolDir)).sort()).to.deep.equal(before);
    });

    it('renames a folder: directory, record, note; 404 and 409 and 400', async () => {
      const { folder } = await svc.create({ storage_id: 'main', name: 'old-name' });
      await fsp.writeFile(path.join(folder.path, 'keep.txt'), 'k');
      const { notes, ctx } = recorder();
      const res = await svc.update({ folder_id: folder.folder_id, new_name: 'new-name' }, ctx);
      expect(res.folder).to.deep.equal({ ...folder, name: 'new-name', path: path.join(poolDir, 'new-name') });
      expect(await exists(path.join(poolDir, 'old-name'))).to.equal(false);
      expect(await fsp.readFile(path.join(poolDir, 'new-name', 'keep.txt'), 'utf8')).to.equal('k');
      expect(notes[0]).to.include({ summary: 'Renamed folder old-name to new-name', target: 'new-name' });
      expect(await store.sub<Folder>('folders').get(folder.folder_id)).to.deep.equal(res.folder);

      await rejects(svc.update({ folder_id: 'f_missing000', new_name: 'x' }), 404, "folder 'f_missing000' not found");
      await svc.create({ storage_id: 'main', name: 'occupied' });
      await rejects(svc.update({ folder_id: folder.folder_id, new_name: 'occupied' }), 409, "a folder named 'occupied' already exists in storage pool 'main'");
      await fsp.mkdir(path.join(poolDir, 'stray-dir'));
      await rejects(
        svc.update({ folder_id: folder.folder_id, new_name: 'stray-dir' }),
        409,
        "a folder named 'stray-dir' already exists in storage pool 'main'",
      );
      await rejects(svc.update({ folder_id: folder.folder_id, new_name: '../escaped' }), 400, "argument 'new_name' must be a single name without '/'");
      await rejects(svc.update({ folder_id: folder.folder_id, new_name: '..' }), 400, "argument 'new_name' must not be '.' or '..'");
      // Same name: nothing to do.
      expect((await svc.update({ folder_id: folder.folder_id, new_name: 'new-name' })).folder).to.deep.equal(res.folder);
    });

    it('deletes a folder tree without following links; 404 afterwards', async () => {
      const folder = await fixture('del');
      const { notes, ctx } = recorder();
      const res = await svc.delete({ folder_id: folder.folder_id }, ctx);
      expect(res).to.deep.equal({ folder, deleted: true });
      expect(await exists(folder.path)).to.equal(false);
      expect(await store.sub<Folder>('folders').get(folder.folder_id)).to.equal(undefined);
      expect((await svc.list()).folders.map((f) => f.folder_id)).to.not.include(folder.folder_id);
      expect(notes[0]).to.include({ summary: `Deleted folder ${folder.name}`, target: folder.name });
      await rejects(svc.delete({ folder_id: folder.folder_id }), 404, `folder '${folder.folder_id}' not found`);
    });

    it('keeps its records across a restart', async () => {
      const again = await openFoldersService(store, [
        { id: 'main', path: poolDir },
        { id: 'second', path: pool2Dir },
      ]);
      expect((await again.list()).folders).to.deep.equal((await svc.list()).folders);
    });

    it('lists sorted by name and serves the list from memory', async () => {
      const names = (await svc.list()).folders.map((f) => f.name);
      expect(names).to.deep.equal([...names].sort());
      // A record's directory vanishing does not make the list touch the disk.
      const { folder } = await svc.create({ storage_id: 'main', name: 'vanishing' });
      await fsp.rmdir(folder.path);
      expect((await svc.list()).folders.map((f) => f.folder_id)).to.include(folder.folder_id);
      await rejects(svc.contentsList({ folder_id: folder.folder_id }), 404, `folder 'vanishing' has no directory at ${folder.path}`);
      await svc.delete({ folder_id: folder.folder_id });
    });

    it('runs changes of different names side by side: one create of a name wins, the others 409; the list stays sorted and whole', async () => {
      const settle = <T>(ps: Array<Promise<T>>) => Promise.allSettled(ps);
      // Twelve creates of one name at once, in each pool: exactly one each.
      const same = await settle([...Array(12)].flatMap(() => ['main', 'second'].map((storage_id) => svc.create({ storage_id, name: 'contested' }))));
      const won = same.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<{ folder: Folder }>).value.folder);
      expect(won.map((f) => f.storage_id).sort()).to.deep.equal(['main', 'second']);
      for (const r of same.filter((x) => x.status === 'rejected')) expect((r as PromiseRejectedResult).reason.status).to.equal(409);
      // Many names at once, renames into a name a create also wants, and deletes, all in flight together.
      const names = [...Array(40)].map((_, i) => `par-${String(i).padStart(2, '0')}`);
      const made = (await Promise.all(names.map((name) => svc.create({ storage_id: 'main', name })))).map((r) => r.folder);
      expect(new Set(made.map((f) => f.folder_id)).size).to.equal(names.length);
      const mixed = await settle<unknown>([
        svc.update({ folder_id: made[0].folder_id, new_name: 'par-target' }),
        svc.create({ storage_id: 'main', name: 'par-target' }),
        ...made.slice(1, 20).map((f) => svc.delete({ folder_id: f.folder_id })),
        ...made.slice(20, 30).map((f) => svc.update({ folder_id: f.folder_id, new_name: `${f.name}-renamed` })),
      ]);
      const [rename, create] = mixed;
      // One of the two took 'par-target'; the other answered 409.
      expect([rename.status, create.status].sort()).to.deep.equal(['fulfilled', 'rejected']);
      expect(((rename.status === 'rejected' ? rename : create) as PromiseRejectedResult).reason.status).to.equal(409);
      for (const r of mixed.slice(2)) expect(r.status).to.equal('fulfilled');
      const listed = (await svc.list()).folders;
      const order = (a: Folder, b: Folder) => (a.name !== b.name ? (a.name < b.name ? -1 : 1) : a.storage_id < b.storage_id ? -1 : 1);
      expect(listed).to.deep.equal([...listed].sort(order));
      const mine = listed.filter((f) => f.name.startsWith('par-')).map((f) => f.name);
      const expected = [
        rename.status === 'fulfilled' ? 'par-target' : 'par-00',
        ...(create.status === 'fulfilled' ? ['par-target'] : []),
        ...names.slice(20, 30).map((n) => `${n}-renamed`),
        ...names.slice(30),
      ].sort();
      expect(mine).to.deep.equal(expected);
      // Memory and store agree: a fresh open lists the same, and every directory is there.
      const again = await openFoldersService(store, [
        { id: 'main', path: poolDir },
        { id: 'second', path: pool2Dir },
      ]);
      expect((await again.list()).folders).to.deep.equal(listed);
      for (const f of listed.filter((x) => x.name.startsWith('par-') || x.name === 'contested')) expect((await fsp.stat(f.path)).isDirectory()).to.equal(true);
      for (const f of [...listed.filter((x) => x.name.startsWith('par-')), ...won]) await svc.delete({ folder_id: f.folder_id });
    });
  });

  // -------------------------------------------------------------------------
  describe('contents', () => {
    let f: Folder;
    before(async () => {
      f = await fixture('contents');
    });

    it('lists the root: folders first, then by name, with type, size and modified', async () => {
      const res = await svc.contentsList({ folder_id: f.folder_id });
      expect(res.at).to.deep.equal({ kind: 'folder', id: f.folder_id, path: '' });
      expect(res.entries.map((e) => [e.name, e.type])).to.deep.equal([
        ['Zeta', 'folder'],
        ['sub', 'folder'],
        ['a.txt', 'file'],
        ['link-in', 'symlink'],
        ['link-out', 'symlink'],
        ['rel-out', 'symlink'],
      ]);
      const a = res.entries.find((e) => e.name === 'a.txt')!;
      const st = await fsp.stat(path.join(f.path, 'a.txt'));
      expect(a).to.deep.equal({ name: 'a.txt', path: 'a.txt', type: 'file', size: 5, modified: st.mtime.toISOString() });
      expect(res.entries.find((e) => e.name === 'sub')!.size).to.equal(null);
    });

    it('lists a sub path, with paths relative to the folder root', async () => {
      const res = await svc.contentsList({ folder_id: f.folder_id, sub_path: 'sub/' });
      expect(res.at.path).to.equal('sub');
      expect(res.entries.map((e) => e.path)).to.deep.equal(['sub/deep', 'sub/b.TXT']);
    });

    it('lists through a symlink that stays inside', async () => {
      const res = await svc.contentsList({ folder_id: f.folder_id, sub_path: 'link-in' });
      expect(res.entries.map((e) => e.path)).to.deep.equal(['link-in/deep', 'link-in/b.TXT']);
    });

    it('404 for a missing path, an unknown folder and an unknown location; 409 for a file', async () => {
      await rejects(svc.contentsList({ folder_id: f.folder_id, sub_path: 'nope' }), 404, "no such file or folder 'nope'");
      await rejects(svc.contentsList({ folder_id: f.folder_id, sub_path: 'a.txt/x' }), 409, "'a.txt/x' is not a folder");
      await rejects(svc.contentsList({ folder_id: 'f_unknown000' }), 404, "folder 'f_unknown000' not found");
      await rejects(svc.contentsList({ folder_id: f.folder_id, sub_path: 'a.txt' }), 409, "'a.txt' is not a folder");
      await rejects(svc.contentsList({ folder_id: f.folder_id, target: { kind: 'connection', id: 'nas' } }), 404, "location 'nas' not found");
      await rejects(svc.contentsList({ folder_id: f.folder_id, target: { kind: 'folder', id: 'f_unknown000' } }), 404, "folder 'f_unknown000' not found");
    });

    it('uses the default connection resolver: location not found', async () => {
      const bare = await openFoldersService(store, [{ id: 'main', path: poolDir }]);
      await rejects(bare.contentsList({ folder_id: f.folder_id, target: { kind: 'connection', id: 'loc1' } }), 404, "location 'loc1' not found");
    });

    it('takes the place from target: another folder, a connection', async () => {
      const other = await fixture('contents-other');
      const t: Target = { kind: 'folder', id: other.folder_id, path: 'sub' };
      const res = await svc.contentsList({ folder_id: f.folder_id, sub_path: 'Zeta', target: t });
      expect(res.at).to.deep.equal({ kind: 'folder', id: other.folder_id, path: 'sub' });
      expect(res.entries.map((e) => e.name)).to.deep.equal(['deep', 'b.TXT']);
      // target without path: the sub_path argument gives the path.
      const res2 = await svc.contentsList({ folder_id: f.folder_id, sub_path: 'sub/deep', target: { kind: 'folder', id: other.folder_id } });
      expect(res2.entries.map((e) => e.path)).to.deep.equal(['sub/deep/c.md']);
      const conn = await svc.contentsList({ folder_id: f.folder_id, target: { kind: 'connection', id: 'share1', path: 'docs' } });
      expect(conn.at).to.deep.equal({ kind: 'connection', id: 'share1', path: 'docs' });
      expect(conn.entries.map((e) => e.name)).to.deep.equal(['report.pdf']);
    });

    it('refuses every escape', async () => {
      const id = f.folder_id;
      for (const p of ['..', 'sub/../../x', '/etc', '/', 'link-out', 'link-out/dir', 'rel-out', 'rel-out/dir', 'link-in/../..']) {
        await rejects(svc.contentsList({ folder_id: id, sub_path: p }), 400, `argument 'sub_path' ${ESCAPE}`);
      }
      await rejects(svc.contentsList({ folder_id: id, sub_path: 'sub\0' }), 400, `argument 'sub_path' ${NUL}`);
      await rejects(svc.contentsList({ folder_id: id, sub_path: '..\\..' }), 400, `argument 'sub_path' ${BACKSLASH}`);
      await rejects(svc.contentsList({ folder_id: id, target: { kind: 'folder', id, path: '../..' } }), 400, `argument 'target.path' ${ESCAPE}`);
      await rejects(svc.contentsList({ folder_id: id, target: { kind: 'folder', id, path: 'link-out' } }), 400, `argument 'target.path' ${ESCAPE}`);
      await rejects(
        svc.contentsList({ folder_id: id, target: { kind: 'connection', id: 'share1', path: '../outside' } }),
        400,
        "argument 'target.path' must stay inside the location",
      );
    });
  });

  // -------------------------------------------------------------------------
  describe('subfolders', () => {
    let f: Folder;
    before(async () => {
      f = await fixture('subfolders');
    });

    it('creates a subfolder at the root and in a sub path', async () => {
      const { notes, ctx } = recorder();
      const res = await svc.subfoldersCreate({ folder_id: f.folder_id, name: 'new1' }, ctx);
      expect(res.at).to.deep.equal({ kind: 'folder', id: f.folder_id, path: '' });
      expect(res.entry).to.include({ name: 'new1', path: 'new1', type: 'folder', size: null });
      expect((await fsp.stat(path.join(f.path, 'new1'))).isDirectory()).to.equal(true);
      expect(notes[0]).to.include({ summary: 'Created subfolder new1', target: `${f.name}/new1` });
      const res2 = await svc.subfoldersCreate({ folder_id: f.folder_id, name: 'new2', sub_path: 'sub/deep' });
      expect(res2.entry.path).to.equal('sub/deep/new2');
      expect((await fsp.stat(path.join(f.path, 'sub', 'deep', 'new2'))).isDirectory()).to.equal(true);
    });

    it('creates in a connection target', async () => {
      const res = await svc.subfoldersCreate({ folder_id: f.folder_id, name: 'made', target: { kind: 'connection', id: 'share1', path: 'docs' } });
      expect(res.entry.path).to.equal('docs/made');
      expect((await fsp.stat(path.join(share, 'docs', 'made'))).isDirectory()).to.equal(true);
      await fsp.rmdir(path.join(share, 'docs', 'made'));
    });

    it('409 for an existing name (also a file or a link); 404 for a missing parent; 409 for a file parent', async () => {
      await rejects(svc.subfoldersCreate({ folder_id: f.folder_id, name: 'sub' }), 409, "'sub' already exists");
      await rejects(svc.subfoldersCreate({ folder_id: f.folder_id, name: 'a.txt' }), 409, "'a.txt' already exists");
      await rejects(svc.subfoldersCreate({ folder_id: f.folder_id, name: 'link-out' }), 409, "'link-out' already exists");
      await rejects(svc.subfoldersCreate({ folder_id: f.folder_id, name: 'x', sub_path: 'missing' }), 404, "no such file or folder 'missing'");
      await rejects(svc.subfoldersCreate({ folder_id: f.folder_id, name: 'x', sub_path: 'a.txt' }), 409, "'a.txt' is not a folder");
      await rejects(svc.subfoldersCreate({ folder_id: 'f_unknown000', name: 'x' }), 404, "folder 'f_unknown000' not found");
    });

    it('400 for bad names', async () => {
      await rejects(svc.subfoldersCreate({ folder_id: f.folder_id, name: '..' }), 400, "argument 'name' must not be '.' or '..'");
      await rejects(svc.subfoldersCreate({ folder_id: f.folder_id, name: '../../outside/evil' }), 400, "argument 'name' must be a single name without '/'");
      await rejects(svc.subfoldersCreate({ folder_id: f.folder_id, name: '' }), 400, "argument 'name' must not be empty");
      await rejects(svc.subfoldersCreate({ folder_id: f.folder_id, name: 'a\0' }), 400, "argument 'name' must not contain NUL bytes");
      await rejects(svc.subfoldersCreate({ folder_id: f.folder_id, name: '..\\x' }), 400, "argument 'name' must not contain backslashes");
    });

    it('refuses every escape of the parent path', async () => {
      const id = f.folder_id;
      for (const p of ['..', 'sub/../../x', '/etc', '/tmp', 'link-out', 'link-out/dir', 'rel-out']) {
        await rejects(svc.subfoldersCreate({ folder_id: id, name: 'evil', sub_path: p }), 400, `argument 'sub_path' ${ESCAPE}`);
        await rejects(svc.subfoldersBatchCreate({ folder_id: id, names: ['evil'], sub_path: p }), 400, `argument 'sub_path' ${ESCAPE}`);
      }
      await rejects(svc.subfoldersCreate({ folder_id: id, name: 'evil', sub_path: 'a\0b' }), 400, `argument 'sub_path' ${NUL}`);
      await rejects(svc.subfoldersCreate({ folder_id: id, name: 'evil', sub_path: '..\\' }), 400, `argument 'sub_path' ${BACKSLASH}`);
      await rejects(
        svc.subfoldersCreate({ folder_id: id, name: 'evil', target: { kind: 'folder', id, path: 'link-out' } }),
        400,
        `argument 'target.path' ${ESCAPE}`,
      );
      expect(await exists(path.join(tmp, 'evil'))).to.equal(false);
    });

    it('batch: creates all', async () => {
      const { notes, ctx } = recorder();
      const res = await svc.subfoldersBatchCreate({ folder_id: f.folder_id, names: ['b1', 'b2', 'b3'], sub_path: 'Zeta' }, ctx);
      expect(res.at.path).to.equal('Zeta');
      expect(res.entries.map((e) => [e.path, e.type])).to.deep.equal([
        ['Zeta/b1', 'folder'],
        ['Zeta/b2', 'folder'],
        ['Zeta/b3', 'folder'],
      ]);
      expect((await fsp.readdir(path.join(f.path, 'Zeta'))).sort()).to.deep.equal(['b1', 'b2', 'b3']);
      expect(notes[0]).to.include({ summary: 'Created 3 subfolders', target: `${f.name}/Zeta` });
    });

    it('batch: validates everything first and creates none when one would fail', async () => {
      const id = f.folder_id;
      const before = (await fsp.readdir(f.path)).sort();
      await rejects(svc.subfoldersBatchCreate({ folder_id: id, names: ['c1', 'sub', 'c2'] }), 409, "'sub' already exists");
      await rejects(svc.subfoldersBatchCreate({ folder_id: id, names: ['c1', '..'] }), 400, "argument 'names[1]' must not be '.' or '..'");
      await rejects(svc.subfoldersBatchCreate({ folder_id: id, names: ['c1', 'x/y'] }), 400, "argument 'names[1]' must be a single name without '/'");
      await rejects(svc.subfoldersBatchCreate({ folder_id: id, names: ['c1', 'c1'] }), 400, "argument 'names' lists 'c1' twice");
      await rejects(svc.subfoldersBatchCreate({ folder_id: id, names: [] }), 400, "argument 'names' must list at least one name");
      await rejects(svc.subfoldersBatchCreate({ folder_id: id, names: ['c1'], sub_path: 'nope' }), 404, "no such file or folder 'nope'");
      expect((await fsp.readdir(f.path)).sort()).to.deep.equal(before);
    });
  });

  // -------------------------------------------------------------------------
  describe('move', () => {
    let f: Folder;
    beforeEach(async () => {
      f = await fixture('move');
    });

    it('renames a file and moves it into a subfolder', async () => {
      const { notes, ctx } = recorder();
      const res = await svc.entriesMove({ folder_id: f.folder_id, src_sub_path: 'a.txt', dst_sub_path: 'renamed.txt' }, ctx);
      expect(res.from).to.deep.equal({ kind: 'folder', id: f.folder_id, path: 'a.txt' });
      expect(res.to).to.deep.equal({ kind: 'folder', id: f.folder_id, path: 'renamed.txt' });
      expect(res.entry).to.include({ name: 'renamed.txt', path: 'renamed.txt', type: 'file', size: 5 });
      expect(await exists(path.join(f.path, 'a.txt'))).to.equal(false);
      expect(notes[0]).to.include({ summary: 'Moved a.txt to renamed.txt', target: `${f.name}/a.txt` });
      await svc.entriesMove({ folder_id: f.folder_id, src_sub_path: 'renamed.txt', dst_sub_path: 'sub/deep/a.txt' });
      expect(await fsp.readFile(path.join(f.path, 'sub', 'deep', 'a.txt'), 'utf8')).to.equal('hello');
    });

    it('moves a folder tree, and a symlink as a link', async () => {
      await svc.entriesMove({ folder_id: f.folder_id, src_sub_path: 'sub', dst_sub_path: 'Zeta/sub2' });
      expect(await fsp.readFile(path.join(f.path, 'Zeta', 'sub2', 'deep', 'c.md'), 'utf8')).to.equal('c');
      await svc.entriesMove({ folder_id: f.folder_id, src_sub_path: 'link-in', dst_sub_path: 'link-moved' });
      expect(await fsp.readlink(path.join(f.path, 'link-moved'))).to.equal('sub');
    });

    it('uses src_target and dst_target of the same folder or connection', async () => {
      const t = (p: string): Target => ({ kind: 'folder', id: f.folder_id, path: p });
      const res = await svc.entriesMove({ folder_id: 'ignored', src_sub_path: 'ignored', src_target: t('a.txt'), dst_target: t('Zeta/a.txt') });
      expect(res.to.path).to.equal('Zeta/a.txt');
      await fsp.writeFile(path.join(share, 'm.txt'), 'm');
      const c = (p: string): Target => ({ kind: 'connection', id: 'share1', path: p });
      const res2 = await svc.entriesMove({ folder_id: f.folder_id, src_sub_path: 'x', src_target: c('m.txt'), dst_target: c('docs/m.txt') });
      expect(res2.to).to.deep.equal({ kind: 'connection', id: 'share1', path: 'docs/m.txt' });
      expect(await fsp.readFile(path.join(share, 'docs', 'm.txt'), 'utf8')).to.equal('m');
      await fsp.rm(path.join(share, 'docs', 'm.txt'));
    });

    it('400 when dst_target names another folder or connection, or no destination is given', async () => {
      const other = await fixture('move-other');
      const msg = "argument 'dst_target' must name the same folder or connection as the source";
      await rejects(
        svc.entriesMove({ folder_id: f.folder_id, src_sub_path: 'a.txt', dst_target: { kind: 'folder', id: other.folder_id, path: 'a2.txt' } }),
        400,
        msg,
      );
      await rejects(
        svc.entriesMove({ folder_id: f.folder_id, src_sub_path: 'a.txt', dst_target: { kind: 'connection', id: 'share1', path: 'a2.txt' } }),
        400,
        msg,
      );
      await rejects(svc.entriesMove({ folder_id: f.folder_id, src_sub_path: 'a.txt' }), 400, "argument 'dst_sub_path' is required");
      expect(await exists(path.join(f.path, 'a.txt'))).to.equal(true);
    });

    it('404 for a missing source or destination parent, 409 for an existing destination, 400 for the root and into itself', async () => {
      const id = f.folder_id;
      await rejects(svc.entriesMove({ folder_id: id, src_sub_path: 'nope', dst_sub_path: 'x' }), 404, "no such file or folder 'nope'");
      await rejects(svc.entriesMove({ folder_id: id, src_sub_path: 'a.txt', dst_sub_path: 'nope/a.txt' }), 404, "no such file or folder 'nope'");
      await rejects(svc.entriesMove({ folder_id: id, src_sub_path: 'a.txt', dst_sub_path: 'sub/b.TXT' }), 409, "'sub/b.TXT' already exists");
      await rejects(svc.entriesMove({ folder_id: id, src_sub_path: 'a.txt', dst_sub_path: 'a.txt' }), 409, "'a.txt' already exists");
      await rejects(svc.entriesMove({ folder_id: id, src_sub_path: 'a.txt', dst_sub_path: 'link-in' }), 409, "'link-in' already exists");
      await rejects(svc.entriesMove({ folder_id: id, src_sub_path: 'Zeta', dst_sub_path: 'a.txt/Zeta' }), 409, "'a.txt' is not a folder");
      await rejects(svc.entriesMove({ folder_id: id, src_sub_path: '', dst_sub_path: 'x' }), 400, "argument 'src_sub_path' must not be the folder root");
      await rejects(svc.entriesMove({ folder_id: id, src_sub_path: 'a.txt', dst_sub_path: '' }), 400, "argument 'dst_sub_path' must not be the folder root");
      await rejects(svc.entriesMove({ folder_id: id, src_sub_path: 'sub', dst_sub_path: 'sub/deep/sub' }), 400, "cannot move 'sub' into itself");
      await rejects(svc.entriesMove({ folder_id: id, src_sub_path: 'sub', dst_sub_path: 'link-in/x' }), 400, "cannot move 'sub' into itself");
      await rejects(svc.entriesMove({ folder_id: 'f_unknown000', src_sub_path: 'a', dst_sub_path: 'b' }), 404, "folder 'f_unknown000' not found");
    });

    it('refuses every escape, of the source and of the destination', async () => {
      const id = f.folder_id;
      for (const p of ['..', 'sub/../../x', '/etc', '/etc/passwd', 'link-out', 'link-out/secret.txt', 'rel-out', 'rel-out/dir']) {
        await rejects(svc.entriesMove({ folder_id: id, src_sub_path: p, dst_sub_path: 'stolen' }), 400, `argument 'src_sub_path' ${ESCAPE}`);
      }
      for (const p of ['..', 'sub/../../x', '/etc/x', '/tmp/x', 'link-out/a.txt', 'rel-out/a.txt', 'link-out/dir/a.txt']) {
        await rejects(svc.entriesMove({ folder_id: id, src_sub_path: 'a.txt', dst_sub_path: p }), 400, `argument 'dst_sub_path' ${ESCAPE}`);
      }
      await rejects(svc.entriesMove({ folder_id: id, src_sub_path: 'a\0.txt', dst_sub_path: 'b' }), 400, `argument 'src_sub_path' ${NUL}`);
      await rejects(svc.entriesMove({ folder_id: id, src_sub_path: 'a.txt', dst_sub_path: 'b\0' }), 400, `argument 'dst_sub_path' ${NUL}`);
      await rejects(svc.entriesMove({ folder_id: id, src_sub_path: 'a.txt', dst_sub_path: '..\\b' }), 400, `argument 'dst_sub_path' ${BACKSLASH}`);
      await rejects(
        svc.entriesMove({
          folder_id: id,
          src_sub_path: 'x',
          src_target: { kind: 'folder', id, path: 'a.txt' },
          dst_target: { kind: 'folder', id, path: 'link-out/a.txt' },
        }),
        400,
        `argument 'dst_target.path' ${ESCAPE}`,
      );
      expect(await fsp.readFile(path.join(f.path, 'a.txt'), 'utf8')).to.equal('hello');
    });
  });

  // -------------------------------------------------------------------------
  describe('copy', () => {
    let f: Folder;
    let g: Folder;
    beforeEach(async () => {
      f = await fixture('copy');
      g = await fixture('copy-dst');
    });

    it('copies a file within the folder and a tree to another folder', async () => {
      const { notes, ctx } = recorder();
      const res = await svc.entriesCopy({ src_folder_id: f.folder_id, src_sub_path: 'a.txt', dst_sub_path: 'a-copy.txt' }, ctx);
      expect(res.from).to.deep.equal({ kind: 'folder', id: f.folder_id, path: 'a.txt' });
      expect(res.to).to.deep.equal({ kind: 'folder', id: f.folder_id, path: 'a-copy.txt' });
      expect(res.entry).to.include({ name: 'a-copy.txt', type: 'file', size: 5 });
      expect(await fsp.readFile(path.join(f.path, 'a-copy.txt'), 'utf8')).to.equal('hello');
      expect(await fsp.readFile(path.join(f.path, 'a.txt'), 'utf8')).to.equal('hello');
      expect(notes[0]).to.include({ summary: `Copied a.txt to ${f.name}/a-copy.txt`, target: `${f.name}/a.txt` });

      const res2 = await svc.entriesCopy({ src_folder_id: f.folder_id, src_sub_path: 'sub', dst_folder_id: g.folder_id, dst_sub_path: 'Zeta/sub-copy' });
      expect(res2.to).to.deep.equal({ kind: 'folder', id: g.folder_id, path: 'Zeta/sub-copy' });
      expect(res2.entry.type).to.equal('folder');
      expect(await snapshot(path.join(g.path, 'Zeta', 'sub-copy'), false)).to.deep.equal(await snapshot(path.join(f.path, 'sub'), false));
      // File modification times are kept (to about a millisecond).
      const [copied, orig] = await Promise.all([fsp.stat(path.join(g.path, 'Zeta', 'sub-copy', 'b.TXT')), fsp.stat(path.join(f.path, 'sub', 'b.TXT'))]);
      expect(Math.abs(copied.mtimeMs - orig.mtimeMs)).to.be.at.most(1);
    });

    it('copies links that stay inside as links, verbatim', async () => {
      await fsp.mkdir(path.join(f.path, 'good'));
      await fsp.symlink('../a.txt', path.join(f.path, 'good', 'rel-link'));
      await fsp.symlink('sibling', path.join(f.path, 'good', 'dangling-inside'));
      await svc.entriesCopy({ src_folder_id: f.folder_id, src_sub_path: 'good', dst_folder_id: g.folder_id, dst_sub_path: 'good' });
      expect(await fsp.readlink(path.join(g.path, 'good', 'rel-link'))).to.equal('../a.txt');
      expect(await fsp.readlink(path.join(g.path, 'good', 'dangling-inside'))).to.equal('sibling');
      // A single link copied on its own stays a link.
      await svc.entriesCopy({ src_folder_id: f.folder_id, src_sub_path: 'link-in', dst_sub_path: 'link-in-2' });
      expect(await fsp.readlink(path.join(f.path, 'link-in-2'))).to.equal('sub');
    });

    it('uses targets: folder to connection and back', async () => {
      const res = await svc.entriesCopy({
        src_folder_id: 'ignored',
        src_sub_path: 'ignored',
        src_target: { kind: 'folder', id: f.folder_id, path: 'a.txt' },
        dst_target: { kind: 'connection', id: 'share1', path: 'docs/a.txt' },
      });
      expect(res.to).to.deep.equal({ kind: 'connection', id: 'share1', path: 'docs/a.txt' });
      expect(await fsp.readFile(path.join(share, 'docs', 'a.txt'), 'utf8')).to.equal('hello');
      await svc.entriesCopy({
        src_folder_id: f.folder_id,
        src_sub_path: 'x',
        src_target: { kind: 'connection', id: 'share1', path: 'docs/report.pdf' },
        dst_target: { kind: 'folder', id: g.folder_id },
        dst_sub_path: 'report.pdf',
      });
      expect(await fsp.readFile(path.join(g.path, 'report.pdf'), 'utf8')).to.equal('pdf');
      await fsp.rm(path.join(share, 'docs', 'a.txt'));
    });

    it('404 for a missing source, folder or location; 409 for an existing destination; 400 for into itself, the root, no destination', async () => {
      const id = f.folder_id;
      await rejects(svc.entriesCopy({ src_folder_id: id, src_sub_path: 'nope', dst_sub_path: 'x' }), 404, "no such file or folder 'nope'");
      await rejects(svc.entriesCopy({ src_folder_id: id, src_sub_path: 'a.txt', dst_sub_path: 'nope/x' }), 404, "no such file or folder 'nope'");
      await rejects(
        svc.entriesCopy({ src_folder_id: id, src_sub_path: 'a.txt', dst_folder_id: 'f_unknown000', dst_sub_path: 'x' }),
        404,
        "folder 'f_unknown000' not found",
      );
      await rejects(svc.entriesCopy({ src_folder_id: 'f_unknown000', src_sub_path: 'a.txt', dst_sub_path: 'x' }), 404, "folder 'f_unknown000' not found");
      await rejects(
        svc.entriesCopy({ src_folder_id: id, src_sub_path: 'a.txt', dst_target: { kind: 'connection', id: 'nas', path: 'x' } }),
        404,
        "location 'nas' not found",
      );
      await rejects(svc.entriesCopy({ src_folder_id: id, src_sub_path: 'a.txt', dst_sub_path: 'sub/b.TXT' }), 409, "'sub/b.TXT' already exists");
      await rejects(
        svc.entriesCopy({ src_folder_id: id, src_sub_path: 'a.txt', dst_folder_id: g.folder_id, dst_sub_path: 'a.txt' }),
        409,
        "'a.txt' already exists",
      );
      await rejects(svc.entriesCopy({ src_folder_id: id, src_sub_path: 'a.txt' }), 400, "argument 'dst_sub_path' is required");
      await rejects(svc.entriesCopy({ src_folder_id: id, src_sub_path: 'sub', dst_sub_path: 'sub/deep/again' }), 400, "cannot copy 'sub' into itself");
      await rejects(svc.entriesCopy({ src_folder_id: id, src_sub_path: '', dst_sub_path: 'x' }), 400, "argument 'src_sub_path' must not be the folder root");
      await rejects(
        svc.entriesCopy({ src_folder_id: id, src_sub_path: 'a.txt', dst_folder_id: g.folder_id, dst_sub_path: '/' }),
        400,
        `argument 'dst_sub_path' ${ESCAPE}`,
      );
      expect(await exists(path.join(f.path, 'sub', 'deep', 'again'))).to.equal(false);
    });

    it('refuses a tree holding a symlink that points outside, copying nothing', async () => {
      await fsp.mkdir(path.join(f.path, 'bad', 'inner'), { recursive: true });
      await fsp.writeFile(path.join(f.path, 'bad', 'ok.txt'), 'ok');
      await fsp.symlink(path.join(outside, 'secret.txt'), path.join(f.path, 'bad', 'inner', 'evil'));
      await rejects(
        svc.entriesCopy({ src_folder_id: f.folder_id, src_sub_path: 'bad', dst_folder_id: g.folder_id, dst_sub_path: 'bad' }),
        400,
        "cannot copy 'bad': symlink 'bad/inner/evil' points outside the folder",
      );
      expect(await exists(path.join(g.path, 'bad'))).to.equal(false);
    });

    it('refuses links that would leave the destination, removing the partial copy', async () => {
      await fsp.mkdir(path.join(f.path, 'abs'));
      await fsp.symlink(path.join(f.path, 'a.txt'), path.join(f.path, 'abs', 'to-a')); // inside f, outside g
      await rejects(
        svc.entriesCopy({ src_folder_id: f.folder_id, src_sub_path: 'abs', dst_folder_id: g.folder_id, dst_sub_path: 'abs' }),
        400,
        "cannot copy 'abs': symlink 'abs/to-a' would point outside the destination folder",
      );
      expect(await exists(path.join(g.path, 'abs'))).to.equal(false);
      // A relative link that stays inside the source at depth 2 escapes when copied to the top of the destination.
      await fsp.symlink('../../a.txt', path.join(f.path, 'sub', 'deep', 'up2'));
      await rejects(
        svc.entriesCopy({ src_folder_id: f.folder_id, src_sub_path: 'sub/deep', dst_folder_id: g.folder_id, dst_sub_path: 'deep' }),
        400,
        "cannot copy 'sub/deep': symlink 'deep/up2' would point outside the destination folder",
      );
      expect(await exists(path.join(g.path, 'deep'))).to.equal(false);
    });

    it('refuses special files', async function () {
      // mkfifo is coreutils: a failure here is the test's, not a reason to skip.
      execFileSync('mkfifo', [path.join(f.path, 'sub', 'pipe')]);
      await rejects(
        svc.entriesCopy({ src_folder_id: f.folder_id, src_sub_path: 'sub', dst_sub_path: 'sub-copy' }),
        400,
        "cannot copy 'sub': 'sub/pipe' is not a file, folder or symlink",
      );
      expect(await exists(path.join(f.path, 'sub-copy'))).to.equal(false);
    });

    it('refuses every escape, of the source and of the destination', async () => {
      const id = f.folder_id;
      for (const p of ['..', 'sub/../../outside', '/etc', '/etc/passwd', 'link-out', 'link-out/secret.txt', 'rel-out', 'rel-out/dir']) {
        await rejects(svc.entriesCopy({ src_folder_id: id, src_sub_path: p, dst_sub_path: 'stolen' }), 400, `argument 'src_sub_path' ${ESCAPE}`);
      }
      for (const p of ['..', 'sub/../../x', '/etc/x', '/tmp/x', 'link-out/a.txt', 'rel-out/planted', 'link-out/dir/planted']) {
        await rejects(
          svc.entriesCopy({ src_folder_id: id, src_sub_path: 'a.txt', dst_folder_id: g.folder_id, dst_sub_path: p }),
          400,
          `argument 'dst_sub_path' ${ESCAPE}`,
        );
      }
      await rejects(svc.entriesCopy({ src_folder_id: id, src_sub_path: 'a.txt\0', dst_sub_path: 'b' }), 400, `argument 'src_sub_path' ${NUL}`);
      await rejects(svc.entriesCopy({ src_folder_id: id, src_sub_path: 'a.txt', dst_sub_path: 'b\\c' }), 400, `argument 'dst_sub_path' ${BACKSLASH}`);
      await rejects(
        svc.entriesCopy({ src_folder_id: id, src_sub_path: 'x', src_target: { kind: 'folder', id, path: 'link-out/secret.txt' }, dst_sub_path: 'stolen' }),
        400,
        `argument 'src_target.path' ${ESCAPE}`,
      );
      await rejects(
        svc.entriesCopy({ src_folder_id: id, src_sub_path: 'a.txt', dst_target: { kind: 'connection', id: 'share1', path: '../outside/planted' } }),
        400,
        "argument 'dst_target.path' must stay inside the location",
      );
      expect(await exists(path.join(f.path, 'stolen'))).to.equal(false);
    });
  });

  // -------------------------------------------------------------------------
  describe('delete entries', () => {
    let f: Folder;
    beforeEach(async () => {
      f = await fixture('rm');
    });

    it('deletes a file and a tree', async () => {
      const { notes, ctx } = recorder();
      const res = await svc.entriesDelete({ folder_id: f.folder_id, sub_path: 'a.txt' }, ctx);
      expect(res.deleted).to.deep.equal({ kind: 'folder', id: f.folder_id, path: 'a.txt' });
      expect(res.entry).to.include({ name: 'a.txt', type: 'file', size: 5 });
      expect(notes[0]).to.include({ summary: 'Deleted file a.txt', target: `${f.name}/a.txt` });
      expect(await exists(path.join(f.path, 'a.txt'))).to.equal(false);
      const tree = recorder();
      await svc.entriesDelete({ folder_id: f.folder_id, sub_path: 'sub' }, tree.ctx);
      expect(await exists(path.join(f.path, 'sub'))).to.equal(false);
      // Not "Deleted folder sub": that is what deleting a managed folder says.
      expect(tree.notes[0]).to.include({ summary: 'Deleted subfolder sub', target: `${f.name}/sub` });
    });

    it('deletes a link that stays inside as a link, leaving what it points at', async () => {
      const res = await svc.entriesDelete({ folder_id: f.folder_id, sub_path: 'link-in' });
      expect(res.entry.type).to.equal('symlink');
      expect(await exists(path.join(f.path, 'link-in'))).to.equal(false);
      expect(await fsp.readFile(path.join(f.path, 'sub', 'b.TXT'), 'utf8')).to.equal('bee');
    });

    it('deletes a tree holding links that point outside without following them', async () => {
      await fsp.mkdir(path.join(f.path, 'holder'));
      await fsp.symlink(outside, path.join(f.path, 'holder', 'to-outside'));
      await svc.entriesDelete({ folder_id: f.folder_id, sub_path: 'holder' });
      expect(await exists(path.join(f.path, 'holder'))).to.equal(false);
    });

    it('uses target over folder_id and sub_path', async () => {
      const other = await fixture('rm-other');
      await svc.entriesDelete({ folder_id: f.folder_id, sub_path: 'a.txt', target: { kind: 'folder', id: other.folder_id, path: 'sub/b.TXT' } });
      expect(await exists(path.join(other.path, 'sub', 'b.TXT'))).to.equal(false);
      expect(await exists(path.join(f.path, 'a.txt'))).to.equal(true);
    });

    it('400 for the root, 404 for a missing entry or folder', async () => {
      await rejects(svc.entriesDelete({ folder_id: f.folder_id, sub_path: '' }), 400, "argument 'sub_path' must not be the folder root");
      await rejects(svc.entriesDelete({ folder_id: f.folder_id, sub_path: './' }), 400, "argument 'sub_path' must not be the folder root");
      await rejects(
        svc.entriesDelete({ folder_id: f.folder_id, sub_path: 'a.txt', target: { kind: 'folder', id: f.folder_id, path: '' } }),
        400,
        "argument 'target.path' must not be the folder root",
      );
      await rejects(
        svc.entriesDelete({ folder_id: f.folder_id, sub_path: 'x', target: { kind: 'connection', id: 'share1', path: '' } }),
        400,
        "argument 'target.path' must not be the location root",
      );
      await rejects(svc.entriesDelete({ folder_id: f.folder_id, sub_path: 'nope' }), 404, "no such file or folder 'nope'");
      await rejects(svc.entriesDelete({ folder_id: 'f_unknown000', sub_path: 'a.txt' }), 404, "folder 'f_unknown000' not found");
      expect(await exists(f.path)).to.equal(true);
    });

    it('refuses every escape', async () => {
      const id = f.folder_id;
      for (const p of [
        '..',
        'sub/../../outside',
        '/etc',
        '/etc/passwd',
        '/',
        'link-out',
        'link-out/secret.txt',
        'link-out/dir',
        'rel-out',
        'rel-out/secret.txt',
      ]) {
        await rejects(svc.entriesDelete({ folder_id: id, sub_path: p }), 400, `argument 'sub_path' ${ESCAPE}`);
      }
      await rejects(svc.entriesDelete({ folder_id: id, sub_path: 'a.txt\0' }), 400, `argument 'sub_path' ${NUL}`);
      await rejects(svc.entriesDelete({ folder_id: id, sub_path: '..\\outside' }), 400, `argument 'sub_path' ${BACKSLASH}`);
      await rejects(
        svc.entriesDelete({ folder_id: id, sub_path: 'a.txt', target: { kind: 'folder', id, path: 'link-out/secret.txt' } }),
        400,
        `argument 'target.path' ${ESCAPE}`,
      );
      expect(await exists(path.join(f.path, 'link-out'))).to.equal(true);
    });
  });

  // -------------------------------------------------------------------------
  describe('search', () => {
    let f: Folder;
    before(async () => {
      f = await fixture('search');
      await fsp.writeFile(path.join(f.path, 'Zeta', 'notes.txt'), 'n');
    });

    it('finds a case-insensitive substring anywhere below, never through symlinks', async () => {
      const res = await svc.search({ folder_id: f.folder_id, pattern: 'TXT' });
      expect(res.at).to.deep.equal({ kind: 'folder', id: f.folder_id, path: '' });
      expect(res.pattern).to.equal('TXT');
      expect(res.truncated).to.equal(false);
      expect(res.matches.map((m) => m.path)).to.deep.equal(['a.txt', 'Zeta/notes.txt', 'sub/b.TXT']);
      const b = res.matches.find((m) => m.name === 'b.TXT')!;
      expect(b).to.include({ type: 'file', size: 3 });
      expect(b.modified).to.equal((await fsp.stat(path.join(f.path, 'sub', 'b.TXT'))).mtime.toISOString());
      // link-out points at a directory holding secret.txt: never walked.
      expect((await svc.search({ folder_id: f.folder_id, pattern: 'secret' })).matches).to.deep.equal([]);
      // Links are reported as entries, not entered.
      const links = await svc.search({ folder_id: f.folder_id, pattern: 'link' });
      expect(links.matches.map((m) => [m.path, m.type])).to.deep.equal([
        ['link-in', 'symlink'],
        ['link-out', 'symlink'],
      ]);
      expect((await svc.search({ folder_id: f.folder_id, pattern: 'c.md' })).matches.map((m) => m.path)).to.deep.equal(['sub/deep/c.md']);
    });

    it("treats '*' as a glob over the whole name", async () => {
      expect((await svc.search({ folder_id: f.folder_id, pattern: '*.TXT' })).matches.map((m) => m.path)).to.deep.equal([
        'a.txt',
        'Zeta/notes.txt',
        'sub/b.TXT',
      ]);
      expect((await svc.search({ folder_id: f.folder_id, pattern: 'b*' })).matches.map((m) => m.path)).to.deep.equal(['sub/b.TXT']);
      expect((await svc.search({ folder_id: f.folder_id, pattern: 's*b' })).matches.map((m) => m.path)).to.deep.equal(['sub']);
      expect((await svc.search({ folder_id: f.folder_id, pattern: '*e*' })).matches.map((m) => m.path)).to.deep.equal([
        'Zeta',
        'rel-out',
        'Zeta/notes.txt',
        'sub/deep',
      ]);
      // Regex characters are literal.
      expect((await svc.search({ folder_id: f.folder_id, pattern: 'a.t*' })).matches.map((m) => m.path)).to.deep.equal(['a.txt']);
      expect((await svc.search({ folder_id: f.folder_id, pattern: '(*' })).matches).to.deep.equal([]);
    });

    it('starts at a sub path and at a target; paths stay relative to the root', async () => {
      const res = await svc.search({ folder_id: f.folder_id, pattern: 'txt', sub_path: 'sub' });
      expect(res.at.path).to.equal('sub');
      expect(res.matches.map((m) => m.path)).to.deep.equal(['sub/b.TXT']);
      const conn = await svc.search({ folder_id: f.folder_id, pattern: 'PDF', target: { kind: 'connection', id: 'share1' } });
      expect(conn.matches.map((m) => m.path)).to.deep.equal(['docs/report.pdf']);
    });

    it('caps the results and says so', async () => {
      const g = (await svc.create({ storage_id: 'main', name: 'many' })).folder;
      await Promise.all(Array.from({ length: 1005 }, (_, i) => fsp.writeFile(path.join(g.path, `file-${String(i).padStart(4, '0')}.log`), '')));
      const res = await svc.search({ folder_id: g.folder_id, pattern: 'file' });
      expect(res.matches).to.have.length(1000);
      expect(res.truncated).to.equal(true);
      const exact = await svc.search({ folder_id: g.folder_id, pattern: 'file-000' });
      expect(exact.matches).to.have.length(10);
      expect(exact.truncated).to.equal(false);
      const small = await openFoldersService(store, [{ id: 'main', path: poolDir }], { searchLimit: 3 });
      const capped = await small.search({ folder_id: g.folder_id, pattern: '*.log' });
      expect(capped.matches.map((m) => m.name)).to.deep.equal(['file-0000.log', 'file-0001.log', 'file-0002.log']);
      expect(capped.truncated).to.equal(true);
      await svc.delete({ folder_id: g.folder_id });
    });

    it('400 for an empty pattern, 404 for a missing start, 409 for a file start', async () => {
      await rejects(svc.search({ folder_id: f.folder_id, pattern: '' }), 400, "argument 'pattern' must not be empty");
      await rejects(svc.search({ folder_id: f.folder_id, pattern: 'x', sub_path: 'nope' }), 404, "no such file or folder 'nope'");
      await rejects(svc.search({ folder_id: f.folder_id, pattern: 'x', sub_path: 'a.txt' }), 409, "'a.txt' is not a folder");
      await rejects(svc.search({ folder_id: 'f_unknown000', pattern: 'x' }), 404, "folder 'f_unknown000' not found");
    });

    it('refuses every escape', async () => {
      const id = f.folder_id;
      for (const p of ['..', 'sub/../../outside', '/etc', '/', 'link-out', 'link-out/dir', 'rel-out']) {
        await rejects(svc.search({ folder_id: id, pattern: 'secret', sub_path: p }), 400, `argument 'sub_path' ${ESCAPE}`);
      }
      await rejects(svc.search({ folder_id: id, pattern: 'x', sub_path: 'sub\0' }), 400, `argument 'sub_path' ${NUL}`);
      await rejects(svc.search({ folder_id: id, pattern: 'x', sub_path: '..\\..' }), 400, `argument 'sub_path' ${BACKSLASH}`);
      await rejects(svc.search({ folder_id: id, pattern: 'x', target: { kind: 'folder', id, path: 'link-out' } }), 400, `argument 'target.path' ${ESCAPE}`);
    });
  });

  // -------------------------------------------------------------------------
  describe('batch move', () => {
    let f: Folder;
    beforeEach(async () => {
      f = await fixture('batch');
    });

    it('moves every pair and reports them', async () => {
      const { notes, ctx } = recorder();
      const res = await svc.entriesBatchMove(
        {
          folder_id: f.folder_id,
          moves: [
            { src_sub_path: 'a.txt', dst_sub_path: 'Zeta/a.txt' },
            { src_sub_path: 'sub/b.TXT', dst_sub_path: 'b.txt' },
            { src_sub_path: 'sub/deep/', dst_sub_path: 'deep' },
          ],
        },
        ctx,
      );
      expect(res).to.deep.equal({
        at: { kind: 'folder', id: f.folder_id, path: '' },
        moved: [
          { src_sub_path: 'a.txt', dst_sub_path: 'Zeta/a.txt' },
          { src_sub_path: 'sub/b.TXT', dst_sub_path: 'b.txt' },
          { src_sub_path: 'sub/deep', dst_sub_path: 'deep' },
        ],
      });
      expect(await fsp.readFile(path.join(f.path, 'Zeta', 'a.txt'), 'utf8')).to.equal('hello');
      expect(await fsp.readFile(path.join(f.path, 'b.txt'), 'utf8')).to.equal('bee');
      expect(await fsp.readFile(path.join(f.path, 'deep', 'c.md'), 'utf8')).to.equal('c');
      expect(await fsp.readdir(path.join(f.path, 'sub'))).to.deep.equal([]);
      expect(notes[0]).to.include({ summary: 'Moved 3 entries', target: f.name });
    });

    it('uses target kind and id only, over folder_id', async () => {
      const other = await fixture('batch-other');
      const res = await svc.entriesBatchMove({
        folder_id: f.folder_id,
        target: { kind: 'folder', id: other.folder_id, path: 'sub' },
        moves: [{ src_sub_path: 'a.txt', dst_sub_path: 'a2.txt' }],
      });
      expect(res.at).to.deep.equal({ kind: 'folder', id: other.folder_id, path: '' });
      expect(await exists(path.join(other.path, 'a2.txt'))).to.equal(true);
      expect(await exists(path.join(f.path, 'a.txt'))).to.equal(true);
    });

    it('validates every pair before moving anything', async () => {
      const id = f.folder_id;
      const before = await snapshot(f.path);
      const ok = { src_sub_path: 'a.txt', dst_sub_path: 'Zeta/a.txt' };
      await rejects(svc.entriesBatchMove({ folder_id: id, moves: [ok, { src_sub_path: 'nope', dst_sub_path: 'x' }] }), 404, "no such file or folder 'nope'");
      await rejects(svc.entriesBatchMove({ folder_id: id, moves: [ok, { src_sub_path: 'sub/b.TXT', dst_sub_path: 'Zeta' }] }), 409, "'Zeta' already exists");
      await rejects(
        svc.entriesBatchMove({ folder_id: id, moves: [ok, { src_sub_path: 'sub/b.TXT', dst_sub_path: 'none/b' }] }),
        404,
        "no such file or folder 'none'",
      );
      await rejects(
        svc.entriesBatchMove({ folder_id: id, moves: [ok, { src_sub_path: 'sub/b.TXT', dst_sub_path: 'Zeta/a.txt' }] }),
        400,
        "argument 'moves' moves two entries to 'Zeta/a.txt'",
      );
      await rejects(
        svc.entriesBatchMove({ folder_id: id, moves: [ok, { src_sub_path: 'a.txt', dst_sub_path: 'a3.txt' }] }),
        400,
        "argument 'moves' moves 'a.txt' twice",
      );
      await rejects(
        svc.entriesBatchMove({
          folder_id: id,
          moves: [
            { src_sub_path: 'sub', dst_sub_path: 'sub2' },
            { src_sub_path: 'sub/b.TXT', dst_sub_path: 'b.txt' },
          ],
        }),
        400,
        "argument 'moves' moves both 'sub' and 'sub/b.TXT', which is inside it",
      );
      await rejects(
        svc.entriesBatchMove({
          folder_id: id,
          moves: [
            { src_sub_path: 'sub', dst_sub_path: 'sub2' },
            { src_sub_path: 'a.txt', dst_sub_path: 'sub/a.txt' },
          ],
        }),
        400,
        "argument 'moves' puts 'sub/a.txt' inside 'sub', which is moved too",
      );
      await rejects(
        svc.entriesBatchMove({ folder_id: id, moves: [ok, { src_sub_path: 'sub', dst_sub_path: 'sub/deep/x' }] }),
        400,
        "cannot move 'sub' into itself",
      );
      await rejects(
        svc.entriesBatchMove({ folder_id: id, moves: [ok, { src_sub_path: '', dst_sub_path: 'x' }] }),
        400,
        "argument 'moves[1].src_sub_path' must not be the folder root",
      );
      await rejects(svc.entriesBatchMove({ folder_id: id, moves: [] }), 400, "argument 'moves' must list at least one move");
      await rejects(svc.entriesBatchMove({ folder_id: 'f_unknown000', moves: [ok] }), 404, "folder 'f_unknown000' not found");
      expect(await snapshot(f.path)).to.deep.equal(before);
    });

    it('refuses every escape in any pair, moving nothing', async () => {
      const id = f.folder_id;
      const before = await snapshot(f.path);
      const ok = { src_sub_path: 'a.txt', dst_sub_path: 'Zeta/a.txt' };
      for (const p of ['..', 'sub/../../outside', '/etc', '/etc/passwd', 'link-out', 'link-out/secret.txt', 'rel-out', 'rel-out/dir']) {
        await rejects(
          svc.entriesBatchMove({ folder_id: id, moves: [ok, { src_sub_path: p, dst_sub_path: 'stolen' }] }),
          400,
          `argument 'moves[1].src_sub_path' ${ESCAPE}`,
        );
      }
      for (const p of ['..', 'sub/../../x', '/tmp/x', 'link-out/planted', 'rel-out/planted', 'link-out/dir/planted']) {
        await rejects(
          svc.entriesBatchMove({ folder_id: id, moves: [ok, { src_sub_path: 'sub/b.TXT', dst_sub_path: p }] }),
          400,
          `argument 'moves[1].dst_sub_path' ${ESCAPE}`,
        );
      }
      await rejects(
        svc.entriesBatchMove({ folder_id: id, moves: [{ src_sub_path: 'a\0', dst_sub_path: 'b' }] }),
        400,
        `argument 'moves[0].src_sub_path' ${NUL}`,
      );
      await rejects(
        svc.entriesBatchMove({ folder_id: id, moves: [{ src_sub_path: 'a.txt', dst_sub_path: '..\\b' }] }),
        400,
        `argument 'moves[0].dst_sub_path' ${BACKSLASH}`,
      );
      expect(await snapshot(f.path)).to.deep.equal(before);
    });

    it('rolls back the moves already done when a later one fails', async () => {
      const before = await snapshot(f.path, false);
      const realRename = fsp.rename;
      let calls = 0;
      (fsp as { rename: typeof fsp.rename }).rename = async (a, b) => {
        calls++;
        if (calls === 3) throw Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' });
        return realRename(a, b);
      };
      try {
        await rejects(
          svc.entriesBatchMove({
            folder_id: f.folder_id,
            moves: [
              { src_sub_path: 'a.txt', dst_sub_path: 'Zeta/a.txt' },
              { src_sub_path: 'sub/b.TXT', dst_sub_path: 'b.txt' },
              { src_sub_path: 'sub/deep', dst_sub_path: 'deep' },
            ],
          }),
          500,
          "permission denied on 'deep'",
        );
      } finally {
        (fsp as { rename: typeof fsp.rename }).rename = realRename;
      }
      expect(calls).to.equal(5); // three forward renames (the third fails), two put back
      expect(await snapshot(f.path, false)).to.deep.equal(before);
    });

    it('works on a connection', async () => {
      await fsp.writeFile(path.join(share, 'one.txt'), '1');
      const res = await svc.entriesBatchMove({
        folder_id: f.folder_id,
        target: { kind: 'connection', id: 'share1' },
        moves: [{ src_sub_path: 'one.txt', dst_sub_path: 'docs/one.txt' }],
      });
      expect(res.at).to.deep.equal({ kind: 'connection', id: 'share1', path: '' });
      expect(await fsp.readFile(path.join(share, 'docs', 'one.txt'), 'utf8')).to.equal('1');
      await fsp.rm(path.join(share, 'docs', 'one.txt'));
      await rejects(
        svc.entriesBatchMove({
          folder_id: f.folder_id,
          target: { kind: 'connection', id: 'share1' },
          moves: [{ src_sub_path: '../outside/secret.txt', dst_sub_path: 'x' }],
        }),
        400,
        "argument 'moves[0].src_sub_path' must stay inside the location",
      );
    });
  });

  // -------------------------------------------------------------------------
  describe('handlers', () => {
    it('exposes exactly the twelve operations and passes the context for notes', async () => {
      const h = folderHandlers(svc.context);
      expect(Object.keys(h).sort()).to.deep.equal(
        [
          'folders_list',
          'folders_create',
          'folders_update',
          'folders_delete',
          'folders_contents_list',
          'folders_subfolders_create',
          'folders_subfolders_batch_create',
          'folders_entries_move',
          'folders_entries_copy',
          'folders_entries_delete',
          'folders_search',
          'folders_entries_batch_move',
        ].sort(),
      );
      const { notes, ctx } = recorder();
      const created = (await h.folders_create({ storage_id: 'main', name: 'via-handler' }, ctx)) as { folder: Folder };
      expect(notes[0]).to.include({ summary: 'Created folder via-handler' });
      const listed = (await h.folders_list({}, ctx)) as { folders: Folder[] };
      expect(listed.folders.map((x) => x.name)).to.include('via-handler');
      await h.folders_subfolders_create({ folder_id: created.folder.folder_id, name: 's' }, ctx);
      const contents = (await h.folders_contents_list({ folder_id: created.folder.folder_id }, ctx)) as { entries: unknown[] };
      expect(contents.entries).to.have.length(1);
      await h.folders_delete({ folder_id: created.folder.folder_id }, ctx);
      expect(notes.map((n) => n.summary)).to.deep.equal(['Created folder via-handler', 'Created subfolder s', 'Deleted folder via-handler']);
    });
  });
});
