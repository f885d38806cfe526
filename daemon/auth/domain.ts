/**
 * The tokens domain: access tokens over the API (tokens_list, tokens_create,
 * tokens_revoke), for the local administrator only (dispatch refuses every
 * bearer token before a handler runs). The store is the daemon's; closing it
 * is the composition root's job.
 */
import { defineDomain } from '../domain.js';
import type { HandlersOf } from '../../api/registry/handlers.js';
import type { TokenStore } from './tokens.js';
import { isAdministrator } from '../lib/caller.js';

type TokenOps = 'tokens_whoami' | 'tokens_list' | 'tokens_create' | 'tokens_revoke';

export function tokenHandlers(tokens: TokenStore): HandlersOf<TokenOps> {
  return {
    tokens_whoami: async (_args, ctx) => ({ name: ctx.caller.tokenName, scopes: [...ctx.caller.scopes].sort(), administrator: isAdministrator(ctx.caller) }),
    tokens_list: async () => ({ tokens: tokens.list() }),
    tokens_create: async (args, ctx) => {
      const out = await tokens.create(args.name, args.scopes);
      // The secret is in the answer only: the row names the token and its scopes.
      ctx.note({ summary: `Token '${out.token.name}' created with scopes ${out.token.scopes.join(', ') || '(none)'}`, target: `tokens/${out.token.name}` });
      return out;
    },
    tokens_revoke: async (args, ctx) => {
      const revoked = await tokens.revoke(args.name);
      ctx.note({ summary: `Token '${revoked.name}' revoked`, target: `tokens/${revoked.name}` });
      return { revoked };
    },
  };
}

export const tokensDomain = (tokens: TokenStore) =>
  defineDomain({
    name: 'tokens',
    ops: ['tokens_whoami', 'tokens_list', 'tokens_create', 'tokens_revoke'] as const,
    async open() {
      return {
        handlers: tokenHandlers(tokens),
        info: async () => ({ name: 'tokens', built: true, runtimes: [] }),
        close: async () => {},
      };
    },
  });
