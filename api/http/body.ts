/**
 * Request body reading with the spec's 1 MiB limit, and the assembly of an
 * operation's arguments from path, query string and JSON body.
 */
import { header } from './headers.js';
import type { IncomingMessage } from 'node:http';
import type { Operation, JsonSchema } from '../registry/types.js';
import { ApiError, badRequest, tooLarge } from '../../daemon/lib/errors.js';
import { coerceText } from '../validate.js';
import type { Args } from '../../daemon/lib/caller.js';
import { DEFAULT_HTTP_LIMITS, type HttpLimits } from '../../daemon/config.js';

export { DEFAULT_HTTP_LIMITS, type HttpLimits };

export const BODY_LIMIT = 1048576;
/** The body of a request that has none. */
export const NO_BODY = Buffer.alloc(0);
const EMPTY = NO_BODY;

/** Where the API server leaves its limits on each accepted socket. */
export const LIMITS = Symbol('hostd.httpLimits');

function limitsOf(req: IncomingMessage): HttpLimits {
  return (req.socket as unknown as Record<symbol, HttpLimits | undefined>)[LIMITS] ?? DEFAULT_HTTP_LIMITS;
}

/** Whether the request announced a body that has not fully arrived. */
export function hasUnreadBody(req: IncomingMessage): boolean {
  if (req.complete) return false;
  const len = header(req, 'content-length');
  return (len !== undefined && len !== '0') || header(req, 'transfer-encoding') !== undefined;
}

/**
 * True when the request's body has not fully arrived, so the answer about to
 * go out must close the connection. The socket then lingers: it ends its side
 * after the answer and drops what the client still sends for at most
 * `closeLingerMs` (closing at once would reset the connection and could lose
 * the answer on the client's side), then closes.
 */
export function bodyPending(req: IncomingMessage): boolean {
  if (!hasUnreadBody(req)) return false;
  const socket = req.socket;
  const ms = limitsOf(req).closeLingerMs;
  // Node ends a `Connection: close` response's socket with destroySoon();
  // this socket lingers instead.
  socket.destroySoon = function linger(this: typeof socket) {
    if (this.destroyed) return;
    this.end();
    const t = setTimeout(() => this.destroy(), ms);
    t.unref();
    this.once('close', () => clearTimeout(t));
    this.once('end', () => this.destroy());
  };
  return true;
}

/**
 * Runs `fn` once the parser has taken what already arrived of this request.
 * A handler runs as soon as the headers are parsed, before the parser reads
 * the body that came in the same read; deciding then whether the body is
 * pending would close connections whose body is already here. Node's parser
 * reads the socket itself and runs microtasks between its callbacks, so the
 * decision waits for the next turn of the event loop (setImmediate), after the
 * whole read is parsed. Only answers given before the body was read take this
 * path.
 */
export function afterParse(req: IncomingMessage, fn: () => void): void {
  if (hasUnreadBody(req)) setImmediate(fn);
  else fn();
}

export const requestTimeout = (ms: number) => new ApiError(408, `the request body did not arrive within ${Math.round(ms / 100) / 10} s`);

/**
 * An oversized body up to this size is read to its end (and dropped) before
 * the 413 goes out. Answering while the client is still sending makes node
 * close the connection with unread data, which resets it: the client then
 * sees ECONNRESET instead of the 413. Beyond this size the answer goes out at
 * once and the connection is cut.
 */
export const DRAIN_LIMIT = 16 * BODY_LIMIT;

/** Whether the request has a body to read: a length other than 0, or chunked encoding. */
export function hasBody(req: IncomingMessage): boolean {
  return !!Number(header(req, 'content-length') ?? 0) || header(req, 'transfer-encoding') !== undefined;
}

