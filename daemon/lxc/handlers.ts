/** The lxc operations as dispatch handlers: typed from the registry, no logic. */
import type { HandlersOf } from '../../api/registry/handlers.js';
import type { DomainOperationName } from '../../api/registry/index.js';
import type { LxcServices } from './services.js';

export type LxcOperation = DomainOperationName<'lxc'>;

export function lxcHandlers(s: LxcServices): HandlersOf<LxcOperation> {
  return {
    lxc_list: () => s.containers.list(),
    lxc_create: (a, ctx) => s.create.create(a, ctx),
    lxc_images_list: () => s.images.list(),
    lxc_images_catalog: () => s.images.catalog(),
    lxc_images_download: (a, ctx) => s.images.download(a, ctx),
    lxc_template_create: (a, ctx) => s.templates.capture(a, ctx),
    lxc_images_delete: (a, ctx) => s.images.delete(a, ctx),
    lxc_images_move: (a, ctx) => s.images.move(a, ctx),
    lxc_host_status: () => s.hostStatus.hostStatus(),
    lxc_get: (a) => s.containers.get(a.id),
    lxc_update: (a, ctx) => s.containers.update(a, ctx),
    lxc_delete: (a, ctx) => s.containers.delete(a.id, ctx),
    lxc_start: (a, ctx) => s.lifecycle.start(a.id, ctx),
    lxc_stop: (a, ctx) => s.lifecycle.stop(a.id, ctx),
    lxc_restart: (a, ctx) => s.lifecycle.restart(a.id, ctx),
    lxc_freeze: (a, ctx) => s.lifecycle.freeze(a.id, ctx),
    lxc_unfreeze: (a, ctx) => s.lifecycle.unfreeze(a.id, ctx),
    lxc_clone: (a, ctx) => s.create.clone(a, ctx),
    lxc_exec: (a, ctx) => s.exec.exec(a, ctx),
    lxc_stats: (a) => s.stats.stats(a.id),
    lxc_disk_update: (a, ctx) => s.disk.update(a, ctx),
    lxc_move: (a, ctx) => s.move.move(a, ctx),
    lxc_docs_get: (a) => s.docs.get(a.id),
    lxc_docs_set: (a, ctx) => s.docs.set(a, ctx),
  };
}
