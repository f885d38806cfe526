/** The lxc operations as dispatch handlers: typed from the registry, no logic. */
import type { HandlersOf } from '../../api/registry/handlers.js';
import type { DomainOperationName } from '../../api/registry/index.js';
import type { CallContext } from '../lib/caller.js';
import type { LxcService } from './service.js';

export type LxcOperation = DomainOperationName<'lxc'>;

const withOwner = (ctx: CallContext) => ({ note: (n: Parameters<CallContext['note']>[0]) => ctx.note(n), owner: ctx.caller.tokenName });

export function lxcHandlers(svc: LxcService): HandlersOf<LxcOperation> {
  return {
    lxc_list: () => svc.list(),
    lxc_create: (a, ctx) => svc.create(a, ctx),
    lxc_images_list: () => svc.imagesList(),
    lxc_images_catalog: () => svc.imagesCatalog(),
    lxc_images_download: (a, ctx) => svc.imagesDownload(a, withOwner(ctx)),
    lxc_template_create: (a, ctx) => svc.templateCreate(a, withOwner(ctx)),
    lxc_images_delete: (a, ctx) => svc.imagesDelete(a, ctx),
    lxc_images_move: (a, ctx) => svc.imagesMove(a, withOwner(ctx)),
    lxc_host_status: () => svc.hostStatus(),
    lxc_get: (a) => svc.get(a.id),
    lxc_update: (a, ctx) => svc.update(a, ctx),
    lxc_delete: (a, ctx) => svc.delete(a.id, ctx),
    lxc_start: (a, ctx) => svc.start(a.id, ctx),
    lxc_stop: (a, ctx) => svc.stop(a.id, ctx),
    lxc_restart: (a, ctx) => svc.restart(a.id, ctx),
    lxc_freeze: (a, ctx) => svc.freeze(a.id, ctx),
    lxc_unfreeze: (a, ctx) => svc.unfreeze(a.id, ctx),
    lxc_clone: (a, ctx) => svc.clone(a, ctx),
    lxc_exec: (a, ctx) => svc.exec(a, ctx),
    lxc_stats: (a) => svc.stats(a.id),
    lxc_disk_update: (a, ctx) => svc.diskUpdate(a, ctx),
    lxc_move: (a, ctx) => svc.move(a, withOwner(ctx)),
    lxc_docs_get: (a) => svc.docsGet(a.id),
    lxc_docs_set: (a, ctx) => svc.docsSet(a, ctx),
  };
}
