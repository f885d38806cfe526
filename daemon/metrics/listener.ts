/**
 * The token-less listener for scrapers that cannot send a token: GET /metrics
 * answers the daemon's and host's aggregates only (never a per-resource
 * series, whatever the scraper asks), every other path 404. Off unless
 * `metrics.listen` is set; loopback unless an address is given.
 */
import http from 'node:http';
import type { Logger } from 'pino';
import type { MetricsService } from './service.js';

export interface MetricsListener {
  /** host:port it is bound to (the real port when configured with port 0). */
  address: string;
  close(): Promise<void>;
}

export async function startListener(svc: MetricsService, at: { host: string; port: number }, log: Logger): Promise<MetricsListener> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const answer = (status: number, text: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', ...headers });
      res.end(req.method === 'HEAD' ? undefined : text);
    };
    if (path !== '/metrics') return answer(404, 'not found: this listener serves GET /metrics only\n');
    if (req.method !== 'GET' && req.method !== 'HEAD') return answer(405, 'method not allowed: GET /metrics only\n', { allow: 'GET, HEAD' });
    const accept = req.headers.accept ?? '';
    svc.expose(accept.includes('application/openmetrics-text') ? 'openmetrics' : 'prometheus', 'aggregates').then(
      (m) => answer(200, m.text, { 'content-type': m.content_type }),
      (err) => {
        log.error({ err }, 'metrics: the token-less listener could not render the exposition');
        answer(500, 'the exposition could not be rendered (see the daemon log)\n');
      },
    );
  });
  // A scraper never needs a slow request: a client that dribbles its headers is cut off.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(at.port, at.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const a = server.address() as { address: string; port: number };
  const address = `${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`;
  log.info({ address }, 'metrics: token-less listener (aggregates only)');
  return {
    address,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
