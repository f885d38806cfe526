/**
 * The MCP transport against a real daemon, through the SDK's own client
 * (Client + StreamableHTTPClientTransport): tool listing derived from the
 * registry and filtered by scope, read and mutating calls with their activity
 * rows, errors as tool results, protocol errors, 401/405/413 at the HTTP
 * level, and a call forwarded to a second node by peer_id.
 */
import { expect } from 'chai';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { operations, ALL_SCOPES, getOperation } from '../../api/registry/index.js';
import { eventually, hostctl, startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';

async function connect(d: TestDaemon, token: string): Promise<Client> {
  const client = new Client({ name: 'hostd-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(d.url + '/mcp'), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return client;
}

type ToolResult = Awaited<ReturnType<Client['callTool']>>;

function textJson(r: ToolResult): unknown {
  const content = r.content as Array<{ type: string; text: string }>;
  expect(content).to.have.length(1);
  expect(content[0].type).to.equal('text');
  return JSON.parse(content[0].text);
}

/** The call succeeded: structuredContent and the text carry the same JSON. */
function ok(r: ToolResult): any {
  expect(r.isError, JSON.stringify(r.content)).to.not.equal(true);
  expect(textJson(r)).to.deep.equal(r.structuredContent);
  return r.structuredContent;
}

/** The call failed as an operation: isError, the API's {"error"} body as text, and the status. */
/**
 * An error result of `tool`: the error body as text; the status in
 * `_meta["hostd/status"]`; `{error, status}` as structuredContent only where
 * the tool has no outputSchema (an error would not fit one).
 */
function failed(r: ToolResult, status: number, tool: string): string {
  expect(r.isError, JSON.stringify(r.content)).to.equal(true);
  const body = textJson(r) as { error: string };
  expect(Object.keys(body)).to.deep.equal(['error']);
  expect((r._meta as Record<string, unknown> | undefined)?.['hostd/status']).to.equal(status);
  if (getOperation(tool)!.result) expect(r.structuredContent).to.equal(undefined);
  else expect(r.structuredContent).to.deep.equal({ error: body.error, status });
  return body.error;
}

async function activity(d: TestDaemon, token: string): Promise<any[]> {
  const r = await d.request('GET', '/api/v1/activity?limit=200', { token });
  expect(r.status, r.text).to.equal(200);
  return r.body.events;
}

/** The activity rows written since `before` (rows are newest first). */
async function newRows(d: TestDaemon, token: string, before: any[]): Promise<any[]> {
  const seen = new Set(before.map((e) => e.id));
  return (await activity(d, token)).filter((e) => !seen.has(e.id));
}

describe('MCP transport', function () {
  let d: TestDaemon;
  let admin: string; // every scope
  let agent: string; // folders + system
  let reader: string; // files.read only
  let clients: Client[] = [];
  /** Operations this build serves, from the catalog. */
  let built: Set<string>;
  /** What MCP offers: the operations this build serves, but streams and text answers. */
  const servedOps = () => operations.filter((o) => built.has(o.name) && o.mcp);

  const client = async (token: string) => {
    const c = await connect(d, token);
    clients.push(c);
    return c;
  };

  before(async function () {
    d = await startDaemon();
    admin = await d.token('mcp-admin', [...ALL_SCOPES]);
    agent = await d.token('mcp-agent', ['files.read', 'files.manage', 'system.read']);
    reader = await d.token('mcp-reader', ['files.read']);
    // Every operation of the registry is served: the tools are the registry's MCP operations.
    built = new Set(operations.map((o) => o.name));
  });

  after(async function () {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    clients = [];
  });

  describe('tools/list', function () {
    it('offers every operation this build serves as a tool with its schema and annotations', async function () {
      const c = await client(admin);
      const { tools, nextCursor } = await c.listTools();
      expect(nextCursor).to.equal(undefined);
      expect(tools.map((t) => t.name)).to.deep.equal(servedOps().map((o) => o.name));
      expect(tools.length).to.be.greaterThan(15);
      const byName = new Map(tools.map((t) => [t.name, t]));
      for (const op of servedOps()) {
        const t = byName.get(op.name)!;
        expect(t, op.name).to.not.equal(undefined);
        // Names agent clients accept (some restrict tool names to this set and 64 characters).
        expect(t.name).to.match(/^[a-zA-Z0-9_-]{1,64}$/);
        expect(t.description, op.name).to.equal(op.summary);
        expect(t.inputSchema, op.name).to.deep.equal(op.schema);
        expect(t.annotations, op.name).to.deep.equal({
          readOnlyHint: op.readOnly,
          destructiveHint: op.destructive,
          idempotentHint: op.idempotent,
          openWorldHint: false,
        });
        if (!op.readOnly) expect(t.annotations!.destructiveHint, op.name).to.equal(op.hints.includes('DEL'));
        // Every tool's result schema (only events_stream, a stream and no tool, has none).
        expect(t.outputSchema, op.name).to.not.equal(undefined);
        expect(t.outputSchema, op.name).to.deep.equal(op.result);
      }
      // Path parameters are part of the input schema, e.g. folders_delete's folder_id.
      const del = byName.get('folders_delete')!;
      expect(del.inputSchema.required).to.include('folder_id');
      expect(del.annotations).to.include({ readOnlyHint: false, destructiveHint: true });
      expect(byName.get('folders_create')!.annotations).to.include({ readOnlyHint: false, destructiveHint: false, idempotentHint: false });
    });

    it('this build serves every operation of the registry, and MCP offers each (unbuilt ones are hidden: test/unit/mcp-tools.test.ts)', async () => {
      expect(operations.filter((o) => !built.has(o.name)).map((o) => o.name)).to.deep.equal([]);
      const names = (await (await client(admin)).listTools()).tools.map((t) => t.name);
      expect(names).to.have.length(operations.filter((o) => o.mcp).length);
      expect(names).to.include('events_list').and.not.include('events_stream');
    });

    it("lists only the tools the token's scopes allow", async function () {
      const expected = (scopes: string[]) =>
        servedOps()
          .filter((o) => o.scopes.every((s) => scopes.includes(s)))
          .map((o) => o.name);
      const agentTools = (await (await client(agent)).listTools()).tools.map((t) => t.name);
      expect(agentTools).to.deep.equal(expected(['files.read', 'files.manage', 'system.read']));
      expect(agentTools).to.include.members(['folders_list', 'folders_create', 'folders_delete', 'system_health', 'activity_list', 'catalog_get']);
      expect(agentTools).to.not.include('vms_create');

      const readerTools = (await (await client(reader)).listTools()).tools.map((t) => t.name);
      expect(readerTools).to.deep.equal(expected(['files.read']));
      expect(readerTools).to.include('folders_list');
      expect(readerTools).to.not.include.members(['folders_create', 'system_health']);
      // An operation that needs no scope is listed for every token.
      expect(readerTools).to.include('catalog_get');
    });

    it('reports hostd as the server, with the tools capability', async function () {
      const c = await client(reader);
      expect(c.getServerVersion()).to.include({ name: 'hostd' });
      expect(c.getServerCapabilities()?.tools).to.not.equal(undefined);
    });
  });

  describe('tools/call', function () {
    it('runs read tools with the same result as the HTTP API and writes no activity', async function () {
      const c = await client(agent);
      const before = await activity(d, admin);
      const folders = ok(await c.callTool({ name: 'folders_list', arguments: {} }));
      expect(folders).to.deep.equal((await d.request('GET', '/api/v1/folders', { token: agent })).body);
      // `arguments` may be left out: it means {}.
      expect(ok(await c.callTool({ name: 'folders_list' }))).to.deep.equal(folders);
      const health = ok(await c.callTool({ name: 'system_health' }));
      expect(health).to.be.an('object');
      const httpHealth = (await d.request('GET', '/api/v1/system/health', { token: agent })).body;
      expect(Object.keys(health).sort()).to.deep.equal(Object.keys(httpHealth).sort());
      expect(await newRows(d, admin, before)).to.deep.equal([]);
    });

    it('runs mutating tools and writes exactly one activity row each, transport mcp, actor the token name', async function () {
      const c = await client(agent);
      const before = await activity(d, admin);
      const created = ok(await c.callTool({ name: 'folders_create', arguments: { storage_id: 'default', name: 'mcp-made' } }));
      expect(created.folder).to.include({ name: 'mcp-made', storage_id: 'default' });
      const id = created.folder.folder_id as string;

      const listed = ok(await c.callTool({ name: 'folders_list' }));
      expect(listed.folders.map((f: any) => f.folder_id)).to.include(id);
      let rows = await newRows(d, admin, before);
      expect(rows).to.have.length(1);
      expect(rows[0]).to.include({ actor: 'mcp-agent', category: 'storage', severity: 'info' });
      expect(rows[0].metadata).to.include({ transport: 'mcp', operation: 'folders_create', status: 201 });

      ok(await c.callTool({ name: 'folders_delete', arguments: { folder_id: id } }));
      rows = await newRows(d, admin, before);
      expect(rows).to.have.length(2);
      expect(rows[0].actor).to.equal('mcp-agent');
      expect(rows[0].metadata).to.include({ transport: 'mcp', operation: 'folders_delete', status: 200 });
      expect((await d.request('GET', '/api/v1/folders', { token: agent })).body.folders.map((f: any) => f.folder_id)).to.not.include(id);
    });

    it('refuses a tool the token lacks the scope for with the 403 the HTTP API gives', async function () {
      const c = await client(reader);
      const before = await activity(d, admin);
      const args = { storage_id: 'default', name: 'not-allowed' };
      const msg = failed(await c.callTool({ name: 'folders_create', arguments: args }), 403, 'folders_create');
      const http = await d.request('POST', '/api/v1/folders', { token: reader, body: args });
      expect(http.status).to.equal(403);
      expect(msg).to.equal(http.body.error);
      expect(msg).to.match(/lacks scope 'files\.manage'/);
      // Hidden from the list, yet the name is the operation's: still a 403, not an unknown tool.
      expect((await c.listTools()).tools.map((t) => t.name)).to.not.include('folders_create');
      // A refused mutating call is still one row per call (one for MCP, one for the HTTP call above).
      const rows = await newRows(d, admin, before);
      expect(rows.map((r) => r.metadata.transport).sort()).to.deep.equal(['api', 'mcp']);
      const mcpRow = rows.find((r) => r.metadata.transport === 'mcp');
      expect(mcpRow).to.include({ actor: 'mcp-reader', severity: 'warning' });
      expect(mcpRow.metadata).to.include({ status: 403, operation: 'folders_create' });
      expect((await d.request('GET', '/api/v1/folders', { token: agent })).body.folders.map((f: any) => f.name)).to.not.include('not-allowed');
    });

    it('answers a bad argument with the 400 the HTTP API gives', async function () {
      const c = await client(agent);
      const wrongType = { storage_id: 'default', name: 42 };
      const msg = failed(await c.callTool({ name: 'folders_create', arguments: wrongType }), 400, 'folders_create');
      expect(msg).to.equal((await d.request('POST', '/api/v1/folders', { token: agent, body: wrongType })).body.error);

      const unknown = { storage_id: 'default', name: 'x', colour: 'red' };
      const msg2 = failed(await c.callTool({ name: 'folders_create', arguments: unknown }), 400, 'folders_create');
      expect(msg2).to.equal((await d.request('POST', '/api/v1/folders', { token: agent, body: unknown })).body.error);

      // Missing `arguments` is {}: the required ones are missing.
      const msg3 = failed(await c.callTool({ name: 'folders_create' }), 400, 'folders_create');
      expect(msg3).to.equal((await d.request('POST', '/api/v1/folders', { token: agent, body: {} })).body.error);

      // Read tools validate too (limit is 1-200).
      failed(await c.callTool({ name: 'activity_list', arguments: { limit: 0 } }), 400, 'activity_list');
    });

    it('answers a missing resource with its 404 and an unknown peer_id with 404', async function () {
      const c = await client(agent);
      const msg = failed(await c.callTool({ name: 'folders_delete', arguments: { folder_id: 'f_nothere000' } }), 404, 'folders_delete');
      expect(msg).to.equal((await d.request('DELETE', '/api/v1/folders/f_nothere000', { token: agent })).body.error);
      expect(failed(await c.callTool({ name: 'folders_list', arguments: { peer_id: 'no-such-node' } }), 404, 'folders_list')).to.equal(
        "peer 'no-such-node' not found",
      );
      // This node's own id runs locally.
      ok(await c.callTool({ name: 'folders_list', arguments: { peer_id: d.nodeId } }));
    });

    it('makes an unknown tool a JSON-RPC error, not a tool result', async function () {
      const c = await client(admin);
      let caught: unknown;
      try {
        await c.callTool({ name: 'no_such_tool', arguments: {} });
      } catch (err) {
        caught = err;
      }
      expect(caught).to.be.instanceOf(McpError);
      expect((caught as McpError).code).to.equal(ErrorCode.InvalidParams);
      expect((caught as McpError).message).to.include('Tool no_such_tool not found');
    });

    it('serves concurrent calls on one client', async function () {
      const c = await client(agent);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 ? c.callTool({ name: 'folders_list' }) : c.callTool({ name: 'system_health' }))),
      );
      for (const r of results) ok(r);
    });
  });

  describe('HTTP level', function () {
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    };
    const mcpHeaders = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

    it('rejects an unknown token with 401 through the SDK client', async function () {
      let caught: unknown;
      try {
        await connect(d, 'not-a-token');
      } catch (err) {
        caught = err;
      }
      expect(caught).to.be.instanceOf(StreamableHTTPError);
      expect((caught as StreamableHTTPError).code).to.equal(401);
    });

    it('answers no or unknown token with 401 {"error"} before reading any MCP message', async function () {
      for (const headers of [mcpHeaders, { ...mcpHeaders, authorization: 'Bearer nope' }, { ...mcpHeaders, authorization: 'Basic abc' }]) {
        const r = await d.request('POST', '/mcp', { headers, body: initialize });
        expect(r.status).to.equal(401);
        expect(r.body).to.deep.equal({ error: 'missing or unknown bearer token' });
        expect(r.headers['www-authenticate']).to.equal('Bearer realm="hostd"');
      }
      // Not even a malformed body is looked at.
      const r = await d.request('POST', '/mcp', { headers: mcpHeaders, rawBody: '{not json' });
      expect(r.status).to.equal(401);
    });

    it('answers GET and DELETE with 405 (stateless: no SSE stream, no session)', async function () {
      for (const method of ['GET', 'DELETE']) {
        const r = await d.request(method, '/mcp', { token: reader, headers: { accept: 'text/event-stream' } });
        expect(r.status, method).to.equal(405);
        expect(r.headers.allow).to.equal('POST');
        expect(r.body.error).to.be.a('string');
      }
    });

    it('answers a body over 1 MiB with 413 like the API', async function () {
      const big = JSON.stringify({ ...initialize, params: { ...initialize.params, pad: 'x'.repeat(1048576) } });
      const r = await d.request('POST', '/mcp', { token: reader, headers: mcpHeaders, rawBody: big });
      expect(r.status).to.equal(413);
      expect(r.body).to.deep.equal({ error: 'request body is over 1 MiB (1048576 bytes)' });
    });

    it('answers invalid JSON with a JSON-RPC parse error', async function () {
      const r = await d.request('POST', '/mcp', { token: reader, headers: mcpHeaders, rawBody: '{not json' });
      expect(r.status).to.equal(400);
      expect(r.body.error.code).to.equal(ErrorCode.ParseError);
    });

    it('keeps protocol errors JSON-RPC errors', async function () {
      const rpc = (body: unknown) => d.request('POST', '/mcp', { token: reader, headers: mcpHeaders, body });
      const unknownMethod = await rpc({ jsonrpc: '2.0', id: 7, method: 'resources/list', params: {} });
      expect(unknownMethod.body).to.deep.include({ id: 7 });
      expect(unknownMethod.body.error.code).to.equal(ErrorCode.MethodNotFound);
      const badArgs = await rpc({ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'folders_list', arguments: 'all' } });
      expect(badArgs.body.result).to.equal(undefined);
      expect(badArgs.body.error.code).to.be.a('number');
      const unknownTool = await rpc({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'nope' } });
      expect(unknownTool.body.error).to.deep.equal({ code: ErrorCode.InvalidParams, message: 'Tool nope not found' });
    });

    it('runs each call of a JSON-RPC batch, each with its own activity row', async function () {
      const before = await activity(d, admin);
      const r = await d.request('POST', '/mcp', {
        token: agent,
        headers: { ...mcpHeaders, 'x-request-id': 'batch-1' },
        body: [
          { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'folders_create', arguments: { storage_id: 'default', name: 'batch-a' } } },
          { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'folders_create', arguments: { storage_id: 'default', name: 'batch-b' } } },
        ],
      });
      expect(r.status).to.equal(200);
      expect(r.body.map((m: any) => m.id).sort()).to.deep.equal([1, 2]);
      for (const m of r.body) expect(m.result.isError).to.equal(undefined);
      const rows = await newRows(d, admin, before);
      expect(rows).to.have.length(2);
      expect(rows.map((x) => x.metadata.request_id).sort()).to.deep.equal(['batch-1', 'batch-1:1']);
      for (const row of rows) expect(row.metadata.transport).to.equal('mcp');
    });

    it('every answer carries its request id: a plain call, a batch (the SDK server), a notification (202), a refusal', async function () {
      const post = (body: unknown, token?: string) => d.request('POST', '/mcp', { token, headers: { ...mcpHeaders, 'x-request-id': 'rid-1' }, body });
      const plain = await post({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'folders_list', arguments: {} } }, reader);
      const batch = await post([{ jsonrpc: '2.0', id: 2, method: 'tools/list' }], reader);
      const note = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, reader);
      const refused = await post({ jsonrpc: '2.0', id: 3, method: 'tools/list' });
      expect([plain.status, batch.status, note.status, refused.status]).to.deep.equal([200, 200, 202, 401]);
      for (const r of [plain, batch, note, refused]) expect(r.headers['x-request-id']).to.equal('rid-1');
    });

    it('answers a plain JSON POST without a session (stateless)', async function () {
      const r = await d.request('POST', '/mcp', { token: reader, headers: mcpHeaders, body: initialize });
      expect(r.status).to.equal(200);
      expect(r.headers['mcp-session-id']).to.equal(undefined);
      expect(r.body.result.serverInfo.name).to.equal('hostd');
      // No initialize needed before a call on a fresh request.
      const call = await d.request('POST', '/mcp', {
        token: reader,
        headers: mcpHeaders,
        body: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'folders_list' } },
      });
      expect(call.status).to.equal(200);
      expect(call.body.result.structuredContent.folders).to.be.an('array');
    });

    it("refuses what the Streamable HTTP transport refuses, with the SDK transport's answers", async function () {
      const post = (headers: Record<string, string>, body: unknown) => d.request('POST', '/mcp', { token: reader, headers, body });
      const call = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'folders_list' } };
      const noSse = await post({ 'content-type': 'application/json', accept: 'application/json' }, call);
      expect([noSse.status, noSse.body]).to.deep.equal([
        406,
        { jsonrpc: '2.0', error: { code: -32000, message: 'Not Acceptable: Client must accept both application/json and text/event-stream' }, id: null },
      ]);
      const text = await d.request('POST', '/mcp', { token: reader, headers: { ...mcpHeaders, 'content-type': 'text/plain' }, rawBody: JSON.stringify(call) });
      expect([text.status, text.body.error.code]).to.deep.equal([415, -32000]);
      const shape = await post(mcpHeaders, { jsonrpc: '2.0', id: 4 });
      expect([shape.status, shape.body.error]).to.deep.equal([400, { code: -32700, message: 'Parse error: Invalid JSON-RPC message' }]);
      const twoInits = await post(mcpHeaders, [initialize, { ...initialize, id: 2 }]);
      expect([twoInits.status, twoInits.body.error.code]).to.deep.equal([400, -32600]);
      const version = await post({ ...mcpHeaders, 'mcp-protocol-version': '1999-01-01' }, call);
      expect(version.status).to.equal(400);
      expect(version.body.error.message).to.match(/^Bad Request: Unsupported protocol version: 1999-01-01/);
      const tooMany = await post(
        mcpHeaders,
        Array.from({ length: 101 }, (_, i) => ({ ...call, id: i + 10 })),
      );
      expect([tooMany.status, tooMany.body.error.code]).to.deep.equal([400, -32600]);
    });

    it('answers a plain tools/call (served without the SDK server) exactly as the SDK server answers the same call', async function () {
      const call = (id: number, params: Record<string, unknown>) => ({ jsonrpc: '2.0', id, method: 'tools/call', params });
      const post = (body: unknown) => d.request('POST', '/mcp', { token: reader, headers: mcpHeaders, body });
      for (const [params, sdkParams] of [
        // A success, an operation's error (403), and arguments dispatch refuses (400).
        [
          { name: 'folders_list', arguments: {} },
          { name: 'folders_list', arguments: {}, _meta: { progressToken: 5 } },
        ],
        [{ name: 'system_health' }, { name: 'system_health', _meta: {} }],
        [
          { name: 'folders_list', arguments: { nope: 1 } },
          { name: 'folders_list', arguments: { nope: 1 }, _meta: {} },
        ],
      ]) {
        // A lone plain call takes the daemon's own path; a batch of one, or a call with _meta, the SDK server's.
        const plain = await post(call(41, params));
        const batch = await post([call(41, params)]);
        const withMeta = await post(call(41, sdkParams));
        expect(plain.status).to.equal(200);
        expect(plain.text).to.equal(batch.text);
        expect(plain.text).to.equal(withMeta.text);
      }
    });

    it('answers notifications alone with 202 and no body', async function () {
      const r = await d.request('POST', '/mcp', { token: reader, headers: mcpHeaders, body: { jsonrpc: '2.0', method: 'notifications/initialized' } });
      expect([r.status, r.text]).to.deep.equal([202, '']);
    });

    it('keeps ids of concurrent clients apart: the same id from two POSTs gets each its own answer', async function () {
      const ask = (name: string) =>
        d.request('POST', '/mcp', { token: reader, headers: mcpHeaders, body: { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name } } });
      const [a, b] = await Promise.all([ask('folders_list'), ask('system_health')]);
      expect(a.body.id).to.equal(7);
      expect(b.body.id).to.equal(7);
      expect(a.body.result.structuredContent).to.have.property('folders');
      expect(b.body.result.isError).to.equal(true);
      expect(b.body.result._meta['hostd/status']).to.equal(403);
    });
  });
});

