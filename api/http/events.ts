/**
 * `GET /api/v1/events/stream` over HTTP: Server-Sent Events (with `Accept:
 * text/event-stream`) and WebSocket (an upgrade on the same path). Both
 * authenticate like every call (the `Authorization` header; a WebSocket
 * client that cannot set headers may offer the subprotocol
 * `bearer.<token>`), check and validate the arguments like dispatch does,
 * and hand the connection to the event service as a Sink. A token in the
 * URL (`token`, `access_token`) is refused: URLs end up in logs and
 * histories.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import { API_PREFIX } from '../catalog.js';
import { getOperation } from '../registry/index.js';
import { validateArgs } from '../validate.js';
import { ApiError, badRequest, errorBody, notFound, unauthorized } from '../../daemon/lib/errors.js';
import type { Caller } from '../../daemon/lib/caller.js';
import type { RequestLog } from '../../daemon/logger.js';
import type { EventService, StreamArgs } from '../../daemon/events/service.js';
import type { Sink } from '../../daemon/events/subscription.js';
import { assembleArgs } from './body.js';
import { header } from './headers.js';

export const STREAM_PATH = `${API_PREFIX}/events/stream`;
export const WS_SUBPROTOCOL = 'hostd.events.v1';
const BEARER_PROTOCOL = 'bearer.';
/** Bytes waiting in a WebSocket's buffer before the stream waits for it to drain. */
const WS_HIGH_WATER = 64 * 1024;
/** Messages of a stream opened before its WebSocket handshake that wait for it; past them the stream waits. */
const EARLY_MESSAGES = 64;

export interface EventStreamDeps {
  events: EventService;
  authenticate: (authorization: string | undefined) => Caller | undefined;
  /** The console's session caller for a request without Authorization (SSE only: see HttpDeps.session). */
  session?: (req: IncomingMessage) => Caller | ApiError | undefined;
  /** 'self' when a peer_id names this member, 'other' for another member, undefined when unknown. */
  resolvePeer: (peerId: string) => 'self' | 'other' | undefined;
  /** Opens another member's stream for the caller (its refusals as ApiErrors); answers a function that closes it. */
  forwardStream?: (peerId: string, caller: Caller, args: StreamArgs, lastEventId: string | undefined, requestId: string, sink: Sink) => Promise<() => void>;
  /** Opens a members=all stream (every member's, merged; its refusals as ApiErrors); answers a function that closes it. */
  allMembers?: (caller: Caller, args: StreamArgs, lastEventId: string | undefined, requestId: string, sink: Sink) => Promise<() => void>;
  log: Logger;
  requestLog: RequestLog;
}

/** Whether a request to the stream path asks for Server-Sent Events. */
export function wantsSse(req: IncomingMessage): boolean {
  return req.method === 'GET' && (header(req, 'accept') ?? '').includes('text/event-stream');
}

interface Admitted {
  caller: Caller;
  args: StreamArgs;
  /** Another member's stream (peer_id). */
  peer?: string;
  /** Every member's stream (members=all). */
  all?: boolean;
}

/** The caller and arguments of a stream request, or the ApiError that refuses it. */
function admit(deps: EventStreamDeps, req: IncomingMessage, authorization: string | undefined): Admitted {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const query = q === -1 ? '' : url.slice(q + 1);
  const params = new URLSearchParams(query);
  if (params.has('token') || params.has('access_token')) {
    throw badRequest('a token never goes in the URL: send it as Authorization: Bearer <token>, or as the WebSocket subprotocol bearer.<token>');
  }
  let caller = deps.authenticate(authorization);
  if (!caller && authorization === undefined && deps.session) {
    const c = deps.session(req);
    if (c instanceof ApiError) throw c;
    caller = c;
  }
  if (!caller) throw unauthorized();
  const op = getOperation('events_stream')!;
  const args = assembleArgs(op, {}, query, Buffer.alloc(0));
  validateArgs(op, args);
  let peer: string | undefined;
  if (args.members === 'all') {
    if (args.peer_id !== undefined) throw badRequest("give either peer_id (one member's stream) or members=all (every member's), not both");
    if (!deps.allMembers) throw new ApiError(501, 'this listener does not serve members=all streams');
  } else if (typeof args.peer_id === 'string') {
    const where = deps.resolvePeer(args.peer_id);
    if (!where) throw notFound(`peer '${args.peer_id}' not found`);
    // A stream that came over the cluster has made its one hop (the member serves its own events).
    if (where === 'other') {
      if (!deps.forwardStream) throw new ApiError(501, 'this listener does not forward event streams');
      peer = args.peer_id;
    }
  }
  const { peer_id: _p, members: _m, ...rest } = args;
  void _p;
  void _m;
  return { caller, args: rest as StreamArgs, peer, all: args.members === 'all' };
}

