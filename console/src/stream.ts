/**
 * The event stream (/api/v1/events/stream, Server-Sent Events) read with
 * fetch, so that it carries the same headers as every console call (the
 * console header for the session cookie, or the pasted token); EventSource
 * can send neither. A dropped stream resumes after the last event it saw.
 */
import { currentAuth } from './api';

export interface StreamEvent {
  cursor: string;
  time: string;
  type: string;
  domain: string;
  resource: string;
  actor: string;
  summary: string;
  data: Record<string, unknown>;
}

/** Opens a stream of the events matching `query` (e.g. `types=activity`); answers a function that closes it. */
export function openStream(query: string, onEvent: (e: StreamEvent) => void, onProblem: (message: string) => void, onOpen: () => void = () => {}): () => void {
  const abort = new AbortController();
  let cursor: string | undefined;
  const run = async (): Promise<void> => {
    while (!abort.signal.aborted) {
      const headers: Record<string, string> = { accept: 'text/event-stream', 'x-hostd-console': '1' };
      const auth = currentAuth();
      if (auth?.kind === 'token') headers.authorization = `Bearer ${auth.token}`;
      const q = cursor ? `${query}&cursor=${encodeURIComponent(cursor)}` : query;
      try {
        const res = await fetch(`/api/v1/events/stream?${q}`, { headers, credentials: 'same-origin', signal: abort.signal, cache: 'no-store' });
        if (!res.ok || !res.body) {
          const body = await res.json().catch(() => ({}));
          onProblem(body.error ?? `the event stream answered ${res.status}`);
          return;
        }
        onOpen();
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let end: number;
          while ((end = buf.indexOf('\n\n')) !== -1) {
            const block = buf.slice(0, end);
            buf = buf.slice(end + 2);
            const data = block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
            if (!data) continue;
            const e = JSON.parse(data) as StreamEvent;
            if (e.cursor) cursor = e.cursor;
            onEvent(e);
          }
        }
      } catch {
        if (abort.signal.aborted) return;
      }
      // The server ended the stream (a restart, a reset): wait a moment, then resume after the last event.
      await new Promise((r) => setTimeout(r, 2000));
    }
  };
  void run();
  return () => abort.abort();
}
