/**
 * Reading `<domain>.state` events as a client does, in the runtime suites: a
 * cursor taken before an action (the head of the log), then `events_list`
 * long polls from it until what the test waits for has come (a bound, never
 * a sleep). A suite reads through a request function (`Req`) or a daemon and
 * its token (the multi-member suites, which read several daemons): both ways
 * run the same reader.
 */
import { expect } from 'chai';
import type { Reply, TestDaemon } from './daemon.js';

export interface StateEvent {
  cursor: string;
  seq: number;
  type: string;
  resource: string;
  actor: string;
  summary: string;
  data: Record<string, unknown> & { state: string };
}

export type Req = (method: string, p: string) => Promise<Reply>;

/** Reads as `token` on daemon `d`. */
export const readerOf =
  (d: TestDaemon, token: string): Req =>
  (method, p) =>
    d.request(method, `/api/v1${p}`, { token });

const asReq = (a: Req | TestDaemon, token?: string): Req => (typeof a === 'function' ? a : readerOf(a, token!));

/** The cursor at the head of the log now (pages read until a short one): what happens after it is "after the action". */
export async function headCursor(from: Req | TestDaemon, token?: string): Promise<string> {
  const req = asReq(from, token);
  let cursor = '';
  for (;;) {
    const r = await req('GET', `/events?limit=1000${cursor ? `&cursor=${cursor}` : ''}`);
    expect(r.status, `events_list: ${r.text}`).to.equal(200);
    cursor = r.body.next_cursor as string;
    if (r.body.events.length < 1000) return cursor;
  }
}

/** The `<domain>.state` events of `resource` after `cursor` until `done` holds (long polls of 5 s; fails after `ms`), and the cursor after them. */
async function readUntil(
  req: Req,
  domain: string,
  resource: string,
  cursor: string,
  done: (evs: StateEvent[]) => boolean,
  what: string,
  ms: number,
): Promise<{ events: StateEvent[]; cursor: string }> {
  const events: StateEvent[] = [];
  const end = Date.now() + ms;
  let c = cursor;
  for (;;) {
    if (done(events)) return { events, cursor: c };
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; got ${JSON.stringify(events.map((e) => e.data))}`);
    const r = await req('GET', `/events?cursor=${c}&types=${domain}.state&resource=${encodeURIComponent(resource)}&timeout_seconds=5&limit=1000`);
    expect(r.status, `events_list: ${r.text}`).to.equal(200);
    for (const e of r.body.events as StateEvent[]) {
      expect(e.type, JSON.stringify(e)).to.equal(`${domain}.state`);
      events.push(e);
    }
    c = r.body.next_cursor;
  }
}

/**
 * The `<domain>.state` events of `resource` after `cursor`, read until
 * `done(events)` holds. Through a request function: the events (fails after
 * `ms`). Through a daemon and token: the events and the cursor after the
 * last page read (fails after `ms`, naming `what`).
 */
export function stateEventsUntil(
  req: Req,
  domain: string,
  resource: string,
  cursor: string,
  done: (evs: StateEvent[]) => boolean,
  ms?: number,
): Promise<StateEvent[]>;
export function stateEventsUntil(
  d: TestDaemon,
  token: string,
  domain: string,
  resource: string,
  cursor: string,
  done: (evs: StateEvent[]) => boolean,
  what: string,
  ms?: number,
): Promise<{ events: StateEvent[]; cursor: string }>;
export async function stateEventsUntil(...a: unknown[]): Promise<StateEvent[] | { events: StateEvent[]; cursor: string }> {
  if (typeof a[0] === 'function') {
    const [req, domain, resource, cursor, done, ms] = a as [Req, string, string, string, (evs: StateEvent[]) => boolean, number | undefined];
    return (await readUntil(req, domain, resource, cursor, done, `${domain}.state events of ${resource}`, ms ?? 90_000)).events;
  }
  const [d, token, domain, resource, cursor, done, what, ms] = a as [
    TestDaemon,
    string,
    string,
    string,
    string,
    (evs: StateEvent[]) => boolean,
    string,
    number | undefined,
  ];
  return readUntil(readerOf(d, token), domain, resource, cursor, done, what, ms ?? 90_000);
}

/** The `<domain>.state` events after `cursor` already written (one page, no waiting): what a test asserts nothing more came. */
export async function stateEventsNow(req: Req, domain: string, resource: string, cursor: string): Promise<StateEvent[]> {
  const r = await req('GET', `/events?cursor=${cursor}&types=${domain}.state&resource=${encodeURIComponent(resource)}&limit=1000`);
  expect(r.status, `events_list: ${r.text}`).to.equal(200);
  return r.body.events as StateEvent[];
}

/** The states of `events`, in order. */
export const states = (events: StateEvent[]): string[] => events.map((e) => e.data.state);
