import type { OperationSpec } from './types.js';
import { anyObject, arrayOf, bool, int, nullable, object, oneOf, str } from './schema.js';

/** One operation as GET /catalog lists it (api/catalog.ts builds it from the registry). */
const catalogEntry = () =>
  object(
    {
      operation: str('Operation name, also the MCP tool name'),
      domain: str('Registry domain'),
      method: oneOf(['GET', 'POST', 'PATCH', 'PUT', 'DELETE'] as const),
      path: str('Full path, with {param} placeholders'),
      summary: str(),
      scopes: arrayOf(str(), 'Scopes a token needs, every one of them'),
      hints: arrayOf(oneOf(['RO', 'DEL', 'IDEM'] as const)),
      read_only: bool(),
      destructive: bool(),
      idempotent: bool(),
      arguments: anyObject('JSON Schema of the arguments (path parameters, body or query, peer_id)'),
      result: nullable(anyObject('JSON Schema of the success answer; null while the operation has none')),
    },
    ['operation', 'domain', 'method', 'path', 'summary', 'scopes', 'hints', 'read_only', 'destructive', 'idempotent', 'arguments', 'result'],
    { title: 'CatalogEntry' },
  );

export const operations = [
  {
    name: 'catalog_get',
    domain: 'catalog',
    method: 'GET',
    path: '/catalog',
    scopes: [],
    hints: ['RO'],
    summary: 'Return the live catalog of what the running server can do (endpoints, methods, paths, summaries, scopes, argument schemas).',
    category: 'system',
    params: {},
    args: {},
    result: object(
      {
        count: int('Number of endpoints', 0),
        endpoints: arrayOf(catalogEntry()),
      },
      ['count', 'endpoints'],
    ),
  },
] as const satisfies readonly OperationSpec[];
