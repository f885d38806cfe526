/**
 * apps_delete: uninstall an app. Its containers (forced), the project's
 * networks and volumes, its data directory and compose directory, its
 * record, content and documentation go; the managed folders it mounted stay.
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import { appKey, type AppsContext, type Call } from './context.js';
import { actorOf } from '../lib/operator.js';
import { removeEverything } from './definition.js';
import { ENGINE } from './driver.js';

export async function uninstallApp(c: AppsContext, args: ArgsOf<'apps_delete'>, ctx: Call): Promise<ResultOf<'apps_delete'>> {
  await c.ready([ENGINE]);
  return c.lock.exclusiveOn(
    () => c.settled(args.app_id),
    [appKey(args.app_id)],
    'uninstall',
    async (r) => {
      await c.records.begin(r.app_id, { op: 'delete', app_id: r.app_id, record: r });
      await c.pause('delete.after-intent');
      await removeEverything(c, r);
      await c.states.commit(r.app_id, actorOf(ctx), c.records.commitOps(r.app_id, c.records.forget(r.app_id)));
      const kept = [...new Set(r.folder_assignments.map((a) => a.folder_id))];
      ctx.note({ summary: `Uninstalled app ${r.name}`, target: `apps/${r.app_id}`, metadata: { app_id: r.app_id, data_dir: r.data_dir, folders_kept: kept } });
      return { app_id: r.app_id, deleted: true as const, data_dir: r.data_dir, folders_kept: kept };
    },
  );
}