// ---------------------------------------------------------------------------

describe('MCP transport, forwarded to a second node', function () {
  let a: TestDaemon;
  let b: TestDaemon;
  let clients: Client[] = [];

  after(async function () {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    clients = [];
  });

  it('runs a tool on the node peer_id names, recorded there with transport cluster', async function () {
    const dirA = tempDir();
    const dirB = tempDir();
    // Cluster ports chosen by the system (127.0.0.1:0); the daemons say which.
    a = await startDaemon({ dataDir: dirA, env: { HOSTD_NODE_NAME: 'node-a' } });
    b = await startDaemon({ dataDir: dirB, env: { HOSTD_NODE_NAME: 'node-b' } });

    const init = await hostctl(dirA, ['cluster', 'init']);
    expect(init.code, init.stderr).to.equal(0);
    const jt = await hostctl(dirA, ['cluster', 'join-token']);
    expect(jt.code, jt.stderr).to.equal(0);
    const joinToken = jt.stdout.trim().split('\n').pop()!.trim();
    const join = await hostctl(dirB, ['cluster', 'join', a.clusterAddr, joinToken]);
    expect(join.code, join.stderr).to.equal(0);

    const token = await a.token('mcp-cluster', ['files.read', 'files.manage', 'system.read']);
    const tokenB = await b.token('observer', ['system.read']);
    await eventually(
      async () => {
        const r = await a.request('GET', '/api/v1/peers', { token });
        return r.status === 200 && JSON.stringify(r.body).includes(b.nodeId);
      },
      30_000,
      `node-a to list node-b (${b.nodeId}) as a peer`,
    );

    const c = await connect(a, token);
    clients.push(c);
    const beforeA = await activity(a, token);
    const beforeB = await activity(b, tokenB);

    const created = ok(await c.callTool({ name: 'folders_create', arguments: { storage_id: 'default', name: 'on-b', peer_id: b.nodeId } }));
    const id = created.folder.folder_id as string;
    // The folder is on b, not on a.
    const onB = ok(await c.callTool({ name: 'folders_list', arguments: { peer_id: b.nodeId } }));
    expect(onB.folders.map((f: any) => f.folder_id)).to.include(id);
    const onA = ok(await c.callTool({ name: 'folders_list' }));
    expect(onA.folders.map((f: any) => f.folder_id)).to.not.include(id);

    // One row, on the node that ran it, with transport cluster and the origin; none on a.
    // (Only this call's rows: membership may write rows of its own meanwhile.)
    const mine = (rows: any[]) => rows.filter((r) => r.metadata?.operation === 'folders_create');
    expect(mine(await newRows(a, token, beforeA))).to.deep.equal([]);
    const rowsB = mine(await newRows(b, tokenB, beforeB));
    expect(rowsB).to.have.length(1);
    expect(rowsB[0].actor).to.equal('mcp-cluster');
    expect(rowsB[0].metadata).to.include({ transport: 'cluster', operation: 'folders_create', origin: a.nodeId });

    // The peer's 4xx passes through as the tool's error.
    failed(await c.callTool({ name: 'folders_delete', arguments: { folder_id: 'f_nothere000', peer_id: b.nodeId } }), 404, 'folders_delete');
  });
});
