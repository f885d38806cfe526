/**
 * The folders domain: managed folders in the storage pools, and the files
 * inside them or inside a connected location's mount. open() composes the
 * filesystem driver (fs/), the records and the shared context, makes every
 * pool directory, settles what a restart interrupted, and only then serves.
 */
import { opsOf } from '../../api/registry/index.js';
import { defineDomain, type EventsPort } from '../domain.js';
import { notFound } from '../lib/errors.js';
import { IntentRecovery } from '../lib/recovery.js';
import { testPause } from '../lib/test-pause.js';
import { FoldersContext, type FoldersDeps } from './context.js';
import { folderRef, folderRefs } from './folders.js';
import { LocalFiles } from './fs/index.js';
import { NO_EVENTS, settled, type FolderEvents } from './events.js';
import { folderHandlers } from './handlers.js';
import { FolderRecords, type FolderIntent, type FolderReport } from './records.js';
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
export async function openFolders(deps: Omit<FoldersDeps, 'recovery' | 'events'> & { log: RecoveryLog; events?: EventsPort }): Promise<FoldersContext> {
  for (const pool of deps.pools) await deps.driver.ensureRoot(pool.path);
  const events: FolderEvents = { port: deps.events ?? NO_EVENTS, store: deps.records.store };
  // The events settle finds owed (a change made before the crash), by intent key: written with the intent's drop.
  const owed = new Map<string, FolderReport>();
  const recovery: IntentRecovery<FolderIntent> = new IntentRecovery<FolderIntent>({
    domain: 'folders',
    journal: deps.records.journalVia(settled(events, owed, (ops) => deps.records.droppedIntent(ops))),
    log: deps.log,
    settle: (key, intent) => settle(c, key, intent, owed),
    reconcile: () => reconcile(c),
    describe,
  });
  const c = new FoldersContext({ ...deps, recovery, events });
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
      events: deps.events,
    });
    return {
      handlers: folderHandlers(c),
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
