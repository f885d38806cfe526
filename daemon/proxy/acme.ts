/**
 * Public certificates: GET /proxy/providers (which ACME DNS providers this
 * node's Caddy has), PUT /proxy/acme/credentials (a provider's credentials,
 * into the secret store) and PUT /proxy/acme/config (the ACME account and
 * directory, in the replicated configuration).
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { CallContext } from '../lib/caller.js';
import { badRequest } from '../lib/errors.js';
import type { ConfigChanges } from './change.js';
import type { ProxyContext } from './context.js';
import type { DataPlane } from './dataplane.js';
import { parseHostPort } from './host-port.js';
import { hasBrace } from './policy/placeholders.js';
import { credentialKeysWithBraces } from './policy/rules.js';
import { PROVIDER_NAME, type Providers } from './providers.js';

export class AcmeOps {
  constructor(
    private readonly ctx: ProxyContext,
    private readonly changes: ConfigChanges,
    private readonly providers: Providers,
    private readonly plane: DataPlane,
  ) {}

  async providersList(): Promise<ResultOf<'proxy_providers_list'>> {
    const caddy = (await this.ctx.drivers.caddy.availability()).find((a) => a.name === 'caddy')!;
    const stored = await this.providers.stored();
    const names = await this.providers.names();
    return {
      caddy_version: caddy.version,
      internal: { available: caddy.available, reason: caddy.reason },
      providers: await Promise.all(names.map(async (n) => ({ ...(await this.providers.status(n)), credentials_stored: stored.has(n) }))),
    };
  }

  async setCredentials(args: ArgsOf<'proxy_acme_credentials_set'>, call: CallContext): Promise<ResultOf<'proxy_acme_credentials_set'>> {
    if (!PROVIDER_NAME.test(args.provider)) throw badRequest(`provider '${args.provider}' must be 1-64 of [a-z0-9_]`);
    const keys = Object.keys(args.credentials);
    if (keys.length === 0) throw badRequest('credentials must have at least one key');
    for (const k of keys) if (!PROVIDER_NAME.test(k)) throw badRequest(`credentials: key '${k}' must be 1-64 of [a-z0-9_] (the provider module's field name)`);
    if (keys.includes('name')) throw badRequest("credentials: 'name' is reserved (it names the provider)");
    // DNS provider modules expand placeholders in their fields; the value is a secret, so only its key is named.
    const braces = credentialKeysWithBraces(args.credentials);
    if (braces.length)
      throw badRequest(`credentials: the value of ${braces.join(', ')} contains { or }, which Caddy's provider module would expand as a placeholder`);
    await this.providers.store(args.provider, args.credentials);
    void this.plane.kick();
    call.note({
      summary: `ACME credentials stored for ${args.provider}`,
      target: `proxy/acme/credentials/${args.provider}`,
      metadata: { provider: args.provider, keys },
    });
    return { provider: args.provider, keys: keys.sort(), stored: true, available: (await this.providers.status(args.provider)).available };
  }

  async setConfig(args: ArgsOf<'proxy_acme_config_set'>, call: CallContext): Promise<ResultOf<'proxy_acme_config_set'>> {
    if (args.email !== '' && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(args.email)) throw badRequest(`email '${args.email}' is not an email address`);
    // Caddy expands placeholders in the ACME issuer's email and directory URL.
    if (hasBrace(args.email)) throw badRequest(`email '${args.email}' must not contain { or }: Caddy would expand it as a placeholder`);
    if (hasBrace(args.dir_url ?? ''))
      throw badRequest(
        `dir_url '${args.dir_url}' must not contain { or }: Caddy would expand it as a placeholder (percent-encode a literal brace as %7B, %7D)`,
      );
    const dir = args.dir_url ?? '';
    if (dir !== '') {
      let u: URL;
      try {
        u = new URL(dir);
      } catch {
        throw badRequest(`dir_url '${dir}' is not a URL`);
      }
      if (u.protocol !== 'https:') throw badRequest(`dir_url '${dir}' must be an https URL`);
    }
    const resolvers = args.dns_resolvers ?? null;
    for (const r of resolvers ?? []) if (!parseHostPort(r)) throw badRequest(`dns_resolvers: '${r}' is not an IP address (optionally with :port)`);
    const r = await this.changes.run(
      (c) => ({ ...c, acme: { email: args.email, dir_url: dir, dns_resolvers: resolvers } }),
      (c) => ({ acme: c.acme }),
    );
    call.note({
      summary: `ACME account ${args.email || '(no email)'} at ${dir || 'the public production directory'}`,
      target: 'proxy/acme/config',
      metadata: { email: args.email, dir_url: dir },
    });
    return r;
  }
}
