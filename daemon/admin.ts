/**
 * The local admin socket (<data dir>/hostd.sock, mode 0600): hostctl's way in.
 * Whoever can open the socket is the machine's administrator, so it needs no
 * token; it serves token management and the whole API as the local admin.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { Express, Request, Response } from 'express';
import type { RequestLog } from './logger.js';
import type { TokenStore } from './auth/tokens.js';
import type { Dispatch } from '../api/dispatch.js';
import type { AdminCommand } from './domain.js';
import { errorBody, badRequest } from './lib/errors.js';
import { OPERATOR } from './lib/operator.js';
import { readBody } from '../api/http/body.js';
import { sendJson, requestId } from '../api/http/server.js';

/** The local administrator's name in activity rows and task owners: the one operator name. */
export const ADMIN_ACTOR = OPERATOR;

export interface AdminDeps {
  tokens: TokenStore;
  /** The activity recorder (dispatch owns the log). */
  audit: Dispatch['audit'];
  /** Where the one line per request goes, as for the API. */
  requestLog: RequestLog;
}

type AdminHandler = (req: Request, body: Record<string, unknown>) => Promise<[number, unknown]>;

/** Admin routes; more (cluster pairing) are added with `route`. */
export class AdminApi {
  private readonly routes: Array<{ method: string; re: RegExp; handler: AdminHandler }> = [];

  constructor(private readonly deps: AdminDeps) {
    this.route('POST', /^\/admin\/tokens$/, async (_req, body) => {
      const name = body.name;
      const scopes = body.scopes;
      if (typeof name !== 'string') throw badRequest("argument 'name' must be string");
      if (!Array.isArray(scopes) || !scopes.every((s) => typeof s === 'string')) throw badRequest("argument 'scopes' must be array of strings");
      const out = await this.deps.tokens.create(name, scopes as string[]);
      await this.audit(`Token '${name}' created with scopes ${out.token.scopes.join(', ') || '(none)'}`, `tokens/${name}`);
      return [201, out];
    });
    this.route('GET', /^\/admin\/tokens$/, async () => [200, { tokens: this.deps.tokens.list() }]);
    this.route('DELETE', /^\/admin\/tokens\/([^/]+)$/, async (req) => {
      // Inside app.use('/admin', ...) req.path is relative to the mount ('/tokens/NAME').
      const m = /\/tokens\/([^/?]+)$/.exec(req.path);
      if (!m) throw badRequest('token revoke needs a token name');
      let name: string;
      try {
        name = decodeURIComponent(m[1]);
      } catch {
        throw badRequest('the token name has malformed percent-encoding');
      }
      const token = await this.deps.tokens.revoke(name);
      await this.audit(`Token '${token.name}' revoked`, `tokens/${token.name}`);
      return [200, { revoked: token }];
    });
  }

  route(method: string, re: RegExp, handler: AdminHandler): void {
    this.routes.push({ method, re, handler });
  }

  async audit(summary: string, target: string, severity: 'info' | 'warning' = 'info'): Promise<void> {
    await this.deps.audit({ category: 'auth', severity, summary, target, actor: ADMIN_ACTOR, metadata: { transport: 'api', via: 'admin-socket' } });
  }

  mount(app: Express): void {
    app.use('/admin', (req, res, next) => {
      const path = '/admin' + req.path;
      const r = this.routes.find((x) => x.method === req.method && x.re.test(path));
      if (!r) return next();
      void this.handle(r.handler, req, res);
    });
  }

  private async handle(handler: AdminHandler, req: Request, res: Response): Promise<void> {
    const started = performance.now();
    const id = requestId(req);
    const done = (status: number, body: unknown, headers?: Record<string, string>) => {
      sendJson(res, status, body, headers, id);
      this.deps.requestLog.write({ req_id: id, method: req.method, path: '/admin' + req.path, status, actor: ADMIN_ACTOR, ms: performance.now() - started });
    };
    try {
      const raw = await readBody(req);
      let body: Record<string, unknown> = {};
      if (raw.length) {
        try {
          body = JSON.parse(raw.toString('utf8'));
        } catch {
          throw badRequest('request body is not valid JSON');
        }
        if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest('request body must be a JSON object');
      }
      const [status, out] = await handler(req, body);
      done(status, out);
    } catch (err) {
      const e = errorBody(err);
      done(e.status, e.body, e.headers);
    }
  }
}

/**
 * Mounts the domains' operator commands (`METHOD /admin/...`). A mutating
 * command writes one activity row, as an API call would.
 */
export function registerDomainAdmin(admin: AdminApi, commands: Record<string, AdminCommand>): void {
  for (const [route, cmd] of Object.entries(commands)) {
    const m = /^(GET|POST|PUT|PATCH|DELETE) (\/admin\/[A-Za-z0-9/_-]+)$/.exec(route);
    if (!m) throw new Error(`admin command '${route}' must look like 'POST /admin/<path>'`);
    const [, method, p] = m;
    admin.route(method, new RegExp(`^${p.replace(/[/]/g, '\\/')}$`), async (_req, body) => {
      if (method === 'GET') return cmd(body);
      try {
        const out = await cmd(body);
        await admin.audit(`${method} ${p}`, p.slice('/admin/'.length));
        return out;
      } catch (err) {
        await admin.audit(`${method} ${p} failed: ${errorBody(err).body.error}`, p.slice('/admin/'.length), 'warning');
        throw err;
      }
    });
  }
}

/** Listens on the admin socket with mode 0600, replacing a stale socket file. */
export async function listenAdminSocket(app: http.RequestListener, socketPath: string): Promise<http.Server> {
  try {
    fs.unlinkSync(socketPath);
  } catch {
    /* no stale socket */
  }
  const server = http.createServer(app);
  const oldMask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => resolve());
    });
  } finally {
    process.umask(oldMask);
  }
  fs.chmodSync(socketPath, 0o600);
  return server;
}
