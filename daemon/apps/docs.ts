/**
 * apps_docs_get and apps_docs_set: an app's Markdown documentation, by the
 * rule every domain's docs follow (daemon/lib/docs.ts).
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { NoteSink } from '../lib/caller.js';
import { nextDocs } from '../lib/docs.js';
import type { AppsContext } from './context.js';
import { ENGINE } from './driver.js';

export async function getDocs(c: AppsContext, args: ArgsOf<'apps_docs_get'>): Promise<ResultOf<'apps_docs_get'>> {
  await c.ready([ENGINE]);
  const r = c.record(args.app_id);
  const docs = await c.records.docs.get(r.app_id);
  return { app_id: r.app_id, content: docs?.content ?? '', updated_at: docs?.updated_at ?? null };
}

export async function setDocs(c: AppsContext, args: ArgsOf<'apps_docs_set'>, ctx: NoteSink): Promise<ResultOf<'apps_docs_set'>> {
  await c.ready([ENGINE]);
  const r = c.record(args.app_id);
  // Two writers of one app's text wait for each other (an append never loses another).
  return c.lock.run(
    [`docs:${r.app_id}`],
    async () => {
      c.record(r.app_id);
      const at = new Date().toISOString();
      const content = nextDocs((await c.records.docs.get(r.app_id))?.content ?? '', args.content, args.append_entry ?? false, at);
      await c.records.docs.put(r.app_id, { content, updated_at: at });
      ctx.note({
        summary: `${args.append_entry ? 'Appended to' : 'Set'} the documentation of app ${r.name}`,
        target: `apps/${r.app_id}`,
        metadata: { app_id: r.app_id, bytes: Buffer.byteLength(content), append: Boolean(args.append_entry) },
      });
      return { app_id: r.app_id, content, updated_at: at };
    },
    'documentation update',
  );
}
