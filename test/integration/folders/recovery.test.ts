/**
 * Folder changes interrupted by a crash: intents left in the store are
 * finished or undone at start-up according to what is on disk.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { conflict } from '../../../daemon/lib/errors.js';
import { Store } from '../../../daemon/store/store.js';
import { openFoldersService, poolPerTest, type Folder } from '../../helpers/folders-service.js';

describe('folders: recovery of interrupted changes', () => {
  const at = poolPerTest('hostd-recovery-');
  const rec = at.rec;

  async function withStore(fn: (store: Store) => Promise<void>): Promise<void> {
    const store = await Store.open(path.join(at.dir, 'db'));
    try {
      await fn(store);
    } finally {
      await store.close();
    }
  }

  async function listAfterInit(): Promise<Folder[]> {
    let out: Folder[] = [];
    await withStore(async (store) => {
      const svc = await openFoldersService(store, [{ id: 'p', path: at.pool }]);
      out = (await svc.list()).folders;
      expect(await store.sub('folder_intents').keys().all()).to.deep.equal([]);
    });
    return out;
  }

  it('finishes a create whose directory was made, and drops one whose was not', async () => {
    await withStore(async (store) => {
      const intents = store.sub<unknown>('folder_intents');
      await intents.put('f_made', { op: 'create', rec: rec('f_made', 'made') });
      await intents.put('f_never', { op: 'create', rec: rec('f_never', 'never') });
    });
    fs.mkdirSync(path.join(at.pool, 'made'));
    const folders = await listAfterInit();
    expect(folders.map((f) => f.name)).to.deep.equal(['made']);
  });

  it('finishes a rename that happened on disk and keeps the old name when it did not', async () => {
    await withStore(async (store) => {
      await store.sub<Folder>('folders').put('f_a', rec('f_a', 'a'));
      await store.sub<Folder>('folders').put('f_b', rec('f_b', 'b'));
      const intents = store.sub<unknown>('folder_intents');
      await intents.put('f_a', { op: 'rename', from: rec('f_a', 'a'), to: rec('f_a', 'a2') });
      await intents.put('f_b', { op: 'rename', from: rec('f_b', 'b'), to: rec('f_b', 'b2') });
    });
    fs.mkdirSync(path.join(at.pool, 'a2'));
    fs.mkdirSync(path.join(at.pool, 'b'));
    const folders = await listAfterInit();
    expect(folders.map((f) => [f.folder_id, f.name, f.path])).to.deep.equal([
      ['f_a', 'a2', path.join(at.pool, 'a2')],
      ['f_b', 'b', path.join(at.pool, 'b')],
    ]);
  });

  it('completes a delete whose tree was moved aside and removes the trash', async () => {
    const trash = path.join(at.pool, '.hostd-trash-f_d-0000');
    await withStore(async (store) => {
      await store.sub<Folder>('folders').put('f_d', rec('f_d', 'd'));
      await store.sub<Folder>('folders').put('f_k', rec('f_k', 'k'));
      const intents = store.sub<unknown>('folder_intents');
      await intents.put('f_d', { op: 'delete', rec: rec('f_d', 'd'), trash });
      await intents.put('f_k', { op: 'delete', rec: rec('f_k', 'k'), trash: path.join(at.pool, '.hostd-trash-f_k-0000') });
    });
    fs.mkdirSync(path.join(trash, 'sub'), { recursive: true });
    fs.mkdirSync(path.join(at.pool, 'k'));
    const folders = await listAfterInit();
    expect(folders.map((f) => f.name)).to.deep.equal(['k']);
    expect(fs.existsSync(trash)).to.equal(false);
    expect(fs.readdirSync(at.pool).sort()).to.deep.equal(['k']);
  });

  it('refuses folder names in the reserved .hostd- namespace', async () => {
    await withStore(async (store) => {
      const svc = await openFoldersService(store, [{ id: 'p', path: at.pool }]);
      const err = await svc.create({ storage_id: 'p', name: '.hostd-trash-x' }).then(
        () => null,
        (e) => e,
      );
      expect(err.status).to.equal(400);
      expect(err.message).to.equal("argument 'name' must not start with '.hostd-' (reserved)");
    });
  });
  it('finishes entry changes inside a folder: a copy in progress removed, a tree delete completed, moves put back', async () => {
    const f = rec('f_e', 'e');
    const dir = path.join(at.pool, 'e');
    fs.mkdirSync(path.join(dir, 'sub', '.hostd-copy-1', 'partial'), { recursive: true });
    fs.mkdirSync(path.join(dir, '.hostd-trash-2', 'deep', 'er'), { recursive: true });
    fs.writeFileSync(path.join(dir, '.hostd-trash-2', 'deep', 'er', 'x'), 'x');
    fs.writeFileSync(path.join(dir, 'moved-a'), 'a'); // 'a' was moved, 'b' was not yet
    fs.writeFileSync(path.join(dir, 'b'), 'b');
    fs.mkdirSync(path.join(dir, 'n1'));
    fs.mkdirSync(path.join(dir, 'n2'));
    fs.writeFileSync(path.join(dir, 'n2', 'used'), 'kept: not empty');
    await withStore(async (store) => {
      await store.sub<Folder>('folders').put(f.folder_id, f);
      const intents = store.sub<unknown>('folder_intents');
      const place = { kind: 'folder', id: f.folder_id };
      await intents.put('e-1', { op: 'copy', place, parent: 'sub', temp: '.hostd-copy-1' });
      await intents.put('e-2', { op: 'remove', place, parent: '', trash: '.hostd-trash-2' });
      await intents.put('e-3', {
        op: 'moves',
        place,
        pairs: [
          { from: 'a', to: 'moved-a' },
          { from: 'b', to: 'moved-b' },
        ],
      });
      await intents.put('e-4', { op: 'mkdirs', place, parent: '', names: ['n1', 'n2', 'n3'] });
    });
    await listAfterInit();
    expect(fs.readdirSync(dir).sort()).to.deep.equal(['a', 'b', 'n2', 'sub']);
    expect(fs.readdirSync(path.join(dir, 'sub'))).to.deep.equal([]);
    expect(fs.readFileSync(path.join(dir, 'a'), 'utf8')).to.equal('a');
  });

  it('keeps an entry change in a location that is not mounted at start, and finishes it on the next call there', async () => {
    const share = path.join(at.dir, 'share');
    fs.mkdirSync(path.join(share, 'docs', '.hostd-copy-9', 'half'), { recursive: true });
    await withStore(async (store) => {
      await store.sub<unknown>('folder_intents').put('e-9', { op: 'copy', place: { kind: 'connection', id: 'loc' }, parent: 'docs', temp: '.hostd-copy-9' });
    });
    let mounted = false;
    const resolveConnection = async (id: string) => {
      if (!mounted) throw conflict(`location '${id}' is not mounted`);
      return share;
    };
    await withStore(async (store) => {
      const svc = await openFoldersService(store, [{ id: 'p', path: at.pool }], { resolveConnection });
      // Still there, and still journaled (under a new key), for after the mount.
      expect(fs.existsSync(path.join(share, 'docs', '.hostd-copy-9'))).to.equal(true);
      const kept = await store.sub<unknown>('folder_intents').iterator().all();
      expect(kept.map(([, v]) => v)).to.deep.equal([{ op: 'copy', place: { kind: 'connection', id: 'loc' }, parent: 'docs', temp: '.hostd-copy-9' }]);
      mounted = true;
      const listed = await svc.contentsList({ folder_id: 'unused', target: { kind: 'connection', id: 'loc', path: 'docs' } });
      expect(listed.entries).to.deep.equal([]);
      expect(await store.sub('folder_intents').keys().all()).to.deep.equal([]);
    });
  });
});
