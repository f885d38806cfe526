/** Test clients of the event stream: SSE over HTTP (or the admin socket) and WebSocket. */
import http from 'node:http';
import WebSocket from 'ws';

export interface Received {
  id?: string;
  event: { cursor: string; seq: number; type: string; resource: string; summary: string; data: Record<string, unknown>; [k: string]: unknown };
}

export class SseClient {
  readonly got: Received[] = [];
  status = 0;
  body = '';
  ended = false;
  private req?: http.ClientRequest;
  private buf = '';

  /** Opens `url` (http://host:port/path?query) or, with `socketPath`, that path on the admin socket. */
  static open(url: string, headers: Record<string, string> = {}, socketPath?: string): Promise<SseClient> {
    const c = new SseClient();
    return new Promise((resolve, reject) => {
      const u = new URL(url, 'http://localhost');
      const req = http.request(
        {
          socketPath,
          host: socketPath ? undefined : u.hostname,
          port: socketPath ? undefined : u.port,
          path: u.pathname + u.search,
          headers: { accept: 'text/event-stream', ...headers },
        },
        (res) => {
          c.status = res.statusCode ?? 0;
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            if (c.status !== 200) {
              c.body += chunk;
              return;
            }
            c.buf += chunk;
            for (let i = c.buf.indexOf('\n\n'); i !== -1; i = c.buf.indexOf('\n\n')) {
              const block = c.buf.slice(0, i);
              c.buf = c.buf.slice(i + 2);
              let id: string | undefined;
              let data: string | undefined;
              for (const line of block.split('\n')) {
                if (line.startsWith('id: ')) id = line.slice(4);
                else if (line.startsWith('data: ')) data = line.slice(6);
              }
              if (data !== undefined) c.got.push({ id, event: JSON.parse(data) });
            }
          });
          res.on('end', () => (c.ended = true));
          res.on('close', () => (c.ended = true));
          resolve(c);
        },
      );
      c.req = req;
      req.on('error', (e) => (c.status ? (c.ended = true) : reject(e)));
      req.end();
    });
  }

  /** The events of the log (not bookmarks or other control messages). */
  events(): Received['event'][] {
    return this.got.map((g) => g.event).filter((e) => !['bookmark', 'reset', 'lagged', 'closed'].includes(e.type));
  }

  lastId(): string | undefined {
    return this.got.at(-1)?.id;
  }

  close(): void {
    this.req?.destroy();
    this.ended = true;
  }
}

export class WsClient {
  readonly got: Received['event'][] = [];
  closed = false;
  constructor(readonly ws: WebSocket) {
    ws.on('message', (m) => this.got.push(JSON.parse(String(m))));
    ws.on('close', () => (this.closed = true));
  }

  /** Connects; resolves with the client once open, or rejects with the refused handshake's status and body. */
  static open(url: string, opts: { headers?: Record<string, string>; protocols?: string[] } = {}): Promise<WsClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, opts.protocols ?? [], { headers: opts.headers });
      const c = new WsClient(ws);
      ws.once('open', () => resolve(c));
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => reject(Object.assign(new Error(`handshake refused: ${res.statusCode}`), { status: res.statusCode, body })));
      });
      ws.once('error', (e) => reject(e));
    });
  }

  events(): Received['event'][] {
    return this.got.filter((e) => !['bookmark', 'reset', 'lagged', 'closed'].includes(e.type));
  }

  close(): void {
    this.ws.terminate();
  }
}
