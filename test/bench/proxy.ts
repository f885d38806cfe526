/**
 * The proxy's figures (issue: reverse proxy on Caddy, item 9):
 *
 *   proxy_rps_ratio        requests/s straight to an upstream over requests/s through
 *                          hostd's Caddy (https, loopback, same run, alternating rounds)
 *   proxy_config_apply_ms  p50 from POST of a new entry until Caddy serves it
 *                          (baseline: caddy_load_ms, a bare POST /load of the same config)
 *   proxy_move_gap_ms      client-observed unavailability during a move between live nodes
 *                          (median of several moves; baseline: the client's request interval)
 *   proxy_takeover_gap_ms  holder killed until the client is answered again
 *                          (baseline: the cluster probe interval, the detection time's floor)
 *
 * The first two run on 127.0.0.1; the gaps run in network namespaces the
 * bench makes (test/helpers/proxy-lab.ts), with the client inside one, three
 * members (the code is shared with the cluster curve's move gap at 2, 4 and 8
 * members: proxy-gap.ts).
 */
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { startDaemon, eventually } from '../helpers/daemon.js';
import { proxyAvailability } from '../helpers/proxy-node.js';
import { GapCluster } from './proxy-gap.js';
import { load, median, pct, print, type LoadResult } from './lib.js';

async function freePort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const p = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return p;
}

