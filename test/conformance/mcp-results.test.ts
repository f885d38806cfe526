/**
 * Result schemas over MCP, through the SDK's own client against a real
 * daemon: a tool whose operation has a result schema lists it as its
 * outputSchema, its success result carries structuredContent that the
 * client validates against it, and its error result carries no
 * structuredContent (the client would check it against the schema and
 * throw) but the status in _meta. Every tool has one (the only operation
 * without a result schema, events_stream, is a stream and no tool).
 */
import { expect } from 'chai';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { getOperation, operations } from '../../api/registry/index.js';
import { STATUS_META } from '../../api/mcp/server.js';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';

describe('result schemas over MCP (SDK client)', function () {
  let d: TestDaemon;
  let client: Client;

  before(async function () {
    this.timeout(120_000);
    d = await startDaemon();
    const token = await d.token('mcp-results', ['system.read', 'files.read']);
    client = new Client({ name: 'hostd-results', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(d.url + '/mcp'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  });

  after(async function () {
    await client?.close().catch(() => undefined);
  });

  it("lists each tool's result schema as its outputSchema: every tool has one", async () => {
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect(byName.get('catalog_get')!.outputSchema).to.deep.equal(getOperation('catalog_get')!.result);
    expect(byName.get('folders_list')!.outputSchema).to.deep.equal(getOperation('folders_list')!.result);
    for (const t of tools) {
      expect(t.outputSchema, t.name).to.not.equal(undefined);
      expect(t.outputSchema, t.name).to.deep.equal(operations.find((o) => o.name === t.name)!.result);
    }
  });

  it('a success carries the answer as structuredContent, which the client validated against the outputSchema', async () => {
    const r = await client.callTool({ name: 'catalog_get', arguments: {} });
    expect(r.isError).to.not.equal(true);
    const body = r.structuredContent as { count: number; endpoints: unknown[] };
    expect(body.count).to.equal(operations.length);
    expect(body.endpoints).to.have.length(operations.length);
    expect(JSON.parse((r.content as Array<{ text: string }>)[0].text)).to.deep.equal(body);
  });

  it('an error of a tool with an outputSchema: isError, the error body as text, the status in _meta, no structuredContent', async () => {
    // The SDK client checks any structuredContent against the outputSchema, error results too: {error, status} would throw here.
    const r = await client.callTool({ name: 'catalog_get', arguments: { zz_unknown: 1 } });
    expect(r.isError).to.equal(true);
    expect(r).to.not.have.property('structuredContent');
    expect(JSON.parse((r.content as Array<{ text: string }>)[0].text)).to.deep.equal({ error: "unknown argument 'zz_unknown'" });
    expect(r._meta).to.deep.equal({ [STATUS_META]: 400 });
  });

  it('folders_list: its success validated against its outputSchema, its error without structuredContent and the status in _meta', async () => {
    const listed = await client.callTool({ name: 'folders_list', arguments: {} });
    expect(listed.isError).to.not.equal(true);
    expect(listed.structuredContent).to.deep.equal({ folders: [] });
    const r = await client.callTool({ name: 'folders_list', arguments: { zz_unknown: 1 } });
    expect(r.isError).to.equal(true);
    expect(r).to.not.have.property('structuredContent');
    expect(JSON.parse((r.content as Array<{ text: string }>)[0].text)).to.deep.equal({ error: "unknown argument 'zz_unknown'" });
    expect(r._meta).to.deep.equal({ [STATUS_META]: 400 });
  });
});
