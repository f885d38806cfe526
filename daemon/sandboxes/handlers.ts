/**
 * The /sandboxes operations as dispatch handlers: arguments arrive
 * schema-validated and typed from the registry; the service does the rest
 * (ownership comes from the caller's token id).
 */
import type { HandlersOf } from '../../api/registry/handlers.js';
import type { SandboxService } from './service.js';

export type SandboxOperation =
  | 'sandboxes_list'
  | 'sandboxes_create'
  | 'sandboxes_images_list'
  | 'sandboxes_get'
  | 'sandboxes_suspend'
  | 'sandboxes_resume'
  | 'sandboxes_delete'
  | 'sandboxes_wait'
  | 'sandboxes_exec'
  | 'sandboxes_files_get'
  | 'sandboxes_files_put'
  | 'sandboxes_files_delete'
  | 'sandboxes_fork';

export function sandboxHandlers(svc: SandboxService): HandlersOf<SandboxOperation> {
  return {
    sandboxes_list: (a, ctx) => svc.list(a, ctx),
    sandboxes_create: (a, ctx) => {
      const { peer_id: _p, ...input } = a;
      void _p;
      return svc.create(input, ctx);
    },
    sandboxes_images_list: () => svc.images(),
    sandboxes_get: (a, ctx) => svc.get(a.id, ctx),
    sandboxes_suspend: (a, ctx) => svc.suspend(a.id, ctx),
    sandboxes_resume: (a, ctx) => svc.resume(a.id, ctx),
    sandboxes_delete: (a, ctx) => svc.destroy(a.id, ctx),
    sandboxes_wait: (a, ctx) => svc.wait(a.id, a.timeout_seconds, ctx),
    sandboxes_exec: ({ id, peer_id: _p, ...a }, ctx) => svc.execIn(id, a, ctx),
    sandboxes_files_get: ({ id, peer_id: _p, ...a }, ctx) => svc.fileGet(id, a, ctx),
    sandboxes_files_put: ({ id, peer_id: _p, ...a }, ctx) => svc.filePut(id, a, ctx),
    sandboxes_files_delete: ({ id, peer_id: _p, ...a }, ctx) => svc.fileDelete(id, a, ctx),
    sandboxes_fork: ({ id, peer_id: _p, ...a }, ctx) => svc.fork(id, a, ctx),
  };
}