/** How a stream that is opened before it is answered (another member's, or every member's) opens, or undefined for this member's. */
function opener(deps: EventStreamDeps, a: Admitted, lastEventId: string | undefined, requestId: string): ((sink: Sink) => Promise<() => void>) | undefined {
  if (a.all) return (sink) => deps.allMembers!(a.caller, a.args, lastEventId, requestId, sink);
  if (a.peer) return (sink) => deps.forwardStream!(a.peer!, a.caller, a.args, lastEventId, requestId, sink);
  return undefined;
}

/** Serves an SSE stream request (the caller checked `wantsSse`). */
export async function serveSse(deps: EventStreamDeps, req: IncomingMessage, res: ServerResponse, requestId: string): Promise<void> {
  const started = performance.now();
  let caller: Caller | undefined;
  const line = (status: number) =>
    deps.requestLog.write({
      req_id: requestId,
      method: req.method,
      path: STREAM_PATH,
      status,
      op: 'events_stream',
      actor: caller?.tokenName,
      ms: performance.now() - started,
    });
  let closed = false;
  // The head goes with the first message, or once the stream is open: a refusal found while opening is still a plain answer.
  const head = () => {
    if (res.headersSent) return;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-request-id': requestId,
      'x-accel-buffering': 'no',
    });
    res.write(': hostd event stream\n\n');
  };
  const sink: Sink = {
    send(text, id) {
      if (closed || res.writableEnded || res.destroyed) return true;
      head();
      return res.write(`id: ${id}\ndata: ${text}\n\n`);
    },
    drained: () =>
      new Promise<void>((resolve) => {
        if (closed || res.destroyed) return resolve();
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.once('drain', done);
        res.once('close', done);
      }),
    end() {
      closed = true;
      head();
      if (!res.writableEnded) res.end();
    },
  };
  try {
    const a = admit(deps, req, header(req, 'authorization'));
    caller = a.caller;
    const open = opener(deps, a, header(req, 'last-event-id'), requestId);
    if (open) {
      const close = await open(sink);
      head();
      line(200);
      if (closed || res.destroyed) close();
      else
        res.once('close', () => {
          closed = true;
          close();
        });
      return;
    }
    const sub = deps.events.openStream(a.caller, a.args, sink, header(req, 'last-event-id'));
    head();
    line(200);
    res.once('close', () => {
      closed = true;
      sub?.close();
    });
  } catch (err) {
    const e = errorBody(err);
    if (e.status >= 500 && !(err instanceof ApiError)) deps.log.error({ req_id: requestId, err }, 'event stream failed');
    if (res.headersSent) {
      res.end();
    } else {
      const text = JSON.stringify(e.body);
      res.writeHead(e.status, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': String(Buffer.byteLength(text)),
        'x-request-id': requestId,
        ...e.headers,
      });
      res.end(text);
    }
    line(e.status);
  }
}

/**
 * The `upgrade` listener of an API server: WebSocket streams on the stream
 * path; any other upgrade is refused.
 */
