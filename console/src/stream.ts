/**
 * The event stream (/api/v1/events/stream, Server-Sent Events) read with
 * fetch, so that it carries the same headers as every console call (the
 * console header for the session cookie, or the pasted token); EventSource
 * can send neither. A dropped stream resumes after the last event it saw.
 * It follows the member chosen in the picker (`peer_id`), as the pages do.
 */
import { currentAuth, onMember } from './api';
import type { PublicEvent } from '../../daemon/events/types';

export type StreamEvent = PublicEvent;

/** Opens a stream of the events matching `query` (e.g. `types=activity`); answers a function that closes it. */
export function openStream(query: string, onEvent: (e: StreamEvent) => void, onProblem: (message: string) => void, onOpen: () => void = () => {}): () => void {
  const abort = new AbortController();
  let cursor: string | undefined;
  const [base] = onMember('GET', `/api/v1/events/stream?${query}`);
  const run = async (): Promise<void> => {
    while (!abort.signal.aborted) {
      const headers: Record<string, string> = { accept: 'text/event-stream', 'x-hostd-console': '1' };
      const auth = currentAuth();
      if (auth?.kind === 'token') headers.authorization = `Bearer ${auth.token}`;
      const url = cursor ? `${base}&cursor=${encodeURIComponent(cursor)}` : base;
      try {
        const res = await fetch(url, { headers, credentials: 'same-origin', signal: abort.signal, cache: 'no-store' });
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
            const data = block
              .split('\n')
              .filter((l) => l.startsWith('data: '))
              .map((l) => l.slice(6))
              .join('\n');
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

/**
 * A live page's start: the stream opens first and the page reads its state
 * once the stream is open (or has failed), so that a change in between is
 * either in what was read or re-read for. `live` says how the page is kept
 * current; the stream is closed again when the first read fails.
 */
export async function openThenRead(
  query: string,
  onEvent: (e: StreamEvent) => void,
  live: HTMLElement,
  read: () => Promise<void>,
  liveText: string,
): Promise<() => void> {
  let opened: () => void = () => {};
  const ready = new Promise<void>((r) => (opened = r));
  let stopped = false;
  const close = openStream(
    query,
    onEvent,
    (message) => {
      stopped = true;
      live.textContent = `Live updates stopped: ${message}`;
      opened();
    },
    () => opened(),
  );
  await ready;
  try {
    await read();
  } catch (err) {
    close();
    throw err;
  }
  if (!stopped) live.textContent = liveText;
  return close;
}
