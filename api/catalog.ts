/**
 * The live catalog (GET /api/v1/catalog) and the OpenAPI 3.1 document, both
 * derived from the registry alone (every operation of the registry is served).
 */
import { isGreedyParam, operations, type ResultOf } from './registry/index.js';
import type { JsonSchema, Operation } from './registry/types.js';
import { errorBody } from './registry/schema.js';

export const API_PREFIX = '/api/v1';

/** One endpoint of GET /catalog, as its result schema (api/registry/catalog.ts) describes it. */
export type CatalogEntry = ResultOf<'catalog_get'>['endpoints'][number];

export function catalogEntries(): CatalogEntry[] {
  return operations.map((o) => ({
    operation: o.name,
    domain: o.domain,
    method: o.method,
    path: API_PREFIX + o.path,
    summary: o.summary,
    scopes: [...o.scopes],
    hints: [...o.hints],
    read_only: o.readOnly,
    destructive: o.destructive,
    idempotent: o.idempotent,
    arguments: o.schema,
    result: o.result,
  }));
}

const ERROR_STATUSES: Record<string, string> = {
  '400': 'The body is not a JSON object, or an argument does not fit the schema.',
  '401': 'No token, or a token that does not match.',
  '403': 'The token lacks a scope the operation needs.',
  '404': 'No such endpoint, resource or peer.',
  '405': 'Wrong method for the path; the Allow header lists the valid ones.',
  '409': "The resource's state blocks the call.",
  '413': 'The request body is over 1 MiB.',
  '500': 'The call failed in a way that has no specific code.',
  '501': 'The operation is not implemented by this build yet.',
  '502': 'The call was routed to a paired server that failed to run it.',
  '503': 'A host dependency is unavailable.',
};

/**
 * The OpenAPI path key of an operation. OpenAPI forbids two templates that
 * differ only in parameter names (`/folders/{folder_id}/entries/{src_sub_path}`
 * for PATCH and `/folders/{folder_id}/entries/{sub_path}` for DELETE are one
 * URL shape), so operations of the same shape share one path item, whose
 * template takes, at each parameter position, the shortest of their names (the
 * most general one: `sub_path`). The server routes by shape, so the URL a
 * client sends is the same either way; an operation whose argument has another
 * name declares the parameter under the path's name with `x-argument` naming
 * the argument it fills (docs/api-decisions.md).
 */
export function openApiPaths(ops: readonly Operation[] = operations): Map<Operation, { key: string; names: Record<string, string> }> {
  const shape = (op: Operation) => op.segments.map((s) => (s.startsWith('{') ? '{}' : s)).join('/');
  const byShape = new Map<string, Operation[]>();
  for (const op of ops) byShape.set(shape(op), [...(byShape.get(shape(op)) ?? []), op]);
  const out = new Map<Operation, { key: string; names: Record<string, string> }>();
  for (const group of byShape.values()) {
    const segs = group[0].segments.map((s, i) => {
      if (!s.startsWith('{')) return s;
      const names = group.map((o) => o.segments[i]);
      return names.reduce((a, b) => (b.length < a.length || (b.length === a.length && b < a) ? b : a));
    });
    const key = API_PREFIX + '/' + segs.join('/');
    for (const op of group) {
      const names: Record<string, string> = {};
      op.segments.forEach((s, i) => {
        if (s.startsWith('{')) names[s.slice(1, -1)] = segs[i].slice(1, -1);
      });
      out.set(op, { key, names });
    }
  }
  return out;
}

const MULTI_SEGMENT_NOTE =
  'A path inside the folder, possibly of several segments. Percent-encode it as one path segment (`/` as `%2F`, as OpenAPI clients do); the server also takes it unencoded across segments (`a/b.txt`). Either way it is decoded once and confined to the folder.';

function parametersFor(op: Operation, names: Record<string, string>): unknown[] {
  const out: unknown[] = [];
  for (const [name, schema] of Object.entries(op.params)) {
    const shown = names[name] ?? name;
    const notes = [typeof schema.description === 'string' ? schema.description + '.' : '', isGreedyParam(name) ? MULTI_SEGMENT_NOTE : ''];
    if (shown !== name) notes.push(`This fills the argument \`${name}\` (the path is shared with other operations under the name \`${shown}\`).`);
    const prm: Record<string, unknown> = { name: shown, in: 'path', required: true, description: notes.filter(Boolean).join(' '), schema };
    if (shown !== name) prm['x-argument'] = name;
    out.push(prm);
  }
  if (op.method === 'GET' || op.method === 'DELETE') {
    const props = (op.schema.properties ?? {}) as Record<string, JsonSchema>;
    const required = new Set(op.required ?? []);
    for (const [name, schema] of Object.entries(props)) {
      if (name in op.params) continue;
      const t = schema.type;
      const structured = t === 'object' || t === 'array' || (Array.isArray(t) && (t.includes('object') || t.includes('array'))) || 'anyOf' in schema;
      // Object- and array-valued arguments travel in the query string as JSON text.
      out.push(
        structured
          ? {
              name,
              in: 'query',
              required: required.has(name),
              description: `${schema.description ?? ''} Sent as JSON text.`.trim(),
              content: { 'application/json': { schema } },
            }
          : { name, in: 'query', required: required.has(name), schema },
      );
    }
  }
  return out;
}

function bodySchema(op: Operation): JsonSchema {
  const props = { ...((op.schema.properties ?? {}) as Record<string, JsonSchema>) };
  for (const p of Object.keys(op.params)) delete props[p];
  const s: JsonSchema = { type: 'object', properties: props, additionalProperties: false };
  if (op.required?.length) s.required = op.required;
  return s;
}

export function openApiDocument(version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const keys = openApiPaths();
  for (const op of operations) {
    const { key, names } = keys.get(op)!;
    const item = (paths[key] ??= {});
    const responses: Record<string, unknown> = {
      [String(op.successStatus)]: {
        description: 'Success.',
        // The registry's result schema; until an operation has one, an open object (generated
        // clients type it as such rather than as an empty one).
        content: op.textResult
          ? // A text answer (the metrics exposition): its media types, the body a string.
            Object.fromEntries(op.textResult.map((t) => [t.split(';')[0], { schema: { type: 'string' } }]))
          : { 'application/json': { schema: op.result ?? { type: 'object', additionalProperties: true } } },
      },
    };
    for (const [code, description] of Object.entries(ERROR_STATUSES)) {
      responses[code] = { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    }
    const entry: Record<string, unknown> = {
      operationId: op.name,
      summary: op.summary,
      tags: [op.domain],
      parameters: parametersFor(op, names),
      responses,
      'x-scopes': op.scopes,
      'x-hints': op.hints,
    };
    if (op.method !== 'GET' && op.method !== 'DELETE') {
      entry.requestBody = { required: (op.required?.length ?? 0) > 0, content: { 'application/json': { schema: bodySchema(op) } } };
    }
    item[op.method.toLowerCase()] = entry;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'hostd host management API',
      version,
      description:
        'Every operation of the host API. Arguments of GET and DELETE go in the query string; object-valued ones (such as `target` and `labels`) as JSON text. Any operation with `peer_id` runs on that paired server. Path parameters that hold a path inside a folder (`sub_path`, `src_sub_path`) are sent percent-encoded as one segment (`%2F` for `/`). Operations that share a URL shape share one path item; a parameter named differently from the argument it fills says so in `x-argument`.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: '/' }],
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: {
        Error: errorBody(),
      },
    },
    paths,
  };
}
