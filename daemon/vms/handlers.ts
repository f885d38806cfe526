/**
 * The /vms and /templates operations as dispatch handlers: arguments arrive
 * schema-validated and typed from the registry; the services do the rest.
 */
import type { HandlersOf } from '../../api/registry/handlers.js';
import type { ImageService } from './images.js';
import type { VmService } from './service.js';
import type { TemplateBuilder } from './templates.js';

export type VmOperation =
  | 'vms_list'
  | 'vms_create'
  | 'vms_images_list'
  | 'vms_images_catalog'
  | 'vms_images_delete'
  | 'vms_images_move'
  | 'vms_isos_list'
  | 'vms_isos_move'
  | 'vms_warm_states_list'
  | 'vms_warm_states_restore'
  | 'vms_warm_states_delete'
  | 'vms_capacity'
  | 'vms_host_status'
  | 'vms_get'
  | 'vms_update'
  | 'vms_delete'
  | 'vms_start'
  | 'vms_stop'
  | 'vms_suspend'
  | 'vms_resume'
  | 'vms_clone'
  | 'vms_cloud_init_update'
  | 'vms_exec'
  | 'vms_wait_ready'
  | 'vms_wait_ip'
  | 'vms_connection_get'
  | 'vms_disks_create'
  | 'vms_disks_delete'
  | 'vms_disks_update'
  | 'vms_template_create'
  | 'vms_warm_states_create'
  | 'vms_docs_get'
  | 'vms_docs_set'
  | 'templates_create'
  | 'templates_get';

export function vmHandlers(vms: VmService, images: ImageService, templates: TemplateBuilder): HandlersOf<VmOperation> {
  return {
    vms_list: async () => ({ vms: await vms.list() }),
    vms_create: async (a, ctx) => {
      await images.catalog().catch(() => undefined);
      const { peer_id: _p, ...input } = a;
      void _p;
      return vms.create(input, ctx, { catalogHint: images.inCatalog });
    },
    vms_images_list: () => images.list(),
    vms_images_catalog: () => images.catalogList(),
    vms_images_delete: (a, ctx) => images.remove(a.image_id, a.storage_id || undefined, ctx),
    vms_images_move: (a, ctx) => images.move(a.image_id, a.source_storage_id, a.target_storage_id, ctx),
    vms_isos_list: () => images.isos(),
    vms_isos_move: (a, ctx) => images.moveIso(a.iso_id, a.source_storage_id, a.target_storage_id, ctx),
    vms_warm_states_list: async () => ({ warm_states: await vms.warmStates() }),
    vms_warm_states_restore: (a, ctx) => vms.restoreWarmState(a.id, { name: a.name, vmid: a.vmid }, ctx),
    vms_warm_states_delete: (a, ctx) => vms.deleteWarmState(a.id, ctx),
    vms_capacity: () => vms.capacity(),
    vms_host_status: () => vms.hostStatus(),
    vms_get: async (a) => ({ vm: await vms.get(a.id) }),
    vms_update: (a, ctx) => vms.update(a.id, a, ctx),
    vms_delete: (a, ctx) => vms.remove(a.id, ctx),
    vms_start: (a, ctx) => vms.start(a.id, ctx),
    vms_stop: (a, ctx) => vms.stop(a.id, ctx, { force: a.force, timeoutSeconds: a.timeout_seconds }),
    vms_suspend: (a, ctx) => vms.suspend(a.id, ctx),
    vms_resume: (a, ctx) => vms.resume(a.id, ctx),
    vms_clone: (a, ctx) => vms.clone(a.id, a.source_vmid, a.name, ctx),
    vms_cloud_init_update: (a, ctx) => vms.cloudInit(a.id, a, ctx),
    vms_exec: (a, ctx) => vms.exec(a.id, a.command, a.timeout_seconds, ctx),
    vms_wait_ready: (a) => vms.waitReady(a.id, a.timeout_seconds),
    vms_wait_ip: (a) => vms.waitIp(a.id, a.timeout_seconds),
    vms_connection_get: (a) => vms.connection(a.id),
    vms_disks_create: (a, ctx) => vms.diskAttach(a.id, a.size_gb, ctx),
    vms_disks_delete: (a, ctx) => vms.diskDelete(a.id, a.disk_id, ctx),
    vms_disks_update: (a, ctx) => vms.diskGrow(a.id, a.disk_id, a.size_gb, ctx),
    vms_template_create: (a, ctx) => images.capture(a.id, a.template_name, ctx),
    vms_warm_states_create: (a, ctx) => vms.saveWarmState(a.id, a.name, ctx),
    vms_docs_get: (a) => vms.docsGet(a.id),
    vms_docs_set: (a, ctx) => vms.docsSet(a.id, a.content, a.append_entry ?? false, ctx),
    templates_create: (a, ctx) => templates.create(a, ctx),
    templates_get: (a) => templates.get(a.task_id),
  };
}
