/**
 * The MCP transport: MCP's Streamable HTTP at /mcp on the daemon's HTTP
 * listener, built on the official SDK's low-level `Server` and its
 * `WebStandardStreamableHTTPServerTransport` (the core of the SDK's Node
 * `StreamableHTTPServerTransport`, without that wrapper's Node <-> fetch
 * conversion layer), in stateless mode (a fresh server and transport per POST,
 * JSON responses, no sessions).
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
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import type { jsonSchemaValidator, JsonSchemaType, JsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import type { Dispatch } from '../dispatch.js';
import { getOperation } from '../registry/index.js';
import { ApiError, errorBody, unauthorized } from '../errors.js';
import { readBody } from '../http/body.js';
import { requestId, sendJson } from '../http/server.js';
import type { Caller } from '../../daemon/context.js';
import { toolsListFor } from './tools.js';

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
  const json = value ?? {};
  // structuredContent must be an object; every operation answers one, but a
  // non-object answer would still be carried (as `result`) rather than lost.
  const structured = typeof json === 'object' && !Array.isArray(json) ? (json as Record<string, unknown>) : { result: json };
  return { content: [{ type: 'text', text: JSON.stringify(json) }], structuredContent: structured };
}

/** The tool result of a failed operation: the HTTP API's `{"error"}` body as text, plus the status it would have had. */
export function toolError(err: unknown): CallToolResult {
  const e = errorBody(err);
  return {
    isError: true,
    content: [{ type: 'text', text: JSON.stringify(e.body) }],
    structuredContent: { error: e.body.error, status: e.status },
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

function createServer(deps: McpDeps, scope: RequestScope): Server {
  const server = new Server(
    { name: 'hostd', version: deps.version },
    { capabilities: { tools: { listChanged: false } }, jsonSchemaValidator: noValidator },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => toolsListFor(scope.caller.scopes));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const name = request.params.name;
    const op = getOperation(name);
    // An unknown tool is a protocol error; a known one the token may not use
    // is the operation's own 403, as on the HTTP API.
    if (!op) throw protocolError(ErrorCode.InvalidParams, `Tool ${name} not found`);
    // A batch may carry several calls; each gets its own request id.
    const callId = scope.tools.length ? `${scope.id}:${scope.tools.length}` : scope.id;
    scope.tools.push(name);
    try {
      const args = (request.params.arguments ?? {}) as Record<string, unknown>;
      return toolResult(await deps.dispatch.call(op, args, scope.caller, callId));
    } catch (err) {
      if (!(err instanceof ApiError) && errorBody(err).status >= 500) deps.log.error({ req_id: callId, err }, 'tool call failed');
      return toolError(err);
    }
  });
  return server;
}

/** The listener for MCP_PATH (served directly by the HTTP transport, not through express). */
export function mcpListener(deps: McpDeps): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    void handle(deps, req, res);
  };
}

async function handle(deps: McpDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const started = process.hrtime.bigint();
  const id = requestId(req);
  let scope: RequestScope | undefined;
  res.setHeader('x-request-id', id);
  res.once('finish', () => {
    deps.requestLog.write({
      req_id: id, method: req.method, path: MCP_PATH, status: res.statusCode, transport: 'mcp',
      op: scope?.tools.length ? scope.tools.join(',') : undefined, actor: scope?.caller.tokenName,
      ms: Number(process.hrtime.bigint() - started) / 1e6,
    });
  });
  const fail = (err: unknown) => {
    const e = errorBody(err);
    if (!res.headersSent) sendJson(res, e.status, e.body, e.headers);
    else res.end();
  };

  const caller = deps.authenticate(req.headers.authorization);
  if (!caller) return fail(unauthorized());
  scope = { caller, id, tools: [] };
  if (req.method !== 'POST') {
    // Stateless: no standalone SSE stream (GET) and no session to end (DELETE).
    return fail(new ApiError(405, `${req.method} is not supported on ${MCP_PATH}: this server is stateless, send JSON-RPC messages with POST`, { Allow: 'POST' }));
  }

  let message: unknown;
  try {
    const body = await readBody(req);
    message = JSON.parse(body.toString('utf8'));
  } catch (err) {
    if (err instanceof ApiError) return fail(err);
    sendJson(res, 400, { jsonrpc: '2.0', error: { code: ErrorCode.ParseError, message: 'Parse error: Invalid JSON' }, id: null });
    return;
  }

  const server = createServer(deps, scope);
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  let answered = false;
  // Closing aborts whatever the server still runs for this request; once it
  // has answered there is nothing left to abort, and the pair is garbage.
  res.once('close', () => {
    if (!answered) void server.close();
  });
  try {
    await server.connect(transport);
    const response = await transport.handleRequest(webRequest(req), { parsedBody: message });
    const text = response.body ? await response.text() : '';
    answered = true;
    const headers: Record<string, string> = {};
    response.headers.forEach((v, k) => {
      headers[k] = v;
    });
    if (text) headers['content-length'] = String(Buffer.byteLength(text));
    res.writeHead(response.status, headers);
    res.end(text);
  } catch (err) {
    deps.log.error({ req_id: id, err }, 'mcp request failed');
    fail(err);
  }
}

/**
 * What the SDK transport reads of a request: method, URL and headers (see
 * WebStandardStreamableHTTPServerTransport.handleRequest); the body was read
 * and parsed under hostd's own limit and is handed over as `parsedBody`. A
 * plain object rather than a fetch `Request`, whose construction (URL parsing,
 * an AbortSignal per request) costs as much again as the transport's own work
 * (the SDK version is pinned, and the tests exercise this path). The
 * bearer token, already checked, is not passed on.
 */
function webRequest(req: IncomingMessage): Request {
  const headers = new Headers();
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    if (name.length === 13 && name.toLowerCase() === 'authorization') continue;
    headers.append(name, raw[i + 1]);
  }
  const light = { method: 'POST', url: `http://${req.headers.host ?? 'localhost'}${MCP_PATH}`, headers, body: null };
  return light as unknown as Request;
}
