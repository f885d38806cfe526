/**
 * The domain list: every domain module of this build, once. The composition
 * root opens them in this order and builds the handler table from what they
 * serve. Adding a domain means: its registry file (api/registry/), its folder
 * (daemon/<name>/), and one line here.
 */
import type { OperationName } from '../api/registry/index.js';
import type { HandlerTable } from '../api/handlers.js';
import { catalogEntries } from '../api/catalog.js';
import { PortRegistry, type AdminCommand, type DomainDef, type DomainDeps, type DomainInfo, type DomainModule } from './domain.js';
import type { Handler } from './lib/caller.js';
import type { ActivityLog } from './activity/log.js';
import type { TaskRunner } from './tasks/runner.js';
import type { EventService } from './events/service.js';
import { eventsDomain } from './events/index.js';
import { foldersDomain } from './folders/index.js';
import { systemDomain } from './system/index.js';
import { tasksDomain } from './tasks/index.js';
import { activityDomain } from './activity/index.js';
import { peersDomain } from './peers/index.js';
import { proxyDomain } from './proxy/index.js';
import { locationsDomain } from './locations/index.js';
import { appsDomain } from './apps/index.js';
import { lxcDomain } from './lxc/index.js';
import { vmsDomain } from './vms/index.js';
import { sandboxesDomain } from './sandboxes/index.js';
import { metricsDomain } from './metrics/index.js';
import type { MetricsService } from './metrics/service.js';
import type { TokenStore } from './auth/tokens.js';
import { tokensDomain } from './auth/domain.js';

/** The daemon's own services that two domains read (the runner and the log dispatch writes). */
export interface Spine {
  tasks: TaskRunner;
  activity: ActivityLog;
  /** Counts requests and tasks from the start; the metrics domain exposes it. */
  metrics: MetricsService;
  version: string;
  events: EventService;
  tokens: TokenStore;
}

export function domainList(spine: Spine) {
  // The sandboxes domain runs its VMs through this instance's VM service.
  const vms = vmsDomain();
  return [
    foldersDomain,
    systemDomain,
    tasksDomain(spine.tasks),
    activityDomain(spine.activity),
    eventsDomain(spine.events),
    peersDomain,
    proxyDomain,
    vms,
    sandboxesDomain(vms),
    locationsDomain,
    appsDomain,
    lxcDomain,
    metricsDomain(spine.metrics, spine.version),
    tokensDomain(spine.tokens),
  ] as const;
}

type OpsOf<D> = D extends DomainDef<infer O> ? O : never;
type Served = OpsOf<ReturnType<typeof domainList>[number]>;
/** Fails to compile, naming them, when an operation is served by no domain. */
type Unserved = Exclude<OperationName, Served | 'catalog_get'>;
const everyOperationServed: [Unserved] extends [never] ? true : { unserved: Unserved } = true;
void everyOperationServed;

export interface OpenDomains {
  handlers: HandlerTable;
  /** Operator commands of every domain, by `METHOD /admin/...`. */
  admin: Record<string, AdminCommand>;
  /** What each domain says about itself (GET /catalog, hostctl ops, host-status). */
  info(): Promise<DomainInfo[]>;
  /** Closes the domains in reverse order. */
  close(): Promise<void>;
}

/**
 * Opens every domain with `deps` (its own settings section added), registers
 * the ports they provide, and builds the handler table. An operation served
 * twice is a start-up error.
 */
export async function openDomains(
  list: ReturnType<typeof domainList>,
  deps: Omit<DomainDeps, 'settings' | 'ports' | 'domainInfo'>,
  sections: Record<string, unknown>,
): Promise<OpenDomains> {
  const ports = new PortRegistry();
  const opened: Array<{ def: DomainDef<OperationName>; mod: DomainModule<OperationName> }> = [];
  const table: Record<string, Handler<any>> = {};
  const admin: Record<string, AdminCommand> = {};
  const info = async () => Promise.all(opened.map((o) => o.mod.info()));
  try {
    for (const def of list as readonly DomainDef<OperationName>[]) {
      const mod = await def.open({ ...deps, ports, settings: sections[def.name], domainInfo: () => info() });
      opened.push({ def, mod });
      if (mod.provides) ports.provide(mod.provides);
      for (const [route, cmd] of Object.entries(mod.admin ?? {})) {
        if (admin[route]) throw new Error(`admin command ${route} is served by two domains (the second is ${def.name})`);
        admin[route] = cmd;
      }
      for (const op of def.ops) {
        if (table[op]) throw new Error(`operation ${op} is served by two domains (the second is ${def.name})`);
        const h = (mod.handlers as Record<string, Handler<any>>)[op];
        if (!h) throw new Error(`domain ${def.name} declares ${op} but has no handler for it`);
        table[op] = h;
      }
    }
  } catch (err) {
    for (const o of opened.reverse()) await o.mod.close().catch(() => undefined);
    throw err;
  }
  let cached: ReturnType<typeof catalogEntries> | undefined;
  const entries = () => (cached ??= catalogEntries());
  table.catalog_get = async () => ({ count: entries().length, endpoints: entries() });
  const handlers = table as unknown as HandlerTable;
  return {
    handlers,
    admin,
    info,
    close: async () => {
      for (const o of [...opened].reverse()) await o.mod.close().catch((err) => deps.log.error({ err, domain: o.def.name }, 'domain close failed'));
    },
  };
}
