/**
 * The folders domain: managed folders in the storage pools, and the files
 * inside them or inside a connected location's mount. open() composes the
 * filesystem driver (fs/), the records and the shared context, makes every
 * pool directory, settles what a restart interrupted, and only then serves.
 */
import { opsOf } from '../../api/registry/index.js';
import { defineDomain } from '../domain.js';
import { notFound } from '../lib/errors.js';
import { IntentRecovery } from '../lib/recovery.js';
import { testPause } from '../lib/test-pause.js';
import { FoldersContext, type FoldersDeps } from './context.js';
import { folderRef, folderRefs } from './folders.js';
import { LocalFiles } from './fs/index.js';
import { reportChanges } from './events.js';
import { folderHandlers } from './handlers.js';
import { FolderRecords, type FolderIntent } from './records.js';
import { describe, reconcile, settle } from './recovery.js';

interface RecoveryLog {
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
}

/**
 * The context over its dependencies, with every pool directory made and
 * start-up recovery run (changes that cannot be settled yet stay pending,
 * with why). What open() serves; the integration tests open it over a store
 * of their own.
 */
export async function openFolders(deps: Omit<FoldersDeps, 'recovery'> & { log: RecoveryLog }): Promise<FoldersContext> {
  for (const pool of deps.pools) await deps.driver.ensureRoot(pool.path);
  const recovery: IntentRecovery<FolderIntent> = new IntentRecovery<FolderIntent>({
    domain: 'folders',
    journal: deps.records.journal,
    log: deps.log,
    settle: (key, intent) => settle(c, key, intent),
    reconcile: () => reconcile(c),
    describe,
  });
  const c = new FoldersContext({ ...deps, recovery });
  // Entry changes need the folders' directories; folder changes never run beside entry changes of the same
  // folder (both hold its lock), so the records as stored serve for those, and are loaded again after.
  await deps.records.load();
  await recovery.run();
  await deps.records.load();
  return c;
}

export const foldersDomain = defineDomain({
  name: 'folders',
  ops: opsOf('folders'),
  async open(deps) {
    const log = deps.log.child({ domain: 'folders' });
    const driver = new LocalFiles();
    const c = await openFolders({
      records: new FolderRecords(deps.store),
      driver,
      pools: deps.config.pools,
      // A connection target needs the locations domain; without it no location exists.
      resolveConnection: async (id) => {
        const conns = deps.ports.all('connections')[0];
        if (!conns) throw notFound(`location '${id}' not found`);
        return conns.mountDir(id);
      },
      pause: testPause(deps.env, 'folders', log),
      log,
    });
    return {
      handlers: folderHandlers(c, (op, result, ctx) => reportChanges(deps.events, log, op, result, ctx)),
      info: async () => ({ name: 'folders', built: true, runtimes: await driver.availability() }),
      close: async () => {},
      provides: {
        folders: {
          folder: (id) => folderRef(c, id),
          list: () => folderRefs(c),
        },
      },
    };
  },
});
