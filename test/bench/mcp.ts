/**
 * mcp_overhead_ratio: p50 of a read-only tool call (folders_list) over MCP,
 * through the SDK's own client (Client + StreamableHTTPClientTransport), against
 * the same operation over the HTTP API (fetch GET /api/v1/folders), on the same
 * daemon with the same token. Calls are sequential; the two paths are measured
 * in alternating rounds so that a change in machine load during the run
 * weighs on both alike, and each run's figure is the median of its rounds' p50s.
 * The printed figures are the median of 5 such runs (BENCH_RUNS), each on a
 * fresh daemon, with the spread (mcp_overhead_ratio_min, _max).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { startDaemon } from '../helpers/daemon.js';
import { median, overRuns, p50Of, settle } from './lib.js';

export async function mcpOverhead(): Promise<void> {
  await overRuns(['mcp_overhead_ratio'], mcpRun);
}

/** One run: a fresh daemon and a fresh SDK client; the median of its rounds. */
async function mcpRun(): Promise<Record<string, number>> {
  // 150 calls a run (300 before, in a single run): five runs must fit the bench's budget.
  const calls = Number(process.env.BENCH_CALLS ?? 150);
  const rounds = 5;
  const d = await startDaemon({ env: { HOSTD_LOG_LEVEL: 'info' } });
  const token = await d.token('bench', ['files.read', 'files.manage']);
  for (const name of ['media', 'backups', 'projects']) {
    await d.request('POST', '/api/v1/folders', { token, body: { storage_id: 'default', name } });
  }
  await settle([d.proc.pid]);
  const client = new Client({ name: 'hostd-bench', version: '1.0.0' });
  const headers = { authorization: `Bearer ${token}` };
  const viaMcp = async () => {
    const r = await client.callTool({ name: 'folders_list', arguments: {} });
    if (r.isError || !(r.structuredContent as { folders?: unknown[] })?.folders?.length) {
      throw new Error(`folders_list over MCP failed: ${JSON.stringify(r.content)}`);
    }
  };
  const viaHttp = async () => {
    const r = await fetch(d.url + '/api/v1/folders', { headers });
    const body = (await r.json()) as { folders?: unknown[] };
    if (r.status !== 200 || !body.folders?.length) throw new Error(`GET /api/v1/folders answered ${r.status}`);
  };
  // Diagnostic: the same JSON-RPC tools/call POSTed by plain fetch, without the
  // SDK client, to tell the client's share from the server's.
  const rpcBody = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'folders_list', arguments: {} } });
  const rpcHeaders = {
    ...headers,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
  };
  const viaRawMcp = async () => {
    const r = await fetch(d.url + '/mcp', { method: 'POST', headers: rpcHeaders, body: rpcBody });
    const body = (await r.json()) as { result?: { isError?: boolean } };
    if (r.status !== 200 || !body.result || body.result.isError) throw new Error(`raw MCP POST answered ${r.status}`);
  };
  try {
    await client.connect(
      new StreamableHTTPClientTransport(new URL(d.url + '/mcp'), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    // Warm all paths (JIT, keep-alive connections) before measuring (150 each: five runs share the bench's budget).
    for (let i = 0; i < 150; i++) {
      await viaMcp();
      await viaHttp();
      await viaRawMcp();
    }
    const http: number[] = [];
    const mcp: number[] = [];
    const raw: number[] = [];
    for (let r = 0; r < rounds; r++) {
      http.push(await p50Of(Math.ceil(calls / rounds), viaHttp));
      mcp.push(await p50Of(Math.ceil(calls / rounds), viaMcp));
      raw.push(await p50Of(Math.ceil(calls / rounds), viaRawMcp));
    }
    return {
      mcp_p50_ms: median(mcp),
      http_p50_ms: median(http),
      mcp_raw_post_p50_ms: median(raw),
      mcp_overhead_ratio: median(mcp) / median(http),
    };
  } finally {
    await client.close().catch(() => undefined);
    await d.stop();
  }
}
