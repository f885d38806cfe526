/** A Server-Sent Events reader over the admin socket (hostctl events --follow, task watch). */
import http from 'node:http';

export interface StreamEvent {
  cursor: string;
  seq: number;
  time: string;
  type: string;
  resource: string;
  summary: string;
  data: Record<string, unknown>;
  [k: string]: unknown;
}

export interface SseStream {
  /** Resolves when the stream has ended (the server closed it, or `close()`). */
  done: Promise<void>;
  close(): void;
}

/**
 * Opens `path` as SSE. Resolves once the daemon answered 200 (the stream is
 * open: every event from then on comes to `onEvent`); rejects with the
 * status and error of a refusal.
 */
export function openSse(socketPath: string, path: string, onEvent: (e: StreamEvent) => void): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    let ended!: () => void;
    const done = new Promise<void>((r) => (ended = r));
    const req = http.request({ socketPath, method: 'GET', path, headers: { accept: 'text/event-stream' } }, (res) => {
      res.setEncoding('utf8');
      if (res.statusCode !== 200) {
        let body = '';
        res.on('data', (c: string) => (body += c));
        res.on('end', () => {
          let msg = `status ${res.statusCode}`;
          try {
            msg = JSON.parse(body).error ?? msg;
          } catch {
            /* not JSON */
          }
          reject(Object.assign(new Error(msg), { status: res.statusCode }));
        });
        return;
      }
      let buf = '';
      res.on('data', (chunk: string) => {
        buf += chunk;
        for (let i = buf.indexOf('\n\n'); i !== -1; i = buf.indexOf('\n\n')) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          for (const line of block.split('\n')) if (line.startsWith('data: ')) onEvent(JSON.parse(line.slice(6)));
        }
      });
      res.on('close', () => ended());
      resolve({ done, close: () => req.destroy() });
    });
    req.on('error', (err) => {
      reject(err);
      ended();
    });
    req.end();
  });
}