function get(url: string, host: string, ca: Buffer): Promise<number> {
  return new Promise((resolve) => {
    const req = https.get(url, { ca, servername: host, headers: { host }, agent: false, timeout: 2000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

async function loopbackFigures(): Promise<void> {
  const body = JSON.stringify({ ok: true, pad: 'x'.repeat(200) });
  const upstream = http.createServer((_q, s) => {
    s.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    s.end(body);
  });
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
  const upPort = (upstream.address() as { port: number }).port;
  const listen = await freePort();
  // The upstream is on loopback, which the proxy's rules refuse unless the operator allows it.
  const d = await startDaemon({ logToFile: true, configYaml: 'proxy:\n  listen_host: "127.0.0.1"\n  allow_loopback_upstreams: true\n' });
  try {
    const token = await d.token('bench', ['proxy.read', 'proxy.manage']);
    const api = (m: string, p: string, b?: unknown) => d.request(m, `/api/v1${p}`, { token, body: b });
    for (const [m, p, b] of [
      ['PATCH', '/proxy', { enabled: true }],
      ['POST', '/proxy/domains', { name: 'bench.test', cert_source: 'internal' }],
    ] as const) {
      const r = await api(m, p, b);
      if (r.status >= 300) throw new Error(`${m} ${p}: ${r.status} ${r.text}`);
    }
    const e = await api('POST', '/proxy/domains/bench.test/entries', { subdomain: 'web', host: '127.0.0.1', port: upPort, listen_port: listen });
    if (e.status !== 201) throw new Error(`entry: ${e.status} ${e.text}`);
    const ca = Buffer.from((await api('GET', '/proxy/certs')).body.internal_ca.root_pem);
    const via = `https://127.0.0.1:${listen}/`;
    await eventually(async () => (await get(via, 'web.bench.test', ca)) === 200, 20_000, 'caddy serving');

    // Throughput, alternating rounds.
    const straight = `http://127.0.0.1:${upPort}/`;
    const proxied = { headers: { host: 'web.bench.test' } };
    await load(straight, { duration: 1 });
    await load(via, { ...proxied, duration: 1 });
    const a: LoadResult[] = [];
    const b: LoadResult[] = [];
    for (let i = 0; i < Number(process.env.BENCH_ROUNDS ?? 3); i++) {
      a.push(await load(straight, { duration: 3 }));
      b.push(await loadTls(via, 'web.bench.test'));
    }
    for (const r of b) if (r.errors || r.non2xx) throw new Error(`through caddy: ${r.errors} errors, ${r.non2xx} non-2xx`);
    const rs = median(a.map((r) => r.rps));
    const rp = median(b.map((r) => r.rps));
    print('proxy_upstream_rps', rs, 0);
    print('proxy_caddy_rps', rp, 0);
    print('proxy_rps_ratio', rs / rp);

    // Apply: a new entry through the API until Caddy serves it.
    const applies: number[] = [];
    for (let i = 0; i < 21; i++) {
      const name = `a${i}`;
      const t0 = process.hrtime.bigint();
      const r = await api('POST', '/proxy/domains/bench.test/entries', { subdomain: name, host: '127.0.0.1', port: upPort, listen_port: listen });
      if (r.status !== 201) throw new Error(`entry ${name}: ${r.status} ${r.text}`);
      while ((await get(via, `${name}.bench.test`, ca)) !== 200) await new Promise((res) => setTimeout(res, 1));
      applies.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    // Baseline: Caddy alone loading the same whole configuration.
    const loads: number[] = [];
    const sock = path.join(d.dataDir, 'proxy/run/caddy-admin.sock');
    const current = await adminGet(sock, '/config/');
    for (let i = 0; i < 11; i++) {
      // Caddy may reset the admin connection of a load while it restarts its admin endpoint (seen under load): time a new one.
      for (let attempt = 1; ; attempt++) {
        const t0 = process.hrtime.bigint();
        try {
          await adminPost(sock, '/load', current);
          loads.push(Number(process.hrtime.bigint() - t0) / 1e6);
          break;
        } catch (err) {
          if (attempt >= 3 || (err as NodeJS.ErrnoException).code !== 'ECONNRESET') throw err;
        }
      }
    }
    print(
      'proxy_config_apply_ms',
      pct(
        [...applies].sort((x, y) => x - y),
        0.5,
      ),
    );
    print(
      'caddy_load_ms',
      pct(
        [...loads].sort((x, y) => x - y),
        0.5,
      ),
    );
    print(
      'proxy_config_apply_ratio',
      pct(
        [...applies].sort((x, y) => x - y),
        0.5,
      ) /
        pct(
          [...loads].sort((x, y) => x - y),
          0.5,
        ),
    );
  } finally {
    await d.stop();
    upstream.close();
  }
}

async function loadTls(url: string, servername: string): Promise<LoadResult> {
  const autocannon = (await import('autocannon')).default;
  const r = await autocannon({ url, headers: { host: servername }, servername, duration: 3, connections: 10, pipelining: 1 } as never);
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors, non2xx: r.non2xx };
}

function adminReq(sock: string, method: string, p: string, body?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        socketPath: sock,
        method,
        path: p,
        setHost: false,
        headers: { host: '', 'cache-control': 'must-revalidate', ...(body ? { 'content-type': 'application/json' } : {}) },
      },
      (res) => {
        let t = '';
        res.on('data', (c) => (t += c));
        res.on('end', () => (res.statusCode === 200 ? resolve(t) : reject(new Error(`${p}: ${res.statusCode} ${t}`))));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
const adminGet = (sock: string, p: string) => adminReq(sock, 'GET', p);
const adminPost = (sock: string, p: string, body: string) => adminReq(sock, 'POST', p, body);

async function gapFigures(): Promise<void> {
  const g = await GapCluster.open(3, { probeMs: 500, intervalMs: 20 });
  try {
    await g.grow(3);
    const moves = await g.moves(6);
    const takeover = await g.takeover();
    await g.client?.stop();
    print('proxy_move_gap_ms', median(moves), 1);
    print('proxy_move_gap_max_ms', Math.max(...moves), 1);
    print('client_interval_ms', g.intervalMs, 0);
    print('proxy_takeover_gap_ms', takeover, 1);
    print('cluster_probe_ms', g.probeMs, 0);
  } finally {
    await g.close();
  }
}

export async function proxyBench(): Promise<void> {
  // What the proxy domain itself reports missing (caddy, setpriv, ip, arping), as host-status does.
  const missing = (await proxyAvailability()).filter((a) => !a.available);
  if (missing.length) throw new Error(`the proxy bench needs ${missing.map((a) => `${a.name} (${a.reason})`).join(', ')}`);
  await loopbackFigures();
  await gapFigures();
}
