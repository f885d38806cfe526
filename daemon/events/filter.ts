/**
 * Which events a reader gets: what its token may see (checked per event, at
 * delivery) and what it asked for (`types`, `resource`, `task_id`).
 */
import { badRequest, forbidden } from '../lib/errors.js';
import type { Caller } from '../lib/caller.js';
import type { EventAcl, StoredEvent } from './types.js';

/** The read scope of each registry domain whose events a token may see. */
export const READ_SCOPE: Readonly<Record<string, string>> = Object.freeze({
  vms: 'vm.read',
  templates: 'vm.read',
  tasks: 'vm.read',
  lxc: 'lxc.read',
  apps: 'apps.read',
  folders: 'files.read',
  locations: 'connections.read',
  proxy: 'proxy.read',
  sandboxes: 'sandbox.read',
  system: 'system.read',
});

/** Who may read an activity row, a membership change or a proxy holder move. */
export const SYSTEM_ACL: EventAcl = Object.freeze({ scopes: ['system.read'] }) as EventAcl;

/**
 * Who may read a task's events: `vm.read` (the spec puts tasks there) or the
 * read scope of the domain that started it (the kind's first word); a
 * sandbox's task only its owner.
 */
export function taskAcl(kind: string, owner: string): EventAcl {
  const domain = kind.split('.')[0];
  if (domain === 'sandboxes') return { scopes: ['sandbox.read'], owner };
  const own = READ_SCOPE[domain];
  return { scopes: own && own !== 'vm.read' ? ['vm.read', own] : ['vm.read'] };
}

/** Who may read a domain's state event; a sandbox's only its owner token. */
export function stateAcl(domain: string, owner?: string): EventAcl {
  const scope = READ_SCOPE[domain] ?? 'system.read';
  return owner !== undefined ? { scopes: [scope], owner } : { scopes: [scope] };
}

/** 403 unless the caller holds at least one read scope: a token that can read nothing opens no stream. */
export function requireSomeRead(caller: Caller): void {
  if (isLocalOperator(caller) || caller.scopes.some((s) => s.endsWith('.read'))) return;
  throw forbidden(`token '${caller.tokenName}' holds no read scope, and events are only delivered to a token that may read something`);
}

/** The local operator (the admin socket) sees everything; a call forwarded over the cluster never is that. */
const isLocalOperator = (caller: Caller) => caller.tokenId === 'admin' && caller.transport !== 'cluster';

export function visibleTo(acl: EventAcl, caller: Caller): boolean {
  if (isLocalOperator(caller)) return true;
  if (!acl.scopes.some((s) => caller.scopes.includes(s))) return false;
  if (acl.owner !== undefined && acl.owner !== caller.tokenId && acl.owner !== caller.tokenName) return false;
  return true;
}

export interface EventFilter {
  types?: string[];
  resource?: string;
  task_id?: string;
}

export const MAX_TYPES = 32;

/** The filter of a call's arguments (`types` as a comma list), or a 400. */
export function parseFilter(args: { types?: string; resource?: string; task_id?: string }): EventFilter {
  const f: EventFilter = {};
  if (args.types !== undefined) {
    const types = args.types
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    if (types.length > MAX_TYPES) throw badRequest(`argument 'types' names ${types.length} types; at most ${MAX_TYPES}`);
    for (const t of types)
      if (!/^[a-z][a-z0-9_-]*(\.[a-z0-9_-]*)*$/.test(t))
        throw badRequest(`argument 'types': '${t}' is not an event type or a family ending in '.' (e.g. 'vms.')`);
    if (types.length) f.types = types;
  }
  if (args.resource !== undefined && args.resource !== '') f.resource = args.resource.replace(/\/+$/, '');
  if (args.task_id !== undefined && args.task_id !== '') f.task_id = args.task_id;
  return f;
}

export function matches(f: EventFilter, e: Pick<StoredEvent, 'type' | 'resource' | 'data'>): boolean {
  if (f.types && !f.types.some((t) => (t.endsWith('.') ? e.type.startsWith(t) : e.type === t))) return false;
  if (f.resource !== undefined && e.resource !== f.resource && !e.resource.startsWith(f.resource + '/')) return false;
  if (f.task_id !== undefined && e.data.task_id !== f.task_id) return false;
  return true;
}
