/**
 * The JSON/HTTP transport. Everything under /api/v1 goes through one handler
 * that routes by the registry, authenticates, and hands the call to dispatch.
 * The same app serves the local admin socket, where the caller is fixed.
 */
import type { Cors } from './cors.js';
import { header } from './headers.js';
import crypto from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import express, { type Express } from 'express';
import type { Logger } from 'pino';
import type { Dispatch } from '../dispatch.js';
import type { Router } from '../router.js';
import type { Operation } from '../registry/types.js';
import { API_PREFIX } from '../catalog.js';
import { jsonOf } from '../json-text.js';
import { errorBody, unauthorized, ApiError } from '../../daemon/lib/errors.js';
import { afterParse, assembleArgs, bodyPending, hasBody, hasUnreadBody, readBody, LIMITS, NO_BODY, DEFAULT_HTTP_LIMITS, type HttpLimits } from './body.js';
import type { Caller } from '../../daemon/lib/caller.js';
import type { RequestLog } from '../../daemon/logger.js';
import { STREAM_PATH, serveSse, wantsSse, type EventStreamDeps } from './events.js';

export interface HttpDeps {
  dispatch: Dispatch;
  router: Router;
  /** The caller for an Authorization header value, or undefined (401). */
  authenticate: (authorization: string | undefined) => Caller | undefined;
  log: Logger;
  /** Where the one line per request goes. */
  requestLog: RequestLog;
  openapi: () => unknown;
  /**
   * The caller of a request without an Authorization header, from the
   * console's session cookie: undefined without one, an error when the
   * request may not use it (cross-site) or the session is over.
   */
  session?: (req: IncomingMessage) => Caller | ApiError | undefined;
  /** Extra routes mounted before the API (admin endpoints). */
  mount?: (app: Express) => void;
  /** Listeners for exact paths (such as /mcp), served directly like the API. */
  direct?: Record<string, RequestListener>;
  /** Cross-origin access for bearer-token browser clients (config `cors_origins`). */
  cors?: Cors;
  /** The event stream (SSE on its path; WebSocket upgrades go through `eventsUpgrade`). */
  events?: Pick<EventStreamDeps, 'events' | 'resolvePeer' | 'forwardStream' | 'allMembers'>;
}

const REQ_ID_RE = /^[A-Za-z0-9._:-]{1,64}$/;
const bootTag = crypto.randomBytes(3).toString('hex');
let reqCounter = 0;

export function requestId(req: IncomingMessage): string {
  const given = header(req, 'x-request-id');
  if (typeof given === 'string' && REQ_ID_RE.test(given)) return given;
  return `${bootTag}-${(++reqCounter).toString(36)}`;
}

interface TextResult {
  content_type: string;
  text: string;
}

/**
 * A text operation's format from the Accept header when the call does not
 * name one (a scraper says what it takes only there).
 */
function negotiated(op: Operation, req: IncomingMessage, args: Record<string, unknown>): Record<string, unknown> {
  if (!op.textResult || args.format !== undefined || !('format' in (op.args ?? {}))) return args;
  const accept = req.headers.accept;
  return typeof accept === 'string' && accept.includes('application/openmetrics-text') ? { ...args, format: 'openmetrics' } : args;
}

function pairs(flat: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i], flat[i + 1]]);
  return out;
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}, requestIdHeader?: string): void {
  sendJsonText(res, status, jsonOf(body), headers, requestIdHeader);
}

/** `sendJson` of a body already serialised. */
export function sendJsonText(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}, requestIdHeader?: string): void {
  // A flat [name, value, ...] list: the cheapest form writeHead takes.
  const list: string[] = ['content-type', 'application/json; charset=utf-8', 'content-length', String(Buffer.byteLength(text))];
  if (requestIdHeader) list.push('x-request-id', requestIdHeader);
  for (const k in headers) list.push(k, headers[k]);
  res.writeHead(status, list);
  res.end(text);
}