export function readBody(req: IncomingMessage, limit = BODY_LIMIT): Promise<Buffer> {
  const declared = Number(header(req, 'content-length') ?? 0);
  // No length and no chunked encoding: there is no body to wait for.
  if (!declared && header(req, 'transfer-encoding') === undefined) return Promise.resolve(EMPTY);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let over = declared > limit;
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (err: unknown, value?: Buffer) => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      if (err) reject(err);
      else resolve(value!);
    };
    // A body that trickles in is bounded in time, not only in size.
    if (!req.complete) {
      const ms = limitsOf(req).bodyTimeoutMs;
      timer = setTimeout(() => finish(requestTimeout(ms)), ms);
    }
    if (over && declared > DRAIN_LIMIT) {
      finish(tooLarge());
      return;
    }
    req.on('data', (c: Buffer) => {
      if (done) return;
      total += c.length;
      if (!over && total > limit) {
        over = true;
        chunks.length = 0;
      }
      if (over) {
        if (total > DRAIN_LIMIT) finish(tooLarge());
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => finish(over ? tooLarge() : undefined, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    req.on('error', (e) => finish(over ? tooLarge() : badRequest(`could not read the request body: ${e.message}`)));
    // The client went away before the end: nobody reads the answer, but settle anyway.
    req.on('close', () => {
      if (!done) finish(over ? tooLarge() : badRequest('the request body ended early'));
    });
  });
}

const takesBody = (op: Operation) => op.method === 'POST' || op.method === 'PATCH' || op.method === 'PUT';

/**
 * Path parameters fill the arguments of the same name; GET and DELETE take the
 * rest from the query string, POST/PATCH/PUT from the JSON body (peer_id may be
 * in either place).
 */
export function assembleArgs(op: Operation, params: Record<string, string>, query: string, body: Buffer): Args {
  const props = (op.schema.properties ?? {}) as Record<string, JsonSchema>;
  let args: Args = {};
  const text = body.length ? body.toString('utf8') : '';
  if (takesBody(op)) {
    if (text.trim() !== '') {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw badRequest('request body is not valid JSON');
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw badRequest('request body must be a JSON object');
      // Use the parsed object itself: copying it would run a `__proto__` key as a setter.
      args = parsed as Args;
    }
  } else if (text.trim() !== '') {
    throw badRequest(`${op.method} takes its arguments in the query string, not a body`);
  }
  if (query) {
    const pairs = queryPairs(query);
    const seen = pairs.length > 1 ? new Set<string>() : undefined;
    for (const [k, v] of pairs) {
      if (seen) {
        if (seen.has(k)) throw badRequest(`argument '${k}' is given more than once`);
        seen.add(k);
      }
      if (takesBody(op) && k !== 'peer_id') throw badRequest(`argument '${k}' must be sent in the JSON body`);
      if (Object.hasOwn(args, k)) throw badRequest(`argument '${k}' is given both in the query string and the body`);
      setArg(args, k, coerceText(Object.hasOwn(props, k) ? props[k] : undefined, v, k));
    }
  }
  for (const [k, v] of Object.entries(params)) {
    if (Object.hasOwn(args, k)) throw badRequest(`argument '${k}' is taken from the path`);
    setArg(args, k, coerceText(Object.hasOwn(props, k) ? props[k] : undefined, v, k));
  }
  return args;
}

/**
 * The name-value pairs of a query string, as URLSearchParams gives them. A
 * query without `%` or `+` has nothing to decode: it is split by hand, which
 * costs a fraction of URLSearchParams and its iterator (a forwarded GET
 * always has one, `peer_id`); anything else goes through URLSearchParams.
 */
export function queryPairs(query: string): Array<[string, string]> {
  if (query.includes('%') || query.includes('+')) return [...new URLSearchParams(query)];
  const out: Array<[string, string]> = [];
  let start = 0;
  while (start <= query.length) {
    let end = query.indexOf('&', start);
    if (end === -1) end = query.length;
    if (end > start) {
      const eq = query.indexOf('=', start);
      out.push(eq === -1 || eq > end ? [query.slice(start, end), ''] : [query.slice(start, eq), query.slice(eq + 1, end)]);
    }
    start = end + 1;
  }
  return out;
}

/** Defines `__proto__` rather than assigning it, so that it stays an ordinary (and then refused) argument. */
function setArg(args: Args, key: string, value: unknown): void {
  // Assigning any other key to an object made here or by JSON.parse defines it the same way.
  if (key === '__proto__') Object.defineProperty(args, key, { value, enumerable: true, writable: true, configurable: true });
  else args[key] = value;
}
