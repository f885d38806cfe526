/**
 * Reading `<domain>.state` events (that type only) through `events_list` in the runtime
 * suites: a cursor taken before an action, then the events of one resource
 * after it, waited for by long polls (no sleeps).
 */
import { expect } from 'chai';
import type { TestDaemon } from './daemon.js';

export interface StateEvent {
  cursor: string;
  seq: number;
  type: string;
  resource: string;
  actor: string;
  summary: string;
  data: Record<string, unknown> & { state: string };
}

/** The cursor at the head of the log now: what happens after it is "after the action". */
export async function headCursor(d: TestDaemon, token: string): Promise<string> {
  let cursor = '';
  for (;;) {
    const r = await d.request('GET', `/api/v1/events?limit=1000${cursor ? `&cursor=${cursor}` : ''}`, { token });
    expect(r.status, r.text).to.equal(200);
    cursor = r.body.next_cursor;
    if (r.body.events.length < 1000) return cursor;
  }
}

/**
 * The `<domain>.state` events of `resource` after `cursor`, read until
 * `done(events)` holds (long polls of 5 s each, up to `ms` in all). Answers
 * them and the cursor after the last page read.
 */
export async function stateEventsUntil(
  d: TestDaemon,
  token: string,
  domain: string,
  resource: string,
  cursor: string,
  done: (events: StateEvent[]) => boolean,
  what: string,
  ms = 90_000,
): Promise<{ events: StateEvent[]; cursor: string }> {
  const events: StateEvent[] = [];
  const end = Date.now() + ms;
  for (;;) {
    if (done(events)) return { events, cursor };
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; got ${JSON.stringify(events.map((e) => e.data))}`);
    const r = await d.request('GET', `/api/v1/events?types=${domain}.state&resource=${encodeURIComponent(resource)}&cursor=${cursor}&timeout_seconds=5&limit=1000`, { token });
    expect(r.status, r.text).to.equal(200);
    for (const e of r.body.events as StateEvent[]) {
      expect(e.type, JSON.stringify(e)).to.equal(`${domain}.state`);
      events.push(e);
    }
    cursor = r.body.next_cursor;
  }
}

/** The states of `events`, in order. */
export const states = (events: StateEvent[]): string[] => events.map((e) => e.data.state);
