/**
 * The console over HTTP: its static files at `/` (built into dist/console at
 * `npm ci`), the exchange of a sign-in link for a session cookie, sign-out,
 * and the caller a request's session cookie stands for. The console has no
 * private API: everything it shows or does is a call to /api/v1 through
 * dispatch, as the administrator (session) or as a pasted token.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Express } from 'express';
import type { Logger } from 'pino';
import { ApiError, badRequest, errorBody, forbidden, unauthorized } from '../lib/errors.js';
import { ADMIN_TOKEN_ID, type Caller } from '../lib/caller.js';
import { OPERATOR } from '../lib/operator.js';
import { readBody } from '../../api/http/body.js';
import { sendJson } from '../../api/http/server.js';
import type { ConsoleSessions } from './sessions.js';
import { SESSION_COOKIE, crossSiteProblem, sessionCookie } from './guard.js';

/** Where `npm run build` puts the bundled console (dist/console, beside dist/daemon). */
export const CONSOLE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../console');

/**
 * Scripts and styles only from this origin (no inline script, no eval),
 * connections only to it, never framed, forms post only here.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE_HEADERS: Record<string, string> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.png': 'image/png',
};

export interface ConsoleDeps {
  sessions: ConsoleSessions;
  /** This node's id (the origin of the administrator's calls). */
  nodeId: () => string;
  /** Every scope: what the administrator holds. */
  scopes: readonly string[];
  /** Records sign-in and sign-out (the activity log's one writer is dispatch). */
  audit: (summary: string, severity: 'info' | 'warning') => Promise<void>;
  log: Logger;
  /** The built files (tests may point elsewhere). */
  dir?: string;
}

interface StaticFile {
  body: Buffer;
  type: string;
}

export class ConsoleRoutes {
  private readonly files = new Map<string, StaticFile>();

  constructor(private readonly deps: ConsoleDeps) {
    const dir = deps.dir ?? CONSOLE_DIR;
    // Read once: the bundle is small, and a file changed under a running daemon is not half-served.
    for (const name of safeList(dir)) {
      const type = TYPES[path.extname(name)];
      if (type) this.files.set(name, { body: fs.readFileSync(path.join(dir, name)), type });
    }
  }

  /**
   * The caller a request's session cookie stands for: undefined without a
   * cookie, an error for a cross-site request or a session that is over.
   */
  sessionCaller(req: IncomingMessage): Caller | ApiError | undefined {
    const secret = sessionCookie(req);
    if (secret === undefined) return undefined;
    const problem = crossSiteProblem(req);
    if (problem) return forbidden(problem);
    const state = this.deps.sessions.check(secret);
    if (typeof state !== 'number')
      return unauthorized(
        state === 'expired'
          ? 'the console session has expired; sign in again (hostctl console)'
          : 'no such console session (signed out, or the daemon restarted); sign in again (hostctl console)',
      );
    return { tokenId: ADMIN_TOKEN_ID, tokenName: OPERATOR, scopes: [...this.deps.scopes], transport: 'api', origin: this.deps.nodeId(), client: 'console' };
  }

  mount(app: Express): void {
    app.get('/', (req, res) => this.serveFile(req, res, 'index.html'));
    app.get('/console/assets/:file', (req, res) => this.serveFile(req, res, String(req.params.file)));
    app.post('/console/session', (req, res) => void this.signIn(req, res));
    app.get('/console/session', (req, res) => this.whoAmI(req, res));
    app.delete('/console/session', (req, res) => void this.signOut(req, res));
  }

  private serveFile(_req: IncomingMessage, res: ServerResponse, name: string): void {
    const f = this.files.get(name);
    if (!f) {
      const msg = this.files.size ? `no console file '${name.slice(0, 100)}'` : 'the console is not built in this installation (run npm run build)';
      sendJson(res, this.files.size ? 404 : 503, { error: msg }, PAGE_HEADERS);
      return;
    }
    res.writeHead(200, {
      ...PAGE_HEADERS,
      'content-type': f.type,
      'content-length': String(f.body.length),
      // The page is small and must never outlive a new version; the assets are revalidated.
      'cache-control': name === 'index.html' ? 'no-store' : 'no-cache',
    });
    res.end(f.body);
  }

