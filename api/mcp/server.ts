/**
 * The MCP transport: MCP's Streamable HTTP at /mcp on the daemon's HTTP
 * listener, stateless (no sessions, JSON responses), built on the official
 * SDK's low-level `Server`, which does all the JSON-RPC work: one long-lived
 * server for the whole daemon, connected to `HttpMux` (an SDK `Transport`)
 * that carries each POST's messages in and its responses out. Request ids are
 * renumbered on the way in, so ids chosen by different clients never meet
 * inside the server, and restored on the way out. The HTTP checks mirror the
 * SDK's own Streamable HTTP server transport (Accept 406, Content-Type 415,
 * batch size, message shape, one initialize per POST, protocol version),
 * using the SDK's own helpers and constants; a fresh SDK server and transport
 * per POST cost four times as much.
 *
 * Before any MCP message is looked at, the bearer token is checked exactly as
 * on the HTTP API (401 `{"error": ...}`), and the body is read under the same
 * 1 MiB limit (413). Tool calls go through `Dispatch.call`, the one path every
 * transport uses, with a caller whose transport is `mcp`.
 * See docs/mcp.md.
 */
import type { RequestLog } from '../../daemon/logger.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { isJsonContentType } from '@modelcontextprotocol/sdk/shared/mediaType.js';
import { MAX_BATCH_SIZE } from '@modelcontextprotocol/sdk/server/requestBody.js';
import {
  CallToolRequestSchema,
  CallToolResultSchema,
  ErrorCode,
  JSONRPCMessageSchema,
  ListToolsRequestSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
  type CallToolResult,
  type JSONRPCMessage,
  type MessageExtraInfo,
} from '@modelcontextprotocol/sdk/types.js';
import type { jsonSchemaValidator, JsonSchemaType, JsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import type { Dispatch } from '../dispatch.js';
import { getOperation } from '../registry/index.js';
import { immutable, jsonOf, resultValue } from '../json-text.js';
import type { Operation } from '../registry/types.js';
import { ApiError, errorBody, unauthorized } from '../../daemon/lib/errors.js';
import { afterParse, bodyPending, readBody } from '../http/body.js';
import { requestId, sendJson, sendJsonText } from '../http/server.js';
import { header, headerJoined } from '../http/headers.js';
import type { Caller } from '../../daemon/lib/caller.js';
import { ToolLists } from './tools.js';

export const MCP_PATH = '/mcp';

export interface McpDeps {
  dispatch: Dispatch;
  /** The caller for an Authorization header value (transport 'mcp'), or undefined (401). */
  authenticate: (authorization: string | undefined) => Caller | undefined;
  log: Logger;
  /** Where the one line per request goes (defaults to `log`). */
  requestLog: RequestLog;
  /** Reported as serverInfo.version. */
  version: string;
}

/**
 * The server never validates JSON Schemas itself (tool arguments are validated
 * by dispatch, and it asks clients for nothing), so it gets a validator that
 * costs nothing to construct instead of the SDK default, a fresh Ajv instance
 * per Server, which would be built on every request in stateless mode.
 */
const noValidator: jsonSchemaValidator = {
  getValidator<T>(_schema: JsonSchemaType): JsonSchemaValidator<T> {
    return (input: unknown) => ({ valid: true, data: input as T, errorMessage: undefined });
  },
};

/** The tool result of a successful operation: its JSON as text and as structuredContent. */
export function toolResult(value: unknown): CallToolResult {
  const json = resultValue(value) ?? {};
  // structuredContent must be an object; every operation answers one, but a
  // non-object answer would still be carried (as `result`) rather than lost.
  const structured = typeof json === 'object' && !Array.isArray(json) ? (json as Record<string, unknown>) : { result: json };
  return { content: [{ type: 'text', text: JSON.stringify(json) }], structuredContent: structured };
}

/**
 * The JSON text of `toolResult(value)`, serialising the value once: its text
 * is both the `text` content (escaped as a JSON string) and, for an object,
 * `structuredContent` itself. The same bytes as
 * `JSON.stringify(toolResult(value))`.
 */
export function toolResultJson(value: unknown): string {
  // A member's answer is parsed and written again here: its text goes inside the JSON-RPC envelope, which text
  // from another process must not be able to shape (the HTTP transport sends it whole, as the body).
  const json = resultValue(value) ?? {};
  const keep = immutable(json);
  if (keep) {
    const hit = toolResultTexts.get(json);
    if (hit !== undefined) return hit;
  }
  const text = jsonOf(json);
  const structured = typeof json === 'object' && !Array.isArray(json) ? text : `{"result":${text}}`;
  const out = `{"content":[{"type":"text","text":${JSON.stringify(text)}}],"structuredContent":${structured}}`;
  if (keep) toolResultTexts.set(json, out);
  return out;
}

/** toolResultJson of results that cannot change (see `immutable`), kept as long as they live. */
const toolResultTexts = new WeakMap<object, string>();

/** Where an error result carries the HTTP status the call would have had. */
export const STATUS_META = 'hostd/status';

/**
 * The tool result of a failed operation: the HTTP API's `{"error"}` body as
 * text, and the status it would have had in `_meta`. A tool without an
 * outputSchema also carries `{error, status}` as structuredContent; a tool
 * with one does not, because structuredContent must then fit the schema (the
 * SDK's client checks it on error results too) and the schema describes the
 * success answer.
 */
export function toolError(err: unknown, hasOutputSchema = false): CallToolResult {
  const e = errorBody(err);
  return {
    isError: true,
    content: [{ type: 'text', text: JSON.stringify(e.body) }],
    ...(hasOutputSchema ? {} : { structuredContent: { error: e.body.error, status: e.status } }),
    _meta: { [STATUS_META]: e.status },
  };
}

/**
 * A JSON-RPC error for the SDK to send: it takes `code` and `message` from what
 * a handler throws (an McpError would prefix the message with "MCP error <code>: ",
 * which the client then prefixes again).
 */
function protocolError(code: number, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/** Everything one HTTP request's MCP server needs to know about its request. */
interface RequestScope {
  caller: Caller;
  id: string;
  /** Tool names called in this request, for the request log line. */
  tools: string[];
}

// Shape tests for messages already validated (JSONRPCMessageSchema on the way
// in) or made by the SDK server itself (on the way out): the SDK's own
// is*() guards would parse each message again.
const isRequest = (m: JSONRPCMessage): m is JSONRPCMessage & { id: string | number; method: string } => 'method' in m && 'id' in m;
const isResponse = (m: JSONRPCMessage): m is JSONRPCMessage & { id: string | number } => 'id' in m && !('method' in m);
const isInitialize = (m: JSONRPCMessage) => isRequest(m) && m.method === 'initialize';

/** A `tools/call` request the daemon answers itself (see `plainToolCall`). */
interface PlainToolCall {
  id: string | number;
  op: Operation;
  args: Record<string, unknown>;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A single `tools/call` of a tool this build serves, with nothing but `name`
 * and `arguments` (an object) in its params: the common call, answered here
 * without the SDK server, with the same result the server's handler gives
 * (`toolResult`, `toolError`). Anything else (a batch, `_meta` such as a
 * progress token, a task, an unknown tool, arguments that are not an object,
 * every other method) goes through the SDK server as before. The SDK server
 * spends about 10 µs of CPU per call on its JSON-RPC type guards and schema
 * checks alone (a failed Zod parse builds an error object each time), and
 * re-validates a result this transport made itself.
 */
function plainToolCall(m: JSONRPCMessage): PlainToolCall | undefined {
  if (!isRequest(m) || m.method !== 'tools/call') return undefined;
  const params = (m as { params?: unknown }).params;
  if (!isPlainObject(params)) return undefined;
  for (const k in params) if (k !== 'name' && k !== 'arguments') return undefined;
  const args = params.arguments ?? {};
  if (typeof params.name !== 'string' || !isPlainObject(args)) return undefined;
  const op = getOperation(params.name);
  if (!op || !op.mcp) return undefined;
  return { id: m.id, op, args };
}

/**
 * A single request that JSONRPCMessageSchema accepts as it is, checked by hand
 * for the common shape only: `jsonrpc` "2.0", an id (a string or a safe
 * integer), a method, params an object of `name` and `arguments` alone, no
 * other key. Anything else is parsed by the schema as before (the SDK's Zod
 * schemas cost about 2% of the daemon's CPU per MCP call under load); what
 * passes here is what the schema would answer, unchanged.
 */
export function isPlainRequest(m: unknown): m is JSONRPCMessage {
  if (!isPlainObject(m)) return false;
  for (const k in m) if (k !== 'jsonrpc' && k !== 'id' && k !== 'method' && k !== 'params') return false;
  if (m.jsonrpc !== '2.0' || typeof m.method !== 'string') return false;
  if (typeof m.id !== 'string' && !Number.isSafeInteger(m.id)) return false;
  const params = m.params;
  if (params === undefined) return true;
  if (!isPlainObject(params)) return false;
  for (const k in params) if (k !== 'name' && k !== 'arguments') return false;
  return true;
}

/** The request scope a message was delivered with (see HttpMux.exchange). */
function scopeOf(extra: { authInfo?: { extra?: Record<string, unknown> } }): RequestScope {
  const scope = extra.authInfo?.extra?.scope as RequestScope | undefined;
  if (!scope) throw protocolError(ErrorCode.InternalError, 'request without a caller');
  return scope;
}

/** Every operation of the registry is served (daemon/domains.ts fails to compile otherwise): one list for every session. */
const toolLists = new ToolLists();

function createServer(deps: McpDeps): Server {
  const server = new Server({ name: 'hostd', version: deps.version }, { capabilities: { tools: { listChanged: false } }, jsonSchemaValidator: noValidator });
  server.setRequestHandler(ListToolsRequestSchema, async (_request, extra) => {
    const scope = scopeOf(extra);
    return toolLists.forScopes(scope.caller.scopes);
  });
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const scope = scopeOf(extra);
    const name = request.params.name;
    const op = getOperation(name);
    // An unknown tool is a protocol error; a known one the token may not use
    // is the operation's own 403, as on the HTTP API.
    if (!op || !op.mcp) throw protocolError(ErrorCode.InvalidParams, `Tool ${name} not found`);
    // A batch may carry several calls; each gets its own request id.
    const callId = scope.tools.length ? `${scope.id}:${scope.tools.length}` : scope.id;
    scope.tools.push(name);
    const args = (request.params.arguments ?? {}) as Record<string, unknown>;
    const r = await runTool(deps, op, args, scope.caller, callId);
    return r.ok ? toolResult(r.value) : r.error;
  });
  return server;
}

/** Runs one tool through dispatch: its value, or the error result of a failed operation. */
async function runTool(
  deps: McpDeps,
  op: Operation,
  args: Record<string, unknown>,
  caller: Caller,
  callId: string,
): Promise<{ ok: true; value: unknown } | { ok: false; error: CallToolResult }> {
  try {
    return { ok: true, value: await deps.dispatch.call(op, args, caller, callId) };
  } catch (err) {
    if (!(err instanceof ApiError) && errorBody(err).status >= 500) deps.log.error({ req_id: callId, err }, 'tool call failed');
    return { ok: false, error: toolError(err, op.result !== null) };
  }
}

/**
 * The SDK transport under the daemon's one MCP server. `exchange` hands a
 * POST's messages to the server and resolves with the responses to its
 * requests. The server sends nothing unprompted (no notifications, no
 * server-to-client requests), so anything but a response is dropped.
 */
export class HttpMux implements Transport {
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  private nextId = 0;
  private readonly waiting = new Map<number, (response: JSONRPCMessage) => void>();

  async start(): Promise<void> {}

  async close(): Promise<void> {
    this.onclose?.();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (!isResponse(message)) return;
    const done = this.waiting.get(message.id as number);
    if (!done) return;
    this.waiting.delete(message.id as number);
    done(message);
  }

  /** Delivers messages; resolves with the responses to the requests among them, in their order, with their own ids. */
  exchange(messages: JSONRPCMessage[], extra: MessageExtraInfo): { responses: Promise<JSONRPCMessage[]>; cancel: () => void } {
    const inner: number[] = [];
    const waits: Array<Promise<JSONRPCMessage>> = [];
    for (const m of messages) {
      if (!isRequest(m)) {
        this.onmessage?.(m, extra);
        continue;
      }
      const id = ++this.nextId;
      inner.push(id);
      waits.push(new Promise((resolve) => this.waiting.set(id, (r) => resolve({ ...r, id: m.id } as JSONRPCMessage))));
      this.onmessage?.({ ...m, id }, extra);
    }
    const cancel = () => {
      // The client went away: tell the server, as a client would, and forget the waits.
      for (const id of inner) {
        if (!this.waiting.delete(id)) continue;
        this.onmessage?.({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'client disconnected' } }, extra);
      }
    };
    return { responses: Promise.all(waits), cancel };
  }
}

