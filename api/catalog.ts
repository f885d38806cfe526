/**
 * The live catalog (GET /api/v1/catalog) and the OpenAPI 3.1 document, both
 * derived from the registry and the handler table.
 */
import { operations } from './registry/index.js';
import type { JsonSchema, Operation } from './registry/types.js';
import type { HandlerTable } from './handlers.js';
import { isBuilt } from '../daemon/lib/caller.js';

export const API_PREFIX = '/api/v1';

export interface CatalogEntry {
  operation: string;
  domain: string;
  method: string;
  path: string;
  summary: string;
  scopes: string[];
  hints: string[];
  read_only: boolean;
  destructive: boolean;
  idempotent: boolean;
  implemented: boolean;
  arguments: JsonSchema;
}

export function catalogEntries(table: HandlerTable): CatalogEntry[] {
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
    implemented: isBuilt(table[o.name as keyof HandlerTable]),
    arguments: o.schema,
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

function parametersFor(op: Operation): unknown[] {
  const out: unknown[] = [];
  for (const [name, schema] of Object.entries(op.params)) {
    out.push({ name, in: 'path', required: true, schema });
  }
  if (op.method === 'GET' || op.method === 'DELETE') {
    const props = (op.schema.properties ?? {}) as Record<string, JsonSchema>;
    const required = new Set(op.required ?? []);
    for (const [name, schema] of Object.entries(props)) {
      if (name in op.params) continue;
      const t = schema.type;
      const structured = t === 'object' || t === 'array' || (Array.isArray(t) && (t.includes('object') || t.includes('array'))) || 'anyOf' in schema;
      // Object- and array-valued arguments travel in the query string as JSON text.
      out.push(structured
        ? { name, in: 'query', required: required.has(name), description: `${schema.description ?? ''} Sent as JSON text.`.trim(), content: { 'application/json': { schema } } }
        : { name, in: 'query', required: required.has(name), schema });
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

export function openApiDocument(table: HandlerTable, version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of operations) {
    const item = (paths[API_PREFIX + op.path] ??= {});
    const responses: Record<string, unknown> = {
      [String(op.successStatus)]: {
        description: 'Success.',
        content: { 'application/json': { schema: { type: 'object' } } },
      },
    };
    for (const [code, description] of Object.entries(ERROR_STATUSES)) {
      responses[code] = { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    }
    const entry: Record<string, unknown> = {
      operationId: op.name,
      summary: op.summary,
      tags: [op.domain],
      parameters: parametersFor(op),
      responses,
      'x-scopes': op.scopes,
      'x-hints': op.hints,
      'x-implemented': isBuilt(table[op.name as keyof HandlerTable]),
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
      description: 'Every operation of the host API. Arguments of GET and DELETE go in the query string; object-valued ones (such as `target` and `labels`) as JSON text. Any operation with `peer_id` runs on that paired server.',
    },
    servers: [{ url: '/' }],
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: {
        Error: { type: 'object', properties: { error: { type: 'string' } }, required: ['error'], additionalProperties: false },
      },
    },
    paths,
  };
}