export type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * The request listener for one listener (TCP or admin socket). API calls and
 * the `direct` paths (MCP) are handled directly, on the hot path; the rest
 * (OpenAPI, admin routes) goes through an express app.
 */
export function createHttpApp(deps: HttpDeps): RequestListener {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('query parser', false);
  app.get(`${API_PREFIX}/openapi.json`, (_req, res) => sendJson(res, 200, deps.openapi()));
  deps.mount?.(app);
  app.use((req, res) => apiCall(deps, req, res));
  const openapiPath = `${API_PREFIX}/openapi.json`;

  const direct = new Map(Object.entries(deps.direct ?? {}));
  const stream: EventStreamDeps | undefined = deps.events && {
    ...deps.events,
    authenticate: deps.authenticate,
    session: deps.session,
    log: deps.log,
    requestLog: deps.requestLog,
  };
  return (req, res) => {
    const url = req.url ?? '/';
    if (stream && url.startsWith(STREAM_PATH) && (url.length === STREAM_PATH.length || url[STREAM_PATH.length] === '?') && wantsSse(req)) {
      void serveSse(stream, req, res, requestId(req));
      return;
    }
    if (url.startsWith(API_PREFIX + '/') && !url.startsWith(openapiPath)) return apiCall(deps, req, res);
    const q = url.indexOf('?');
    const own = direct.get(q === -1 ? url : url.slice(0, q));
    if (own) own(req, res);
    else app(req, res);
  };
}

function apiCall(deps: HttpDeps, req: IncomingMessage, res: ServerResponse): void {
  const started = performance.now();
  const id = requestId(req);
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? '' : url.slice(q + 1);
  let opName: string | undefined;
  let actor: string | undefined;

  // CORS is for the API only: never for the console's page or its session routes.
  const cors = path === API_PREFIX || path.startsWith(API_PREFIX + '/') ? (deps.cors?.responseHeaders(req) ?? []) : [];
  const send = (status: number, body: unknown, headers?: Record<string, string>) => {
    if (cors.length) headers = { ...headers, ...Object.fromEntries(pairs(cors)) };
    sendJson(res, status, body, headers, id);
    deps.requestLog.write({
      req_id: id,
      method: req.method,
      path,
      status,
      op: opName,
      actor,
      ms: performance.now() - started,
    });
  };
  const finish = (status: number, body: unknown, headers?: Record<string, string>) => {
    // The common case: no body, or all of it read.
    if (!hasUnreadBody(req)) return send(status, body, headers);
    // An answer given before the body arrived (401, 404, 405, 403, a refused
    // or late body) ends the connection, lingering briefly, instead of reading
    // whatever the client still trickles in; decided once the parser has
    // taken what already arrived.
    afterParse(req, () => send(status, body, bodyPending(req) ? { ...headers, connection: 'close' } : headers));
  };
  /** An operation answering text (the metrics exposition): the text as is, with its media type. */
  const finishText = (status: number, r: TextResult) => {
    const list = ['content-type', r.content_type, 'content-length', String(Buffer.byteLength(r.text)), 'x-request-id', id, ...cors];
    res.writeHead(status, list);
    res.end(r.text);
    deps.requestLog.write({ req_id: id, method: req.method, path, status, op: opName, actor, ms: performance.now() - started });
  };
  const fail = (err: unknown) => {
    const e = errorBody(err);
    if (e.status >= 500 && !(err instanceof ApiError)) deps.log.error({ req_id: id, err }, 'request failed');
    finish(e.status, e.body, e.headers);
  };

  if (!path.startsWith(API_PREFIX + '/') && path !== API_PREFIX) {
    fail(new ApiError(404, `no endpoint at ${path}`));
    return;
  }
  if (req.method === 'OPTIONS') {
    let allow: string;
    try {
      allow = deps.router.allow(path.slice(API_PREFIX.length));
    } catch (err) {
      fail(err);
      return;
    }
    res.writeHead(204, ['allow', allow, 'x-request-id', id, ...(deps.cors?.preflightHeaders(req, allow) ?? [])]);
    res.end();
    deps.requestLog.write({ req_id: id, method: req.method, path, status: 204, ms: performance.now() - started });
    return;
  }
  let match;
  try {
    match = deps.router.match(req.method ?? 'GET', path.slice(API_PREFIX.length));
  } catch (err) {
    fail(err);
    return;
  }
  const { op, params } = match;
  opName = op.name;
  const authorization = header(req, 'authorization');
  let caller = deps.authenticate(authorization);
  if (!caller && authorization === undefined && deps.session) {
    const s = deps.session(req);
    if (s instanceof ApiError) {
      fail(s);
      return;
    }
    caller = s;
  }
  if (!caller) {
    fail(unauthorized());
    return;
  }
  // The console's page says so on every call; the label only marks the activity row, it grants nothing.
  if (!caller.client && header(req, 'x-hostd-console') === '1') caller = { ...caller, client: 'console' };
  actor = caller.tokenName;
  deps.dispatch
    .call(
      op,
      () =>
        hasBody(req)
          ? readBody(req).then((body) => negotiated(op, req, assembleArgs(op, params, query, body)))
          : negotiated(op, req, assembleArgs(op, params, query, NO_BODY)),
      caller,
      id,
    )
    .then((result) => (op.textResult ? finishText(op.successStatus, result as TextResult) : finish(op.successStatus, result ?? {})), fail);
}

