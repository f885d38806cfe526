/**
 * Caddy's admin API over its unix socket. Caddy checks the Host header on a
 * unix socket and allows only an empty one. In 2.6 the ETag comes as a
 * trailer, so writes are serialised here rather than with If-Match.
 */
import http from 'node:http';
import { SerialQueue } from '../../lib/serial.js';
import { ConfigRefused } from '../driver.js';

export interface AdminReply {
  status: number;
  body: string;
}

export class CaddyAdmin {
  private readonly writes = new SerialQueue();

  constructor(readonly socket: string) {}

  request(method: string, path: string, body?: string, headers: Record<string, string> = {}, timeoutMs = 30_000): Promise<AdminReply> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          socketPath: this.socket,
          method,
          path,
          setHost: false,
          headers: { host: '', ...(body !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {}), ...headers },
          timeout: timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`caddy admin ${method} ${path} did not answer within ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  /**
   * Applies a whole configuration atomically (POST /load). Caddy keeps the
   * running configuration when it refuses the new one; that refusal is a
   * ConfigRefused with Caddy's reason. `force` reloads even an identical one
   * (certificate renewal).
   */
  load(config: unknown, force = false): Promise<void> {
    const text = JSON.stringify(config);
    return this.writes.run(async () => {
      const r = await this.request('POST', '/load', text, force ? { 'cache-control': 'must-revalidate' } : {});
      if (r.status === 200) return;
      let reason = r.body.trim();
      try {
        const j = JSON.parse(reason) as { error?: unknown };
        if (typeof j.error === 'string') reason = j.error;
      } catch {
        /* not JSON: keep the text */
      }
      if (r.status === 400) throw new ConfigRefused(reason);
      throw new Error(`caddy admin /load answered ${r.status}: ${reason}`);
    });
  }

  async getJson<T = unknown>(path: string): Promise<T> {
    const r = await this.request('GET', path, undefined, {}, 5000);
    if (r.status !== 200) throw new Error(`caddy admin GET ${path} answered ${r.status}: ${r.body.trim()}`);
    return JSON.parse(r.body) as T;
  }

  /** Whether the admin endpoint answers. */
  async ping(): Promise<boolean> {
    try {
      return (await this.request('GET', '/config/', undefined, {}, 1000)).status === 200;
    } catch {
      return false;
    }
  }
}
