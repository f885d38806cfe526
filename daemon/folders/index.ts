/**
 * The folders domain: managed folders in the storage pools, and the files
 * inside them or inside a connected location's mount.
 */
import { opsOf } from '../../api/registry/index.js';
import { defineDomain } from '../domain.js';
import { notFound } from '../lib/errors.js';
import { FoldersService } from './service.js';
import { folderHandlers } from './handlers.js';

export const foldersDomain = defineDomain({
  name: 'folders',
  ops: opsOf('folders'),
  async open(deps) {
    // Test hook (crash-safety tests): a multi-step change stops for good at the named step, after
    // logging it, so that the test can kill the daemon there.
    const pauseAt = deps.env.HOSTD_TEST_PAUSE_AT;
    const svc = new FoldersService(deps.store, deps.config.pools, {
      // A connection target needs the locations domain; without it no location exists.
      resolveConnection: async (id) => {
        const conns = deps.ports.all('connections')[0];
        if (!conns) throw notFound(`location '${id}' not found`);
        return conns.mountDir(id);
      },
      pause: pauseAt
        ? async (step) => {
            if (step !== pauseAt) return;
            deps.log.warn({ step }, 'test pause');
            await new Promise<never>(() => {});
          }
        : undefined,
    });
    await svc.init();
    return {
      handlers: folderHandlers(svc),
      info: async () => ({ name: 'folders', built: true, runtimes: [] }),
      close: async () => {},
      provides: {
        folders: {
          folder: (id) => svc.folderRef(id),
          list: () => svc.folderRefs(),
        },
      },
    };
  },
});
