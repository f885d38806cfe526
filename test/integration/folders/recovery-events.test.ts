/**
 * The `folders.state` events recovery writes for intents a crash left open
 * (hand-written here, on a real filesystem): a change the disk shows made
 * has the event its intent names, with `reason: 'found-at-open'` and the
 * caller as actor; a change recovery undoes, one not made, and an intent
 * from before events (no `report`) have none.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import type { EventsPort } from '../../../daemon/domain.js';
import { LocalFiles } from '../../../daemon/folders/fs/index.js';
import { openFolders } from '../../../daemon/folders/index.js';
import { FolderRecords, type Folder, type FolderReport } from '../../../daemon/folders/records.js';
import { Store } from '../../../daemon/store/store.js';
import { poolPerTest } from '../../helpers/folders-service.js';

describe('folders: events of interrupted changes, written by recovery', () => {
  const at = poolPerTest('hostd-recovery-ev-');
  const rec = at.rec;
  const report = (folderId: string, operation: FolderReport['operation'], change: Partial<FolderReport['change']>): FolderReport => ({
    actor: 'tok-a',
    operation,
    change: { folder_id: folderId, state: 'changed', ...change },
  });

  it('reports each change found made, once, and nothing for one undone, not made, or from before events', async () => {
    const inF = (...p: string[]) => path.join(at.pool, 'one', ...p);
    fs.mkdirSync(inF());
    const place = { kind: 'folder', id: 'f_one' };
    // What the disk shows when the daemon died.
    fs.writeFileSync(inF('a2'), 'a'); // moves-done: a -> a2 was made
    fs.writeFileSync(inF('b2'), 'b'); // moves-half: b -> b2 made, c -> c2 not
    fs.writeFileSync(inF('c'), 'c');
    fs.writeFileSync(inF('kept'), 'k'); // unlink not made
    fs.mkdirSync(inF('newdir')); // mkdir made
    fs.mkdirSync(inF('.hostd-trash-x')); // remove: renamed aside, not yet removed
    fs.mkdirSync(path.join(at.pool, 'two')); // folder create made
    fs.writeFileSync(inF('copy-src'), 's'); // copy not placed: the temporary entry is there
    fs.writeFileSync(inF('.hostd-copy-y'), 's');

    const store = await Store.open(path.join(at.dir, 'db'));
    try {
      await store.sub<Folder>('folders').put('f_one', rec('f_one', 'one'));
      const intents = store.sub<unknown>('folder_intents');
      await intents.put('e-1-moves-done', {
        op: 'moves',
        place,
        pairs: [{ from: 'a', to: 'a2' }],
        report: report('f_one', 'folders_entries_batch_move', { sub_path: '' }),
      });
      await intents.put('e-2-moves-half', {
        op: 'moves',
        place,
        pairs: [
          { from: 'b', to: 'b2' },
          { from: 'c', to: 'c2' },
        ],
        report: report('f_one', 'folders_entries_batch_move', { sub_path: '' }),
      });
      await intents.put('e-3-unlink-kept', { op: 'unlink', place, rel: 'kept', report: report('f_one', 'folders_entries_delete', { sub_path: 'kept' }) });
      await intents.put('e-4-unlink-gone', { op: 'unlink', place, rel: 'gone', report: report('f_one', 'folders_entries_delete', { sub_path: 'gone' }) });
      await intents.put('e-5-mkdir', { op: 'mkdir', place, rel: 'newdir', report: report('f_one', 'folders_subfolders_create', { sub_path: '' }) });
      await intents.put('e-6-remove', {
        op: 'remove',
        place,
        parent: '',
        trash: '.hostd-trash-x',
        entry: 'tree',
        report: report('f_one', 'folders_entries_delete', { sub_path: 'tree' }),
      });
      await intents.put('e-7-old', { op: 'unlink', place, rel: 'gone-too' });
      await intents.put('e-8-copy-unplaced', {
        op: 'copy',
        place,
        parent: '',
        temp: '.hostd-copy-y',
        dest: 'copy-dst',
        report: report('f_one', 'folders_entries_copy', { sub_path: 'copy-dst' }),
      });
      await intents.put('f_two', { op: 'create', rec: rec('f_two', 'two'), report: report('f_two', 'folders_create', { state: 'created', name: 'two' }) });

      const seen: unknown[] = [];
      const events: EventsPort = {
        publishState: async (domain, resource, state, data = {}, opts = {}) =>
          void seen.push([domain, resource, state, data.operation, data.sub_path ?? null, data.reason, opts.actor]),
      };
      await openFolders({
        records: new FolderRecords(store),
        driver: new LocalFiles(),
        pools: [{ id: 'p', path: at.pool }],
        pause: async () => {},
        log: pino({ level: 'silent' }),
        events,
      });

      expect(seen).to.deep.equal([
        ['folders', 'folders/f_one', 'changed', 'folders_entries_batch_move', '', 'found-at-open', 'tok-a'],
        ['folders', 'folders/f_one', 'changed', 'folders_entries_delete', 'gone', 'found-at-open', 'tok-a'],
        ['folders', 'folders/f_one', 'changed', 'folders_subfolders_create', '', 'found-at-open', 'tok-a'],
        ['folders', 'folders/f_one', 'changed', 'folders_entries_delete', 'tree', 'found-at-open', 'tok-a'],
        ['folders', 'folders/f_two', 'created', 'folders_create', null, 'found-at-open', 'tok-a'],
      ]);
      expect(await intents.keys().all()).to.deep.equal([]);
      // What recovery did to the disk: the half batch put back, the trash and the partial copy removed.
      expect(fs.readdirSync(inF()).sort()).to.deep.equal(['a2', 'b', 'c', 'copy-src', 'kept', 'newdir']);
    } finally {
      await store.close();
    }
  });
});
