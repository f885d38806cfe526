/**
 * mcp_overhead_ratio: p50 of a read-only tool call (folders_list) over MCP,
 * through the SDK's own client (Client + StreamableHTTPClientTransport), against
 * the same operation over the HTTP API (fetch GET /api/v1/folders), on the same
 * daemon with the same token. Calls are sequential, interleaved one by one
 * (the order rotating with each call) so that a change in machine load
 * during the run weighs on every path alike; each run's figure is the ratio
 * of the two paths' p50s over BENCH_CALLS calls each (300).
 * The printed figures are the median of 5 such runs (BENCH_RUNS), each on a
 * fresh daemon, with the spread (mcp_overhead_ratio_min, _max).
 *
 * Beside them, CPU time per call around each measured call: the daemon's for
 * each path (every thread's, from /proc in nanoseconds), and this process's
 * for each path (the load generator: fetch, or the SDK client). Sequential calls on a shared
 * machine swing in wall time; CPU per call says which side's work grew.
 *
 *   cpu_us_daemon_http, cpu_us_daemon_mcp, cpu_us_daemon_mcp_raw_post,
 *   cpu_us_client_http, cpu_us_client_mcp
 *
 * The daemon logs to a file, as in the api and cluster sections: parsing its
 * request lines in this process would add to the client's time of both paths.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { startDaemon } from '../helpers/daemon.js';
import { overRuns, pct, schedstat, settle } from './lib.js';

/** CPU nanoseconds of every thread of process `pid` so far; undefined without /proc. */
const cpuNs = (pid: number | undefined): number | undefined => schedstat(pid)?.ns;

export async function mcpOverhead(): Promise<void> {
  await overRuns(['mcp_overhead_ratio'], mcpRun);
}

/** One run: a fresh daemon and a fresh SDK client; the p50 of each path's interleaved calls. */
async function mcpRun(): Promise<Record<string, number>> {
  // Calls per path in a run (150 before, in 5 rounds of 30).
  const calls = Number(process.env.BENCH_CALLS ?? 300);
  const d = await startDaemon({ env: { HOSTD_LOG_LEVEL: 'info' }, logToFile: true });
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
    // Calls are interleaved one by one, in an order that rotates with each
    // call (HTTP, MCP, raw; MCP, raw, HTTP; ...), so that a change of load on
    // the shared machine, even within a second, weighs on every path alike.
    // (Before: 5 rounds of 30 calls per path, one path after the other; on a
    // loaded machine the ratio of one run then swung from 1.2 to 4.4.)
    const paths = { http: viaHttp, mcp: viaMcp, raw: viaRawMcp };
    const names = Object.keys(paths) as Array<keyof typeof paths>;
    const times = { http: [] as number[], mcp: [] as number[], raw: [] as number[] };
    // CPU nanoseconds per path: the daemon's (every thread, from /proc) and this process's, around each call.
    const spent = { http: { daemon: 0, client: 0 }, mcp: { daemon: 0, client: 0 }, raw: { daemon: 0, client: 0 } };
    let cpuKnown = true;
    for (let i = 0; i < calls; i++) {
      for (let j = 0; j < names.length; j++) {
        const path = names[(i + j) % names.length];
        const d0 = cpuNs(d.proc.pid);
        const c0 = process.cpuUsage();
        const t = process.hrtime.bigint();
        await paths[path]();
        times[path].push(Number(process.hrtime.bigint() - t) / 1e6);
        const c = process.cpuUsage(c0);
        const d1 = cpuNs(d.proc.pid);
        if (d0 === undefined || d1 === undefined) cpuKnown = false;
        else spent[path].daemon += d1 - d0;
        spent[path].client += (c.user + c.system) * 1000;
      }
    }
    const p50 = (xs: number[]) =>
      pct(
        [...xs].sort((a, b) => a - b),
        0.5,
      );
    const perCall = (ns: number) => ns / 1000 / calls;
    return {
      mcp_p50_ms: p50(times.mcp),
      http_p50_ms: p50(times.http),
      mcp_raw_post_p50_ms: p50(times.raw),
      mcp_overhead_ratio: p50(times.mcp) / p50(times.http),
      ...(cpuKnown
        ? {
            cpu_us_daemon_http: perCall(spent.http.daemon),
            cpu_us_daemon_mcp: perCall(spent.mcp.daemon),
            cpu_us_daemon_mcp_raw_post: perCall(spent.raw.daemon),
          }
        : {}),
      cpu_us_client_http: perCall(spent.http.client),
      cpu_us_client_mcp: perCall(spent.mcp.client),
    };
  } finally {
    await client.close().catch(() => undefined);
    await d.stop();
  }
}
