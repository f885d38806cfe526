/** A container's documentation (`GET/PUT /lxc/{id}/docs`), by the one rule of daemon/lib/docs.ts. */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { NoteSink } from '../lib/caller.js';
import { nextDocs } from '../lib/docs.js';
import type { LxcContext } from './context.js';
import { ctKey } from './records.js';

export class Docs {
  constructor(private readonly ctx: LxcContext) {}

  async get(lxcid: number): Promise<ResultOf<'lxc_docs_get'>> {
    await this.ctx.record(lxcid);
    const d = await this.ctx.records.docs.get(ctKey(lxcid));
    return { lxcid, content: d?.content ?? '', updated_at: d?.updated_at ?? null };
  }

  set(a: ArgsOf<'lxc_docs_set'>, ctx: NoteSink): Promise<ResultOf<'lxc_docs_set'>> {
    return this.ctx.lock.run([`docs:${a.id}`], async () => {
      await this.ctx.record(a.id);
      const t = this.ctx.now();
      const content = nextDocs((await this.ctx.records.docs.get(ctKey(a.id)))?.content ?? '', a.content, a.append_entry ?? false, t);
      await this.ctx.records.docs.put(ctKey(a.id), { content, updated_at: t });
      ctx.note({ summary: `${a.append_entry ? 'Appended to' : 'Set'} the documentation of container ${a.id}`, target: `lxc/${a.id}` });
      return { lxcid: a.id, content, updated_at: t };
    });
  }
}
