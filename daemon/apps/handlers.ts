/**
 * The apps operations as dispatch handlers, typed from the registry: each is
 * one service call.
 */
import type { HandlersOf } from '../../api/registry/handlers.js';
import type { AppsService } from './service.js';

export type AppsOperation =
  | 'apps_list'
  | 'apps_create'
  | 'apps_templates_list'
  | 'apps_discovered_list'
  | 'apps_delete'
  | 'apps_actions'
  | 'apps_logs'
  | 'apps_stats'
  | 'apps_compose_update'
  | 'apps_folders_update'
  | 'apps_move'
  | 'apps_docs_get'
  | 'apps_docs_set';

export function appsHandlers(svc: AppsService): HandlersOf<AppsOperation> {
  return {
    apps_list: () => svc.list(),
    apps_create: (args, ctx) => svc.create(args, ctx),
    apps_templates_list: () => svc.templates(),
    apps_discovered_list: () => svc.discovered(),
    apps_delete: (args, ctx) => svc.delete(args, ctx),
    apps_actions: (args, ctx) => svc.action(args, ctx),
    apps_logs: (args) => svc.logs(args),
    apps_stats: (args) => svc.stats(args),
    apps_compose_update: (args, ctx) => svc.composeUpdate(args, ctx),
    apps_folders_update: (args, ctx) => svc.foldersUpdate(args, ctx),
    apps_move: (args, ctx) => svc.move(args, ctx),
    apps_docs_get: (args) => svc.docsGet(args),
    apps_docs_set: (args, ctx) => svc.docsSet(args, ctx),
  };
}
