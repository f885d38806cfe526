/**
 * hostctl's client for the daemon's local admin socket.
 */
import http from 'node:http';

export interface Reply {
  status: number;
  body: any;
}

export class AdminClient {
  /** `how`: how the socket was chosen, said when it cannot be reached. */
  constructor(readonly socketPath: string, readonly how?: string) {}

  request(method: string, path: string, body?: unknown): Promise<Reply> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          socketPath: this.socketPath,
          method,
          path,
          headers: payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {},
        },
        (res) => {
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
        },
      );
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') {
          const why = this.how ? ` (${this.how})` : '';
          reject(new Error(`cannot reach hostd at ${this.socketPath}${why}. Is the daemon running? Name its config with --config FILE or its data dir with --data-dir DIR`));
        } else if (err.code === 'EACCES') {
          reject(new Error(`permission denied on ${this.socketPath}: run hostctl as the user that runs hostd`));
        } else reject(err);
      });
      if (payload) req.write(payload);
      req.end();
    });
  }
}
