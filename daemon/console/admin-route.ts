/**
 * `POST /admin/console/sign-in` on the admin socket (`hostctl console`): a
 * one-time sign-in link. Whoever can open the socket is the administrator;
 * the link hands that to one browser, once, within LINK_TTL_MS.
 */
import type { AdminApi } from '../admin.js';
import type { ConsoleSessions } from './sessions.js';

/** The console's base URL for a listen address (a wildcard address is reached on loopback). */
export function consoleBaseUrl(host: string, port: number, tls = false): string {
  const h = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return `${tls ? 'https' : 'http'}://${h.includes(':') ? `[${h}]` : h}:${port}`;
}

export function registerConsoleAdmin(admin: AdminApi, sessions: ConsoleSessions, baseUrl: () => string): void {
  admin.route('POST', /^\/admin\/console\/sign-in$/, async () => {
    const { secret, expiresAt } = sessions.createLink();
    // The secret rides in the fragment, which a browser never sends to a server nor in a Referer.
    const url = `${baseUrl()}/#sign-in=${secret}`;
    await admin.audit('Console sign-in link made (single use, 10 minutes)', 'console/sign-in');
    return [201, { url, expires_at: new Date(expiresAt).toISOString() }];
  });
}
