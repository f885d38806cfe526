/**
 * hostctl's client: the daemon's local admin socket (the administrator, no
 * token), or, given `--url` and `--token` (HOSTD_URL, HOSTD_TOKEN), any
 * member's API over HTTP(S) as that token, the way `incus remote` works.
 */
import http from 'node:http';
import https from 'node:https';
import { API_PREFIX } from '../../api/catalog.js';

/** A member's API reached over the network with a bearer token. */
export interface Remote {
  url: URL;
  token: string;
}

export interface Reply {
  status: number;
  body: any;
}

export class AdminClient {
  /**
   * `how`: how the socket was chosen, said when it cannot be reached.
   * `peerId`: every API call carries `peer_id` (runs on that member), as `--peer NODE` asks.
   */
  constructor(
    readonly socketPath: string,
    readonly how?: string,
    readonly remote?: Remote,
    readonly peerId?: string,
  ) {}

  /** The same client, each of whose API calls runs on member `peerId`. */
  onPeer(peerId: string): AdminClient {
    return new AdminClient(this.socketPath, this.how, this.remote, peerId);
  }

  request(method: string, path: string, body?: unknown): Promise<Reply> {
    if (this.peerId && path.startsWith(`${API_PREFIX}/`)) [path, body] = withPeer(this.peerId, method, path, body);
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string | number> = payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {};
    const r = this.remote;
    // Over the network the token goes in the Authorization header, never in the URL.
    if (r) headers.authorization = `Bearer ${r.token}`;
    const target = r
      ? {
          protocol: r.url.protocol,
          hostname: r.url.hostname,
          port: r.url.port || undefined,
          method,
          path: `${r.url.pathname.replace(/\/$/, '')}${path}`,
          headers,
        }
      : { socketPath: this.socketPath, method, path, headers };
    return new Promise((resolve, reject) => {
      const req = (r?.url.protocol === 'https:' ? https : http).request(target, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = text ? JSON.parse(text) : {};
          } catch {
            /* not JSON; keep text */
          }
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (r) reject(new Error(`cannot reach hostd at ${r.url.origin}: ${err.message}`));
        else if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') {
          const why = this.how ? ` (${this.how})` : '';
          reject(
            new Error(
              `cannot reach hostd at ${this.socketPath}${why}. Is the daemon running? Name its config with --config FILE or its data dir with --data-dir DIR`,
            ),
          );
        } else if (err.code === 'EACCES') {
          reject(new Error(`permission denied on ${this.socketPath}: run hostctl as the user that runs hostd`));
        } else reject(err);
      });
      if (payload) req.write(payload);
      req.end();
    });
  }
}

/** `peer_id` added where the API reads arguments: the query of a GET or DELETE, else the JSON body (unless the caller set it). */
function withPeer(peerId: string, method: string, path: string, body: unknown): [string, unknown] {
  if (method === 'GET' || method === 'DELETE') {
    const [p, q = ''] = path.split('?', 2);
    const query = new URLSearchParams(q);
    if (!query.has('peer_id')) query.set('peer_id', peerId);
    return [`${p}?${query}`, body];
  }
  const args = body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  return [path, 'peer_id' in args ? args : { ...args, peer_id: peerId }];
}
