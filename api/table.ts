/**
 * The handler table: every registry operation mapped to the domain code that
 * runs it. Domains not built yet answer 501. This file fails to compile when
 * an operation has no handler.
 */
import type { HandlerTable } from './handlers.js';
import { notImplementedDomain } from './handlers.js';
import { catalogEntries } from './catalog.js';
import type { FoldersService } from '../daemon/folders/service.js';
import { folderHandlers } from '../daemon/folders/handlers.js';
import type { SystemService } from '../daemon/system/service.js';
import { systemHandlers } from '../daemon/system/handlers.js';
import type { TaskRunner } from '../daemon/tasks/runner.js';
import { taskHandlers } from '../daemon/tasks/handlers.js';
import type { ActivityLog } from '../daemon/activity/log.js';
import { activityHandlers } from '../daemon/activity/handlers.js';
import type { PeerDirectory } from '../daemon/peers.js';
import { peerHandlers } from '../daemon/peers.js';
import { proxyLeaseHandlers, type ProxyLeaseDeps } from '../cluster/proxy-handlers.js';

export interface Services {
  folders: FoldersService;
  system: SystemService;
  tasks: TaskRunner;
  activity: ActivityLog;
  peers: PeerDirectory;
  /** The proxy-holder lease and replicated proxy configuration (GET /proxy/config, POST /proxy/move). */
  proxyLease?: ProxyLeaseDeps;
}

export function buildHandlerTable(s: Services): HandlerTable {
  const table: HandlerTable = {
    catalog_get: async () => ({ count: entries().length, endpoints: entries() }),
    ...notImplementedDomain('vms'),
    ...notImplementedDomain('templates'),
    ...notImplementedDomain('lxc'),
    ...notImplementedDomain('apps'),
    ...notImplementedDomain('locations'),
    ...notImplementedDomain('proxy'),
    ...(s.proxyLease ? proxyLeaseHandlers(s.proxyLease) : {}),
    ...notImplementedDomain('sandboxes'),
    ...folderHandlers(s.folders),
    ...systemHandlers(s.system),
    ...activityHandlers(s.activity),
    ...peerHandlers(s.peers),
    ...taskHandlers(s.tasks),
  };
  let cached: ReturnType<typeof catalogEntries> | undefined;
  const entries = () => (cached ??= catalogEntries(table));
  return table;
}