export function eventsUpgrade(
  deps: EventStreamDeps,
  requestId: (req: IncomingMessage) => string,
): (req: IncomingMessage, socket: Duplex, head: Buffer) => void {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: 4096,
    // The bearer protocol only carries the token: the one selected, if offered, is ours.
    handleProtocols: (protocols) => (protocols.has(WS_SUBPROTOCOL) ? WS_SUBPROTOCOL : false),
  });
  return (req, socket, head) => {
    const id = requestId(req);
    const started = performance.now();
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const refuse = (err: unknown) => {
      const e = errorBody(err);
      const text = JSON.stringify(e.body);
      socket.end(
        `HTTP/1.1 ${e.status} ${statusText(e.status)}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(text)}\r\nx-request-id: ${id}\r\nconnection: close\r\n\r\n${text}`,
      );
      deps.requestLog.write({ req_id: id, method: req.method, path, status: e.status, op: 'events_stream', ms: performance.now() - started });
    };
    if (path !== STREAM_PATH) return refuse(new ApiError(404, `no WebSocket endpoint at ${path}`));
    let admitted: Admitted;
    try {
      admitted = admit(deps, req, header(req, 'authorization') ?? bearerFromProtocols(header(req, 'sec-websocket-protocol')));
      if (!admitted.peer && !admitted.all) deps.events.precheck(admitted.caller, admitted.args, header(req, 'last-event-id'));
    } catch (err) {
      return refuse(err);
    }
    const caller = admitted.caller;
    /** The request line of the upgrade: 101 once the socket is up, or the refusal's status. */
    const logUpgrade = (status: number) =>
      deps.requestLog.write({ req_id: id, method: req.method, path, status, op: 'events_stream', actor: caller.tokenName, ms: performance.now() - started });
    const open = opener(deps, admitted, header(req, 'last-event-id'), id);
    if (open) {
      // The members' refusals come before the handshake: the stream is opened first, its messages held until the socket is up
      // (at most EARLY_MESSAGES: past them a member's stream waits, as on a full socket).
      const early: Array<[string, string]> = [];
      const waiting: Array<() => void> = [];
      const release = () => {
        for (const w of waiting.splice(0)) w();
      };
      let sink: Sink | undefined;
      let ended = false;
      const relay: Sink = {
        send: (text, mid) => (sink ? sink.send(text, mid) : (early.push([text, mid]), early.length < EARLY_MESSAGES)),
        drained: () => (sink ? sink.drained() : new Promise<void>((resolve) => waiting.push(resolve))),
        end: () => (sink ? sink.end() : (ended = true)),
      };
      open(relay).then(
        (close) => {
          // A client gone while the members opened: nothing will take the socket, so close what was opened.
          if (socket.destroyed) {
            release();
            return close();
          }
          wss.handleUpgrade(req, socket, head, (w) => {
            sink = wsSink(w);
            for (const [t, m] of early.splice(0)) sink.send(t, m);
            release();
            if (ended) sink.end();
            logUpgrade(101);
            w.on('close', close);
            w.on('error', close);
          });
        },
        (err) => {
          release();
          refuse(err);
        },
      );
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const sink = wsSink(ws);
      let sub;
      try {
        sub = deps.events.openStream(admitted.caller, admitted.args, sink, header(req, 'last-event-id'));
      } catch (err) {
        const e = errorBody(err);
        ws.send(JSON.stringify({ type: 'error', status: e.status, error: e.body.error }));
        ws.close(e.status === 429 ? 1013 : 1008, e.body.error.slice(0, 120));
        logUpgrade(e.status);
        return;
      }
      logUpgrade(101);
      ws.on('close', () => sub?.close());
      ws.on('error', () => sub?.close());
    });
  };
}

/** The token of a `bearer.<token>` subprotocol, as an Authorization value. */
function bearerFromProtocols(value: string | undefined): string | undefined {
  if (!value) return undefined;
  for (const p of value.split(',')) {
    const t = p.trim();
    if (t.startsWith(BEARER_PROTOCOL) && t.length > BEARER_PROTOCOL.length) return `Bearer ${t.slice(BEARER_PROTOCOL.length)}`;
  }
  return undefined;
}

function wsSink(ws: WebSocket): Sink {
  let last: Promise<void> = Promise.resolve();
  return {
    send(text) {
      if (ws.readyState !== ws.OPEN) return true;
      last = new Promise<void>((resolve) => ws.send(text, () => resolve()));
      return ws.bufferedAmount < WS_HIGH_WATER;
    },
    drained: () => last,
    end() {
      if (ws.readyState === ws.OPEN) ws.close(1000);
    },
  };
}

function statusText(status: number): string {
  return (
    (
      { 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 429: 'Too Many Requests', 501: 'Not Implemented' } as Record<
        number,
        string
      >
    )[status] ?? 'Error'
  );
}
