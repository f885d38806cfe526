/**
 * When a request may use the console's session cookie. The cookie is
 * SameSite=Strict, and on top of that it is accepted only on a request that
 * a page from elsewhere cannot make:
 * - it carries `X-Hostd-Console: 1` (a cross-site form or image cannot set a
 *   header, and a cross-site fetch that sets one needs a preflight, which
 *   hostd never answers with credentials: CORS never applies to the cookie);
 * - its `Sec-Fetch-Site`, when the browser sends one, is `same-origin`;
 * - its `Origin`, when present, is the origin the request was sent to.
 * A request failing one of these is refused (403) even when the cookie is
 * valid, so that a forged request never runs as the administrator.
 */
import type { IncomingMessage } from 'node:http';
import { header } from '../../api/http/headers.js';

export const SESSION_COOKIE = 'hostd_console';
export const CONSOLE_HEADER = 'x-hostd-console';

/** The session cookie's value, if the request carries one. */
export function sessionCookie(req: IncomingMessage): string | undefined {
  const raw = header(req, 'cookie');
  if (!raw) return undefined;
  for (const part of raw.split(';')) {
    const eq = part.indexOf('=');
    if (eq !== -1 && part.slice(0, eq).trim() === SESSION_COOKIE) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The origin the request was sent to, as a browser writes it in `Origin`. */
export function ownOrigin(req: IncomingMessage): string | undefined {
  const host = header(req, 'host');
  if (!host) return undefined;
  const tls = (req.socket as { encrypted?: boolean }).encrypted === true;
  return `${tls ? 'https' : 'http'}://${host.toLowerCase()}`;
}

/** Why a request may not use the cookie, or undefined when it may. */
export function crossSiteProblem(req: IncomingMessage): string | undefined {
  if (header(req, CONSOLE_HEADER) !== '1') return `the console session is accepted only with the header X-Hostd-Console: 1, which the console's own page sends`;
  const site = header(req, 'sec-fetch-site');
  if (site !== undefined && site !== 'same-origin') return `the console session is not accepted on a ${site} request`;
  const origin = header(req, 'origin');
  if (origin !== undefined && origin.toLowerCase() !== ownOrigin(req))
    return `the console session is not accepted from origin ${JSON.stringify(origin.slice(0, 200))}`;
  return undefined;
}
