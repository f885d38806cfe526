/**
 * Discovery: the SMB hosts on the local network (without `host`), or one
 * host's shares (with it). Reads only: the credentials of a share listing
 * are used for that one probe and stored nowhere.
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import { ensureAvailable } from '../lib/availability.js';
import { badRequest } from '../lib/errors.js';
import { parseCredentials, userText } from './addresses.js';
import type { LocationsContext } from './context.js';
import { SMB_CLIENT } from './driver.js';

export async function discover(c: LocationsContext, args: ArgsOf<'locations_discover'>): Promise<ResultOf<'locations_discover'>> {
  const creds = parseCredentials(args.username, args.password);
  // '' is the same as omitted (the registry's schema allows it for both).
  const ip = args.ip || undefined;
  if (!args.host) {
    if (ip) throw badRequest(`argument 'ip' needs 'host' (the host whose shares to list)`);
    if (creds) throw badRequest(`arguments 'username' and 'password' need 'host' (host discovery sends no credentials)`);
    const timeoutMs = c.settings.discoveryTimeoutMs;
    const started = Date.now();
    const found = await c.driver.discover(timeoutMs);
    return { hosts: found.hosts, methods: found.methods, timeout_ms: timeoutMs, duration_ms: Date.now() - started };
  }
  await ensureAvailable(c.driver, [SMB_CLIENT]);
  const shares = await c.driver.shares(args.host, creds, { ip });
  return { host: args.host, ip: ip ?? null, username: userText(creds), shares };
}