  /** Exchanges a one-time sign-in link's secret (the URL's fragment, posted by the page) for a session cookie. */
  private async signIn(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const problem = crossSiteProblem(req);
      if (problem) throw forbidden(problem.replace('the console session is', 'a sign-in is'));
      let body: unknown;
      try {
        body = JSON.parse((await readBody(req, 4096)).toString('utf8') || '{}');
      } catch {
        throw badRequest('request body is not valid JSON');
      }
      const link = (body as { link?: unknown } | null)?.link;
      if (typeof link !== 'string' || !link.length || link.length > 256) throw badRequest("argument 'link' must be the sign-in link's secret (string)");
      const out = this.deps.sessions.redeem(link);
      if (typeof out === 'string') {
        this.deps.log.warn({ reason: out }, 'console sign-in refused');
        throw unauthorized(
          out === 'expired'
            ? 'this sign-in link has expired (links last 10 minutes); run hostctl console for a new one'
            : 'this sign-in link was already used or was never made; run hostctl console for a new one',
        );
      }
      await this.deps.audit('Console sign-in with a one-time link', 'info');
      const maxAge = Math.max(0, Math.floor((out.expiresAt - Date.now()) / 1000));
      sendJson(
        res,
        200,
        { signed_in: true, kind: 'admin', expires_at: new Date(out.expiresAt).toISOString() },
        {
          ...PAGE_HEADERS,
          'cache-control': 'no-store',
          'set-cookie': cookie(req, out.secret, maxAge),
        },
      );
    } catch (err) {
      this.fail(res, err);
    }
  }

  private whoAmI(req: IncomingMessage, res: ServerResponse): void {
    const c = this.sessionCaller(req);
    if (!c) {
      this.fail(res, unauthorized('not signed in to the console'));
      return;
    }
    if (c instanceof ApiError) {
      this.fail(res, c);
      return;
    }
    const state = this.deps.sessions.check(sessionCookie(req)!);
    sendJson(
      res,
      200,
      { signed_in: true, kind: 'admin', expires_at: new Date(state as number).toISOString() },
      { ...PAGE_HEADERS, 'cache-control': 'no-store' },
    );
  }

  private async signOut(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const c = this.sessionCaller(req);
      if (c instanceof ApiError) throw c;
      const secret = sessionCookie(req);
      const ended = c !== undefined && secret !== undefined && this.deps.sessions.end(secret);
      if (ended) await this.deps.audit('Console sign-out', 'info');
      sendJson(res, 200, { signed_in: false }, { ...PAGE_HEADERS, 'cache-control': 'no-store', 'set-cookie': cookie(req, '', 0) });
    } catch (err) {
      this.fail(res, err);
    }
  }

  private fail(res: ServerResponse, err: unknown): void {
    const e = errorBody(err);
    sendJson(res, e.status, e.body, { ...e.headers, ...PAGE_HEADERS, 'cache-control': 'no-store' });
  }
}

/** The session cookie: HttpOnly, SameSite=Strict, for the whole origin, `Secure` when served over TLS. */
function cookie(req: IncomingMessage, value: string, maxAge: number): string {
  const tls = (req.socket as { encrypted?: boolean }).encrypted === true;
  return `${SESSION_COOKIE}=${value}; Path=/; Max-Age=${maxAge}; HttpOnly; SameSite=Strict${tls ? '; Secure' : ''}`;
}

function safeList(dir: string): string[] {
  try {
    return fs.readdirSync(dir).filter((n) => /^[A-Za-z0-9._-]+$/.test(n));
  } catch {
    return [];
  }
}