/** A JSON-RPC error answer with no id, as the SDK's HTTP transport sends for a refused POST. */
function rpcError(req: IncomingMessage, res: ServerResponse, reqId: string, status: number, code: number, message: string): void {
  afterParse(req, () => sendJson(res, status, { jsonrpc: '2.0', error: { code, message }, id: null }, bodyPending(req) ? { connection: 'close' } : {}, reqId));
}

/** The listener for MCP_PATH (served directly by the HTTP transport, not through express). */
export function mcpListener(deps: McpDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const mux = new HttpMux();
  void createServer(deps).connect(mux);
  return (req, res) => {
    void handle(deps, mux, req, res);
  };
}

async function handle(deps: McpDeps, mux: HttpMux, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const started = process.hrtime.bigint();
  const id = requestId(req);
  let scope: RequestScope | undefined;
  // x-request-id goes into each answer's own header list (a header set beforehand puts writeHead on its slow path).
  res.once('finish', () => {
    deps.requestLog.write({
      req_id: id,
      method: req.method,
      path: MCP_PATH,
      status: res.statusCode,
      transport: 'mcp',
      op: scope?.tools.length ? scope.tools.join(',') : undefined,
      actor: scope?.caller.tokenName,
      ms: Number(process.hrtime.bigint() - started) / 1e6,
    });
  });
  const fail = (err: unknown) => {
    const e = errorBody(err);
    // Answered before the body arrived (401, 405, a late body): close rather than read the rest.
    if (res.headersSent) res.end();
    else afterParse(req, () => sendJson(res, e.status, e.body, bodyPending(req) ? { ...e.headers, connection: 'close' } : e.headers, id));
  };

  // Headers read from the raw list: building `req.headers` costs more than the few this needs.
  const caller = deps.authenticate(header(req, 'authorization'));
  if (!caller) return fail(unauthorized());
  scope = { caller, id, tools: [] };
  if (req.method !== 'POST') {
    // Stateless: no standalone SSE stream (GET) and no session to end (DELETE).
    return fail(
      new ApiError(405, `${req.method} is not supported on ${MCP_PATH}: this server is stateless, send JSON-RPC messages with POST`, { Allow: 'POST' }),
    );
  }

  const accept = headerJoined(req, 'accept');
  if (!accept?.includes('application/json') || !accept.includes('text/event-stream')) {
    return rpcError(req, res, id, 406, -32000, 'Not Acceptable: Client must accept both application/json and text/event-stream');
  }
  if (!isJsonContentType(header(req, 'content-type') ?? null)) {
    return rpcError(req, res, id, 415, -32000, 'Unsupported Media Type: Content-Type must be application/json');
  }
  let raw: unknown;
  try {
    const body = await readBody(req);
    raw = JSON.parse(body.toString('utf8'));
  } catch (err) {
    if (err instanceof ApiError) return fail(err);
    return rpcError(req, res, id, 400, ErrorCode.ParseError, 'Parse error: Invalid JSON');
  }
  if (Array.isArray(raw) && raw.length > MAX_BATCH_SIZE) {
    return rpcError(req, res, id, 400, ErrorCode.InvalidRequest, `Invalid Request: Batch must not exceed ${MAX_BATCH_SIZE} messages`);
  }
  let messages: JSONRPCMessage[];
  if (isPlainRequest(raw)) messages = [raw];
  else {
    try {
      messages = (Array.isArray(raw) ? raw : [raw]).map((m) => JSONRPCMessageSchema.parse(m));
    } catch {
      return rpcError(req, res, id, 400, ErrorCode.ParseError, 'Parse error: Invalid JSON-RPC message');
    }
  }
  if (messages.some(isInitialize)) {
    if (messages.length > 1) return rpcError(req, res, id, 400, ErrorCode.InvalidRequest, 'Invalid Request: Only one initialization request is allowed');
  } else {
    const version = headerJoined(req, 'mcp-protocol-version');
    if (typeof version === 'string' && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
      return rpcError(
        req,
        res,
        id,
        400,
        -32000,
        `Bad Request: Unsupported protocol version: ${version} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`,
      );
    }
  }
  const plain = Array.isArray(raw) ? undefined : plainToolCall(messages[0]);
  if (plain) {
    scope.tools.push(plain.op.name);
    const r = await runTool(deps, plain.op, plain.args, caller, id);
    if (res.destroyed) return;
    // The response the SDK server sends for a request: result, jsonrpc, id.
    // An error result through the SDK's own schema, as its server does, so that its fields come in the same order.
    const result = r.ok ? toolResultJson(r.value) : JSON.stringify(CallToolResultSchema.parse(r.error));
    sendJsonText(res, 200, `{"result":${result},"jsonrpc":"2.0","id":${JSON.stringify(plain.id)}}`, {}, id);
    return;
  }
  const extra: MessageExtraInfo = { authInfo: { token: '', clientId: caller.tokenName, scopes: caller.scopes, extra: { scope } } };
  const { responses, cancel } = mux.exchange(messages, extra);
  if (!messages.some(isRequest)) {
    // Only notifications or responses: accepted, nothing to answer.
    res.writeHead(202, ['x-request-id', id]);
    res.end();
    return;
  }
  let answered = false;
  res.once('close', () => {
    if (!answered) cancel();
  });
  try {
    const out = await responses;
    answered = true;
    if (res.destroyed) return;
    sendJson(res, 200, out.length === 1 ? out[0] : out, {}, id);
  } catch (err) {
    deps.log.error({ req_id: id, err }, 'mcp request failed');
    fail(err);
  }
}