/**
 * The API's HTTP server: Node's own header and request timeouts (checked every
 * second rather than every 30 s), and connection caps. Beyond
 * `maxConnections` in total Node drops new connections; beyond
 * `maxConnectionsPerClient` from one address they are closed at once, so that
 * one client cannot take the sockets every other client needs.
 */
export function createApiServer(listener: RequestListener, limits: HttpLimits = DEFAULT_HTTP_LIMITS, tls?: { cert: Buffer; key: Buffer }): http.Server {
  const options: http.ServerOptions = {
    headersTimeout: limits.headersTimeoutMs,
    // A backstop: readBody answers 408 at bodyTimeoutMs; this catches any request that still lingers.
    requestTimeout: limits.headersTimeoutMs + limits.bodyTimeoutMs + 1000,
    connectionsCheckingInterval: 1000,
  };
  // The TLS listener (https_addr) is the same server over TLS: same limits, same listener.
  const server: http.Server = tls
    ? https.createServer({ ...options, cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' }, listener)
    : http.createServer(options, listener);
  server.keepAliveTimeout = 65_000;
  server.maxConnections = limits.maxConnections;
  const perClient = new Map<string, number>();
  server.on(tls ? 'secureConnection' : 'connection', (socket: Socket) => {
    const addr = socket.remoteAddress ?? '';
    const n = (perClient.get(addr) ?? 0) + 1;
    if (n > limits.maxConnectionsPerClient) {
      socket.destroy();
      return;
    }
    perClient.set(addr, n);
    (socket as unknown as Record<symbol, HttpLimits>)[LIMITS] = limits;
    socket.once('close', () => {
      const left = (perClient.get(addr) ?? 1) - 1;
      if (left > 0) perClient.set(addr, left);
      else perClient.delete(addr);
    });
  });
  return server;
}

/** Caller for a bearer token, through the token store. */
export function bearerAuthenticator(
  lookup: (secret: string) => { id: string; name: string; scopes: string[] } | undefined,
  nodeId: () => string,
  transport: 'api' | 'mcp' = 'api',
): (authorization: string | undefined) => Caller | undefined {
  return (authorization) => {
    if (!authorization) return undefined;
    // The common form `Bearer <secret>` without a regular expression; any other spacing or case through it.
    let secret: string | undefined;
    if (authorization.startsWith('Bearer ') && authorization.indexOf(' ', 7) === -1) secret = authorization.slice(7);
    else secret = /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1];
    if (!secret) return undefined;
    const tok = lookup(secret);
    if (!tok) return undefined;
    return { tokenId: tok.id, tokenName: tok.name, scopes: tok.scopes, transport, origin: nodeId() };
  };
}
