/**
 * Reading `<domain>.state` events as a client does: a cursor taken before an
 * action (the head of the log), then `events_list` long polls from it until
 * what the test waits for has come (a bound, never a sleep).
 */
import type { Reply } from './daemon.js';

export interface StateEvent {
  seq: number;
  type: string;
  resource: string;
  actor: string;
  data: Record<string, unknown> & { state: string };
}

type Req = (method: string, p: string) => Promise<Reply>;

/** The cursor at the head of the log now (every page read until an empty one). */
export async function headCursor(req: Req): Promise<string> {
  let cursor: string | undefined;
  for (;;) {
    const r = await req('GET', `/events?limit=1000${cursor ? `&cursor=${cursor}` : ''}`);
    if (r.status !== 200) throw new Error(`events_list: ${r.status} ${JSON.stringify(r.body)}`);
    cursor = r.body.next_cursor as string;
    if (!r.body.events.length) return cursor;
  }
}

/**
 * The `<domain>.state` events of `resource` after `cursor`, read until
 * `done(events)` holds (long polls of up to 5 s; fails after `ms`).
 */
export async function stateEventsUntil(req: Req, domain: string, resource: string, cursor: string, done: (evs: StateEvent[]) => boolean, ms = 90_000): Promise<StateEvent[]> {
  const out: StateEvent[] = [];
  const end = Date.now() + ms;
  let c = cursor;
  for (;;) {
    if (done(out)) return out;
    if (Date.now() > end) throw new Error(`timed out waiting for ${domain}.state events of ${resource}; got ${JSON.stringify(out.map((e) => [e.data.state, e.data]))}`);
    const r = await req('GET', `/events?cursor=${c}&types=${domain}.&resource=${encodeURIComponent(resource)}&timeout_seconds=5&limit=1000`);
    if (r.status !== 200) throw new Error(`events_list: ${r.status} ${JSON.stringify(r.body)}`);
    out.push(...(r.body.events as StateEvent[]));
    c = r.body.next_cursor;
  }
}

/** The events after `cursor` already written (one page, no waiting): what a test asserts nothing more came. */
export async function stateEventsNow(req: Req, domain: string, resource: string, cursor: string): Promise<StateEvent[]> {
  const r = await req('GET', `/events?cursor=${cursor}&types=${domain}.&resource=${encodeURIComponent(resource)}&limit=1000`);
  if (r.status !== 200) throw new Error(`events_list: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.events as StateEvent[];
}
