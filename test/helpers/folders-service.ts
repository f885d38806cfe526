/**
 * The folders domain opened over a store and pools of a test's own (the real
 * filesystem driver, recovery run as open() runs it), with its operations
 * under short names, for the tests that call them without a daemon.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import type { ArgsOf } from '../../api/registry/index.js';
import type { PoolConfig } from '../../daemon/config.js';
import { contentsList, search } from '../../daemon/folders/contents.js';
import type { FoldersContext } from '../../daemon/folders/context.js';
import { copyEntry } from '../../daemon/folders/copy.js';
import { deleteEntry, moveEntries, moveEntry } from '../../daemon/folders/entries.js';
import { createFolder, deleteFolder, listFolders, renameFolder } from '../../daemon/folders/folders.js';
import { LocalFiles } from '../../daemon/folders/fs/index.js';
import { openFolders } from '../../daemon/folders/index.js';
import { FolderRecords, type Folder } from '../../daemon/folders/records.js';
import { createSubfolder, createSubfolders } from '../../daemon/folders/subfolders.js';
import { noNotes, type NoteSink } from '../../daemon/lib/caller.js';
import type { PauseHook } from '../../daemon/lib/test-pause.js';
import type { Store } from '../../daemon/store/store.js';

export type { Folder } from '../../daemon/folders/records.js';
export type { Target } from '../../api/registry/schema.js';

export interface FoldersTestOptions {
  resolveConnection?: (locationId: string) => Promise<string>;
  searchLimit?: number;
  listLimit?: number;
  pause?: PauseHook;
}

export async function openFoldersService(store: Store, pools: PoolConfig[], opts: FoldersTestOptions = {}) {
  const c = await openFolders({
    records: new FolderRecords(store),
    driver: new LocalFiles(),
    pools,
    pause: opts.pause ?? (() => Promise.resolve()),
    log: pino({ level: 'silent' }),
    ...opts,
  });
  return foldersApi(c);
}

export function foldersApi(c: FoldersContext) {
  return {
    context: c,
    list: (req: ArgsOf<'folders_list'> = {}) => listFolders(c, req),
    create: (req: ArgsOf<'folders_create'>, ctx: NoteSink = noNotes) => createFolder(c, req, ctx),
    update: (req: ArgsOf<'folders_update'>, ctx: NoteSink = noNotes) => renameFolder(c, req, ctx),
    delete: (req: ArgsOf<'folders_delete'>, ctx: NoteSink = noNotes) => deleteFolder(c, req, ctx),
    contentsList: (req: ArgsOf<'folders_contents_list'>) => contentsList(c, req),
    subfoldersCreate: (req: ArgsOf<'folders_subfolders_create'>, ctx: NoteSink = noNotes) => createSubfolder(c, req, ctx),
    subfoldersBatchCreate: (req: ArgsOf<'folders_subfolders_batch_create'>, ctx: NoteSink = noNotes) => createSubfolders(c, req, ctx),
    entriesMove: (req: ArgsOf<'folders_entries_move'>, ctx: NoteSink = noNotes) => moveEntry(c, req, ctx),
    entriesCopy: (req: ArgsOf<'folders_entries_copy'>, ctx: NoteSink = noNotes) => copyEntry(c, req, ctx),
    entriesDelete: (req: ArgsOf<'folders_entries_delete'>, ctx: NoteSink = noNotes) => deleteEntry(c, req, ctx),
    search: (req: ArgsOf<'folders_search'>) => search(c, req),
    entriesBatchMove: (req: ArgsOf<'folders_entries_batch_move'>, ctx: NoteSink = noNotes) => moveEntries(c, req, ctx),
  };
}

export type FoldersService = ReturnType<typeof foldersApi>;

export interface TestPool {
  /** This test's temporary directory (a store may go in it). */
  dir: string;
  /** The empty pool directory `pool/` in it. */
  pool: string;
  /** A record of folder `name` in the pool (storage id `p`). */
  rec(id: string, name: string): Folder;
}

/** Registers, in a suite, a fresh temporary directory with an empty pool in it for each test, removed after the test. */
export function poolPerTest(prefix: string): TestPool {
  const at: TestPool = {
    dir: '',
    pool: '',
    rec: (id, name) => ({ folder_id: id, name, storage_id: 'p', path: path.join(at.pool, name), created_at: new Date().toISOString() }),
  };
  beforeEach(() => {
    at.dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    at.pool = path.join(at.dir, 'pool');
    fs.mkdirSync(at.pool);
  });
  afterEach(() => fs.rmSync(at.dir, { recursive: true, force: true }));
  return at;
}
