/**
 * The operation registry: every operation declared once in the domain files,
 * completed here with what derives from it (full argument schema, hint flags,
 * path segments). Routing, validation, catalog, OpenAPI, MCP tools, the CLI
 * and the conformance tests all read `operations` from this module.
 */
import type { Operation, OperationSpec, JsonSchema, ValueOf } from './types.js';
import { PEER_ID } from './schema.js';
import { operations as catalogOps } from './catalog.js';
import { operations as vmsOps } from './vms.js';
import { operations as templatesOps } from './templates.js';
import { operations as tasksOps } from './tasks.js';
import { operations as systemOps } from './system.js';
import { operations as appsOps } from './apps.js';
import { operations as lxcOps } from './lxc.js';
import { operations as foldersOps } from './folders.js';
import { operations as locationsOps } from './locations.js';
import { operations as proxyOps } from './proxy.js';
import { operations as sandboxesOps } from './sandboxes.js';
import { operations as metricsOps } from './metrics.js';
import { operations as eventsOps } from './events.js';
import { operations as tokensOps } from './tokens.js';

const SPECS = [
  ...catalogOps,
  ...vmsOps,
  ...templatesOps,
  ...tasksOps,
  ...systemOps,
  ...appsOps,
  ...lxcOps,
  ...foldersOps,
  ...locationsOps,
  ...proxyOps,
  ...sandboxesOps,
  ...metricsOps,
  ...eventsOps,
  ...tokensOps,
] as const;

export type OperationName = (typeof SPECS)[number]['name'];

/** An operation with what derives from its spec (exported for the registry's own tests). */
export function complete(spec: OperationSpec): Operation {
  if (spec.result && spec.result.type !== 'object') {
    // MCP's outputSchema must be an object schema, and every answer is a JSON object.
    throw new Error(`registry: the result schema of ${spec.name} must have type 'object' at its root`);
  }
  const peerId = spec.peerId ?? 'forward';
  const properties: Record<string, JsonSchema> = { ...spec.params, ...spec.args };
  if (peerId === 'forward') properties.peer_id = PEER_ID;
  const required = [...Object.keys(spec.params), ...(spec.required ?? [])];
  const schema: JsonSchema = { type: 'object', properties, additionalProperties: false };
  if (required.length) schema.required = required;
  return {
    ...spec,
    scopes: [...spec.scopes],
    hints: [...spec.hints],
    required: spec.required ? [...spec.required] : [],
    peerId,
    readOnly: spec.hints.includes('RO'),
    destructive: spec.hints.includes('DEL'),
    idempotent: spec.hints.includes('IDEM'),
    schema,
    segments: spec.path.split('/').filter(Boolean),
    successStatus: spec.creates || (spec.method === 'POST' && spec.name.endsWith('_create')) ? 201 : 200,
    result: spec.result ?? null,
    mcp: spec.mcp ?? !spec.textResult,
    admin: spec.admin ?? false,
  };
}

export const operations: readonly Operation[] = (SPECS as readonly OperationSpec[]).map(complete);

export const operationsByName: ReadonlyMap<string, Operation> = new Map(operations.map((o) => [o.name, o]));

/** Every scope any operation names: the scopes a token may be given. */
export const ALL_SCOPES: ReadonlySet<string> = new Set(operations.flatMap((o) => o.scopes));

/** Path parameters whose value is a path inside a folder and may span several segments. */
export const isGreedyParam = (name: string): boolean => name.endsWith('sub_path');

export function getOperation(name: string): Operation | undefined {
  return operationsByName.get(name);
}

type SpecUnion = (typeof SPECS)[number];
/** Names of the operations of one domain, as a literal union. */
export type DomainOperationName<D extends SpecUnion['domain']> = Extract<SpecUnion, { domain: D }>['name'];

type SpecOf<N extends OperationName> = Extract<SpecUnion, { name: N }>;
type RequiredOf<S> = S extends { required: readonly (infer R)[] } ? R : never;
type Flat<T> = { [K in keyof T]: T[K] } & {};
type PeerArg<S> = S extends { peerId: 'none' } ? unknown : S extends { peerId: 'own' } ? unknown : { peer_id?: string };

/**
 * The arguments an operation's handler receives, derived from its registry
 * schemas: path parameters and required arguments present, the rest optional,
 * `peer_id` where the operation accepts it (dispatch removes it before a local
 * call). Validation guarantees the shape before any handler runs.
 */
export type ArgsOf<N extends OperationName> = Flat<
  { -readonly [K in keyof SpecOf<N>['params']]: ValueOf<SpecOf<N>['params'][K]> } & {
    -readonly [K in keyof SpecOf<N>['args'] as K extends RequiredOf<SpecOf<N>> ? K : never]: ValueOf<SpecOf<N>['args'][K]>;
  } & { -readonly [K in keyof SpecOf<N>['args'] as K extends RequiredOf<SpecOf<N>> ? never : K]?: ValueOf<SpecOf<N>['args'][K]> } & PeerArg<SpecOf<N>>
>;

/**
 * What an operation's handler answers, derived from its result schema;
 * `unknown` while the operation has none (so handlers of operations without
 * one are not constrained yet).
 */
export type ResultOf<N extends OperationName> = SpecOf<N> extends { result: infer S } ? ValueOf<S> : unknown;

/** The operation names of registry domains, typed: what a domain module declares it serves. */
export function opsOf<D extends SpecUnion['domain']>(...domains: D[]): Array<DomainOperationName<D>> {
  return operations.filter((o) => (domains as string[]).includes(o.domain)).map((o) => o.name) as Array<DomainOperationName<D>>;
}

export function operationsOfDomain(domain: string): Operation[] {
  return operations.filter((o) => o.domain === domain);
}
