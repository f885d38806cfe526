/**
 * The event stream against a real daemon, over SSE and WebSocket: every
 * acknowledged mutation has its event; resuming from the last cursor seen
 * (Last-Event-ID, the cursor argument) after a disconnect, a restart or a
 * kill -9 delivers every later event exactly once, in order; what a token
 * sees is cut to its scopes; the per-token stream limit; the WebSocket
 * subprotocol auth; a token in the URL is refused.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { HOSTCTL, hostctl, startDaemon, eventually, tempDir, type TestDaemon } from '../../helpers/daemon.js';
import { SseClient, WsClient } from './stream-client.js';

const STREAM = '/api/v1/events/stream';

/** Mutations with a known order: each token created is one activity row, `tokens/<name>`. */
async function mutate(d: TestDaemon, prefix: string, n: number): Promise<string[]> {
  const names: string[] = [];
  for (let i = 0; i < n; i++) {
    const name = `${prefix}${i}`;
    await d.token(name, ['vm.read']);
    names.push(`tokens/${name}`);
  }
  return names;
}

const tokenEvents = (evs: Array<{ type: string; resource: string }>, prefix: string) =>
  evs.filter((e) => e.type === 'activity' && e.resource.startsWith(`tokens/${prefix}`)).map((e) => e.resource);

describe('event stream (integration)', function () {
  this.timeout(180_000);
  let d: TestDaemon;
  let reader: string;
  const clients: Array<{ close(): void }> = [];

  before(async () => {
    d = await startDaemon({ env: { HOSTD_EVENTS_BOOKMARK_MS: '200', HOSTD_EVENTS_MAX_STREAMS_PER_TOKEN: '3' } });
    reader = await d.token('reader', ['system.read']);
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.close();
  });

  it('SSE: a client that disconnects and comes back with Last-Event-ID gets every later event exactly once, in order', async () => {
    const a = await SseClient.open(d.url + STREAM, { authorization: `Bearer ${reader}` });
    clients.push(a);
    expect(a.status).to.equal(200);
    const first = await mutate(d, 'sse-a', 3);
    await eventually(() => tokenEvents(a.events(), 'sse-a').length === 3, 30_000, 'three events');
    expect(tokenEvents(a.events(), 'sse-a')).to.deep.equal(first);
    const last = a.got.filter((g) => g.event.type === 'activity').at(-1)!.id!;
    a.close();
    const missed = await mutate(d, 'sse-b', 4);
    const b = await SseClient.open(d.url + STREAM, { authorization: `Bearer ${reader}`, 'last-event-id': last });
    clients.push(b);
    const later = await mutate(d, 'sse-c', 2);
    await eventually(() => tokenEvents(b.events(), 'sse-c').length === 2, 30_000, 'the later events');
    const all = b
      .events()
      .filter((e) => e.type === 'activity')
      .map((e) => e.resource);
    expect(all).to.deep.equal([...missed, ...later]);
    // Seqs strictly increase and every id is the event's cursor.
    const seqs = b.events().map((e) => e.seq);
    expect(seqs).to.deep.equal([...seqs].sort((x, y) => x - y));
    expect(new Set(seqs).size).to.equal(seqs.length);
    for (const g of b.got) expect(g.id).to.equal(g.event.cursor);
  });

  it('WebSocket: the cursor argument resumes; the bearer subprotocol authenticates and hostd.events.v1 is selected', async () => {
    const page = await d.request('GET', '/api/v1/events?limit=1000', { token: reader });
    expect(page.status).to.equal(200);
    const cursor = page.body.next_cursor as string;
    const missed = await mutate(d, 'ws-a', 2);
    const ws = await WsClient.open(`${d.url.replace('http', 'ws')}${STREAM}?cursor=${cursor}`, { protocols: [`bearer.${reader}`, 'hostd.events.v1'] });
    clients.push(ws);
    expect(ws.ws.protocol).to.equal('hostd.events.v1');
    const live = await mutate(d, 'ws-b', 2);
    await eventually(() => tokenEvents(ws.events(), 'ws-b').length === 2, 30_000, 'the live events');
    expect(
      ws
        .events()
        .filter((e) => e.type === 'activity')
        .map((e) => e.resource),
    ).to.deep.equal([...missed, ...live]);
    // With the header instead, and no subprotocol offered, none is selected.
    const ws2 = await WsClient.open(`${d.url.replace('http', 'ws')}${STREAM}`, { headers: { authorization: `Bearer ${reader}` } });
    clients.push(ws2);
    expect(ws2.ws.protocol).to.equal('');
  });

  it('refuses a token in the URL (400), a missing token (401), and a token without any read scope (403)', async () => {
    const ws = d.url.replace('http', 'ws') + STREAM;
    for (const q of [`?token=${reader}`, `?access_token=${reader}`]) {
      const sse = await SseClient.open(d.url + STREAM + q);
      expect(sse.status, q).to.equal(400);
      await eventually(() => sse.body.includes('never goes in the URL'), 10_000, 'the 400 body');
      const err = await WsClient.open(ws + q).then(
        () => null,
        (e) => e,
      );
      expect(err.status, q).to.equal(400);
    }
    expect((await SseClient.open(d.url + STREAM)).status).to.equal(401);
    expect(
      (
        await WsClient.open(ws, { protocols: ['bearer.hostd_nope'] }).then(
          () => null,
          (e) => e,
        )
      ).status,
    ).to.equal(401);
    const writer = await d.token('writer-only', ['vm.manage']);
    expect((await SseClient.open(d.url + STREAM, { authorization: `Bearer ${writer}` })).status).to.equal(403);
    expect((await d.request('GET', '/api/v1/events', { token: writer })).status).to.equal(403);
    // A plain GET of the stream path is told how to stream.
    expect((await d.request('GET', STREAM, { token: reader })).status).to.equal(406);
  });

  it('a token sees only the events its scopes may read; bookmarks still move its cursor', async () => {
    const vmOnly = await d.token('vm-only', ['vm.read']);
    const c = await SseClient.open(d.url + STREAM, { authorization: `Bearer ${vmOnly}` });
    clients.push(c);
    await mutate(d, 'hidden', 2);
    const head = (await d.request('GET', '/api/v1/events?limit=1000&types=activity', { token: reader })).body;
    const top = Math.max(...(head.events as Array<{ seq: number }>).map((e) => e.seq));
    await eventually(() => c.got.some((g) => g.event.type === 'bookmark' && g.event.seq >= top), 30_000, 'a bookmark past the hidden events');
    expect(c.events()).to.deep.equal([]);
    const page = await d.request('GET', '/api/v1/events?limit=1000', { token: vmOnly });
    expect(page.body.events).to.deep.equal([]);
  });

  it('a token holds at most max_streams_per_token streams (429 naming the limit)', async () => {
    const t = await d.token('greedy', ['system.read']);
    for (let i = 0; i < 3; i++) {
      const c = await SseClient.open(d.url + STREAM, { authorization: `Bearer ${t}` });
      clients.push(c);
      expect(c.status).to.equal(200);
    }
    const over = await SseClient.open(d.url + STREAM, { authorization: `Bearer ${t}` });
    expect(over.status).to.equal(429);
    await eventually(() => over.body.includes('max_streams_per_token = 3'), 10_000, 'the 429 body');
    const wsOver = await WsClient.open(d.url.replace('http', 'ws') + STREAM, { protocols: [`bearer.${t}`, 'hostd.events.v1'] }).then(
      () => null,
      (e) => e,
    );
    expect(wsOver.status).to.equal(429);
    expect(wsOver.body).to.include('max_streams_per_token = 3');
  });

  it('revoking a token ends its open streams', async () => {
    const t = await d.token('revoked-soon', ['system.read']);
    const c = await SseClient.open(d.url + STREAM, { authorization: `Bearer ${t}` });
    clients.push(c);
    expect((await d.admin.request('DELETE', '/admin/tokens/revoked-soon')).status).to.equal(200);
    await eventually(() => c.ended, 10_000, 'the stream to end');
    expect(c.got.at(-1)!.event.type).to.equal('closed');
  });

  it('hostctl events prints a page and the cursor to go on from; --follow prints events as they come', async () => {
    const [name] = await mutate(d, 'cli-a', 1);
    const page = await hostctl(d.dataDir, ['events', '--json', '--types', 'activity', '--limit', '1000']);
    expect(page.code, page.stderr).to.equal(0);
    const listed = page.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(listed.map((e) => e.resource)).to.include(name);
    const cursor = /next cursor: (\S+)/.exec(page.stderr)![1];
    const follow = spawn(process.execPath, [HOSTCTL, '--data-dir', d.dataDir, 'events', '--follow', '--json', '--types', 'activity', '--cursor', cursor]);
    clients.push({ close: () => follow.kill() });
    let out = '';
    follow.stdout.on('data', (c) => (out += c));
    const later = await mutate(d, 'cli-b', 2);
    await eventually(() => later.every((r) => out.includes(`"resource":"${r}"`)), 30_000, 'hostctl events --follow to print the new events');
    const printed = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).resource);
    expect(printed).to.deep.equal(later);
  });

  it('events_list long-polls: it answers with the first event that comes', async () => {
    const cursor = (await d.request('GET', '/api/v1/events?limit=1000', { token: reader })).body.next_cursor;
    const pending = d.request('GET', `/api/v1/events?cursor=${cursor}&timeout_seconds=60&types=activity`, { token: reader });
    const [name] = await mutate(d, 'poll', 1);
    const r = await pending;
    expect(r.status).to.equal(200);
    expect(r.body.events.map((e: { resource: string }) => e.resource)).to.include(name);
  });
});

