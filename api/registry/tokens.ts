/**
 * Access tokens over the API (an extension, docs/api-decisions.md "Console
 * and token operations"): what `hostctl token` does over the admin socket,
 * for the console's administrator session. Only the local administrator may
 * call them (`admin: true`): a bearer token, whatever its scopes, is refused
 * with 403, so that no token can mint or revoke tokens (tokens_whoami, a
 * caller's own name and scopes, is for every caller). They take no peer_id
 * (a member's tokens are managed on that member) and are no MCP tools (an
 * MCP client always holds a bearer token).
 */
import type { OperationSpec } from './types.js';
import { str, bool, object, arrayOf, dateTime, nullable } from './schema.js';

const TOKEN_NAME = str("Token name: 1-64 letters, digits, '_', '.', '-', starting with a letter or digit", { pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$' });

export const tokenInfo = () =>
  object(
    {
      id: str('Token id (tok_...)'),
      name: str('Token name (the actor of its calls)'),
      scopes: arrayOf(str(), 'Scopes the token holds'),
      created_at: dateTime(),
      last_used_at: nullable(dateTime('Last call made with it (stored within seconds); null if never used')),
    },
    ['id', 'name', 'scopes', 'created_at', 'last_used_at'],
    { title: 'Token' },
  );

export const operations = [
  {
    name: 'tokens_whoami',
    domain: 'tokens',
    method: 'GET',
    path: '/whoami',
    scopes: [],
    hints: ['RO'],
    summary: "Who is calling: the token's name and scopes (the console shows only what they allow).",
    category: 'auth',
    params: {},
    args: {},
    result: object(
      {
        name: str("The token's name, or admin for the local administrator"),
        scopes: arrayOf(str(), 'Scopes the caller holds'),
        administrator: bool('Whether the caller is the local administrator (may manage tokens)'),
      },
      ['name', 'scopes', 'administrator'],
    ),
  },
  {
    name: 'tokens_list',
    domain: 'tokens',
    method: 'GET',
    path: '/tokens',
    scopes: [],
    admin: true,
    hints: ['RO'],
    summary: 'List access tokens (never a secret).',
    category: 'auth',
    params: {},
    args: {},
    peerId: 'none',
    mcp: false,
    result: object({ tokens: arrayOf(tokenInfo()) }, ['tokens']),
  },
  {
    name: 'tokens_create',
    domain: 'tokens',
    method: 'POST',
    path: '/tokens',
    scopes: [],
    admin: true,
    hints: [],
    summary: 'Create an access token; its secret is answered once.',
    category: 'auth',
    params: {},
    args: {
      name: TOKEN_NAME,
      scopes: arrayOf(str('A scope name, e.g. vm.read', { maxLength: 64 }), 'Scopes the token holds (each a scope of GET /catalog)', {
        maxItems: 64,
        uniqueItems: true,
      }),
    },
    required: ['name', 'scopes'],
    peerId: 'none',
    mcp: false,
    result: object({ token: tokenInfo(), secret: str('The secret (hostd_...): shown this once, stored only as a hash') }, ['token', 'secret']),
  },
  {
    name: 'tokens_revoke',
    domain: 'tokens',
    method: 'DELETE',
    path: '/tokens/{name}',
    scopes: [],
    admin: true,
    hints: ['DEL'],
    summary: 'Revoke an access token (by name or id); its secret stops working at once.',
    category: 'auth',
    params: { name: str('Token name or id', { maxLength: 128 }) },
    args: {},
    peerId: 'none',
    mcp: false,
    result: object({ revoked: tokenInfo() }, ['revoked']),
  },
] as const satisfies readonly OperationSpec[];
