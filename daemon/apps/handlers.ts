/**
 * The apps operations as dispatch handlers, typed from the registry: each is
 * one call into the file that holds the operation.
 */
import type { HandlersOf } from '../../api/registry/handlers.js';
import type { DomainOperationName } from '../../api/registry/index.js';
import { appAction } from './actions.js';
import type { AppsContext } from './context.js';
import { getDocs, setDocs } from './docs.js';
import { installApp } from './install.js';
import { listApps, listDiscovered, listTemplates } from './list.js';
import { appLogs } from './logs.js';
import { moveApp } from './move.js';
import { appStats } from './stats.js';
import { uninstallApp } from './uninstall.js';
import { updateCompose, updateFolders } from './update.js';

export function appsHandlers(c: AppsContext): HandlersOf<DomainOperationName<'apps'>> {
  return {
    apps_list: () => listApps(c),
    apps_create: (args, ctx) => installApp(c, args, ctx),
    apps_templates_list: () => listTemplates(c),
    apps_discovered_list: () => listDiscovered(c),
    apps_delete: (args, ctx) => uninstallApp(c, args, ctx),
    apps_actions: (args, ctx) => appAction(c, args, ctx),
    apps_logs: (args) => appLogs(c, args),
    apps_stats: (args) => appStats(c, args),
    apps_compose_update: (args, ctx) => updateCompose(c, args, ctx),
    apps_folders_update: (args, ctx) => updateFolders(c, args, ctx),
    apps_move: (args, ctx) => moveApp(c, args, ctx),
    apps_docs_get: (args) => getDocs(c, args),
    apps_docs_set: (args, ctx) => setDocs(c, args, ctx),
  };
}