describe('event stream across restarts (integration)', function () {
  this.timeout(240_000);

  it('after a restart and after a kill -9, resuming from the last cursor delivers every later event exactly once, and an acknowledged mutation has its event', async () => {
    const dataDir = tempDir();
    let d = await startDaemon({ dataDir });
    const reader = await d.token('reader', ['system.read']);
    const before = await mutate(d, 'r-a', 2);
    const page = (await d.request('GET', '/api/v1/events?limit=1000&types=activity', { token: reader })).body;
    expect(tokenEvents(page.events, 'r-a')).to.deep.equal(before);
    const cursor = page.next_cursor as string;
    await d.stop();

    d = await startDaemon({ dataDir });
    const afterRestart = await mutate(d, 'r-b', 2);
    // Acknowledged, then the daemon is killed at once.
    const acked = await mutate(d, 'r-c', 1);
    await d.kill();

    d = await startDaemon({ dataDir });
    const afterKill = await mutate(d, 'r-d', 1);
    const c = await SseClient.open(d.url + STREAM + `?cursor=${cursor}&types=activity`, { authorization: `Bearer ${reader}` });
    try {
      await eventually(() => tokenEvents(c.events(), 'r-d').length === 1, 30_000, 'the events after the kill');
      const got = c
        .events()
        .map((e) => e.resource)
        .filter((r) => r.startsWith('tokens/r-'));
      expect(got).to.deep.equal([...afterRestart, ...acked, ...afterKill]);
      const seqs = c.events().map((e) => e.seq);
      expect(new Set(seqs).size).to.equal(seqs.length);
      expect(seqs).to.deep.equal([...seqs].sort((x, y) => x - y));
    } finally {
      c.close();
    }
  });
});
