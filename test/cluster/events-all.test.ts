/**
 * `events_stream` with `members=all`, on two real daemons paired on
 * loopback: one connection to A carries A's and B's events, each member's in
 * its order, under one cursor that resumes both (as `cursor` and as
 * `Last-Event-ID`) exactly once; a member that stops shows as
 * `members.down` and its events follow from where they stopped when it is
 * back; the caller's scopes apply on B. The events are activity rows of
 * tokens made on each member (cheap, and each names its member).
 */
import { expect } from 'chai';
import net from 'node:net';
import { eventually, startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { SseClient, WsClient, type Received } from '../integration/events/stream-client.js';
import { joinToken, pair } from './util.js';

type Ev = Received['event'];

/** The members a cursor holds, with their seqs. */
function entries(cursor: string | undefined): Record<string, number> {
  if (!cursor) return {};
  const raw = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { m: Record<string, [string, number]> };
  return Object.fromEntries(Object.entries(raw.m).map(([k, v]) => [k, v[1]]));
}

describe('events_stream with members=all', function () {
  this.timeout(300_000);
  // A small reader queue: the slow-reader case overflows it with a few hundred events. Unsynced
  // writes: these tests are about the stream, not durability (no daemon is killed), and make many calls.
  // A long hold: how long a member's events may wait for another's backlog only matters when that one is slow
  // (a loaded machine), and the time order of a replay is asserted here.
  const env = { HOSTD_CLUSTER_PROBE_MS: '300', HOSTD_EVENTS_QUEUE_EVENTS: '64', HOSTD_STORE_SYNC: '0', HOSTD_EVENTS_MEMBERS_ALL_HOLD_MS: '60000' };
  let a: TestDaemon;
  let b: TestDaemon;
  let c: TestDaemon | undefined;
  let reader: string;
  const open: Array<{ close(): void }> = [];

  /** A members=all SSE stream from A, once its cursor holds both members (B's part is open). */
  async function stream(query: string, token: string, headers: Record<string, string> = {}): Promise<SseClient> {
    const s = await SseClient.open(a.url + `/api/v1/events/stream?members=all${query}`, { authorization: `Bearer ${token}`, ...headers });
    open.push(s);
    expect(s.status, s.body).to.equal(200);
    await eventually(() => s.got.some((g) => b.nodeId in entries(g.id) && a.nodeId in entries(g.id)), 60_000, "a cursor holding both members' positions");
    return s;
  }

  const ours = (evs: Ev[], prefix: string) => evs.filter((e) => e.type === 'activity' && e.resource.startsWith(`tokens/${prefix}`));

  before(async () => {
    a = await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'alpha' } });
    b = await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'bravo' } });
    await pair([a, b]);
    reader = await a.token('all-reader', ['system.read']);
    // The token reaches B by the cluster's token sync: B's part opens once it has.
    await eventually(
      async () => (await a.request('GET', `/api/v1/events?peer_id=${b.nodeId}&limit=1`, { token: reader })).status === 200,
      60_000,
      'the reader token known on B',
    );
  });
  afterEach(() => {
    for (const s of open.splice(0)) s.close();
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop(), c?.stop()]);
  });

  it("carries A's and B's events on one stream, each member's in its order, every cursor resuming both", async () => {
    const s = await stream('&types=activity', reader);
    const made = ['one-a1', 'one-b1', 'one-a2', 'one-b2'];
    for (const n of made) await (n.includes('-a') ? a : b).token(n, ['vm.read']);
    await eventually(() => made.every((n) => s.events().some((e) => e.resource === `tokens/${n}`)), 60_000, "both members' events on A's stream");
    const got = ours(s.events(), 'one-');
    expect(got.filter((e) => e.node_id === a.nodeId).map((e) => e.resource)).to.deep.equal(['tokens/one-a1', 'tokens/one-a2']);
    expect(got.filter((e) => e.node_id === b.nodeId).map((e) => e.resource)).to.deep.equal(['tokens/one-b1', 'tokens/one-b2']);
    // Each event's cursor is the combined one after it: its own member at its seq, the other member present.
    for (const e of got) {
      const c = entries(e.cursor);
      expect(c[e.node_id as string]).to.equal(e.seq);
      expect(Object.keys(c).sort()).to.deep.equal([a.nodeId, b.nodeId].sort());
    }
    // SSE's id is the same cursor.
    for (const g of s.got) expect(g.id).to.equal(g.event.cursor);
  });

  it('holds a position for a member that has sent no event yet: a resume gets its next event', async () => {
    // No activity on B since this stream opened: B's position comes from where its part started.
    const quiet = await SseClient.open(a.url + '/api/v1/events/stream?members=all&types=activity', { authorization: `Bearer ${reader}` });
    open.push(quiet);
    expect(quiet.status, quiet.body).to.equal(200);
    await a.token('quiet-a0', ['vm.read']);
    const cursor = (await eventually(() => quiet.events().find((e) => e.resource === 'tokens/quiet-a0'), 60_000, "A's event")).cursor;
    expect(Object.keys(entries(cursor)).sort()).to.deep.equal([a.nodeId, b.nodeId].sort());
    quiet.close();
    await b.token('quiet-b1', ['vm.read']);
    const resumed = await stream(`&types=activity&cursor=${cursor}`, reader);
    await eventually(() => resumed.events().some((e) => e.resource === 'tokens/quiet-b1'), 60_000, "B's event made between the two streams");
  });

  it('resumes from the combined cursor (argument, Last-Event-ID, WebSocket) with every later event of both members exactly once, in order', async () => {
    const first = await stream('&types=activity', reader);
    const before = ['res-a0', 'res-b0'];
    for (const n of before) await (n.includes('-a') ? a : b).token(n, ['vm.read']);
    await eventually(() => before.every((n) => first.events().some((e) => e.resource === `tokens/${n}`)), 60_000, 'the events before the disconnect');
    const cursor = first.lastId()!;
    first.close();
    const later = ['res-a1', 'res-b1', 'res-b2', 'res-a2', 'res-a3', 'res-b3'];
    for (const n of later) await (n.includes('-a') ? a : b).token(n, ['vm.read']);
    const check = (evs: Ev[]) => {
      const got = ours(evs, 'res-');
      // Exactly once: nothing before the cursor again, nothing twice.
      expect(got.map((e) => e.resource).sort()).to.deep.equal(later.map((n) => `tokens/${n}`).sort());
      for (const node of [a.nodeId, b.nodeId]) {
        const mine = got.filter((e) => e.node_id === node);
        expect(mine.map((e) => e.resource)).to.deep.equal(later.filter((n) => n.includes(node === a.nodeId ? '-a' : '-b')).map((n) => `tokens/${n}`));
        const seqs = mine.map((e) => e.seq);
        expect(seqs).to.deep.equal([...seqs].sort((x, y) => x - y));
      }
    };
    const done = (evs: () => Ev[]) =>
      eventually(() => later.every((n) => evs().some((e) => e.resource === `tokens/${n}`)), 60_000, 'every later event on the resumed stream');
    const byArg = await stream(`&types=activity&cursor=${cursor}`, reader);
    await done(() => byArg.events());
    check(byArg.events());
    const byHeader = await stream('&types=activity', reader, { 'last-event-id': cursor });
    await done(() => byHeader.events());
    check(byHeader.events());
    const ws = await WsClient.open(`${a.url.replace('http', 'ws')}/api/v1/events/stream?members=all&types=activity&cursor=${cursor}`, {
      protocols: [`bearer.${reader}`, 'hostd.events.v1'],
    });
    open.push(ws);
    await done(() => ws.events());
    check(ws.events());
  });

  it("replays both members' backlogs merged by time, each member's still in its order", async () => {
    const first = await stream('&types=activity', reader);
    await a.token('ord-a0', ['vm.read']);
    await b.token('ord-b0', ['vm.read']);
    await eventually(() => ['ord-a0', 'ord-b0'].every((n) => first.events().some((e) => e.resource === `tokens/${n}`)), 60_000, 'the events before');
    const cursor = first.lastId()!;
    first.close();
    // Made one after the other, alternating members: their times interleave.
    const later: string[] = [];
    for (let i = 1; i <= 6; i++) later.push(`ord-a${i}`, `ord-b${i}`);
    for (const n of later) await (n.includes('-a') ? a : b).token(n, ['vm.read']);
    const resumed = await stream(`&types=activity&cursor=${cursor}`, reader);
    await eventually(() => later.every((n) => resumed.events().some((e) => e.resource === `tokens/${n}`)), 60_000, 'every later event');
    const got = ours(resumed.events(), 'ord-');
    expect(got.map((e) => e.resource).sort()).to.deep.equal(later.map((n) => `tokens/${n}`).sort());
    const times = got.map((e) => Date.parse(e.time as string));
    expect(times, got.map((e) => `${e.resource} ${e.time}`).join(', ')).to.deep.equal([...times].sort((x, y) => x - y));
    for (const node of [a.nodeId, b.nodeId]) {
      const seqs = got.filter((e) => e.node_id === node).map((e) => e.seq);
      expect(seqs).to.deep.equal([...seqs].sort((x, y) => x - y));
    }
  });

  it('a WebSocket resuming far behind gets every event once (what waits for the handshake is bounded, then flushed)', async () => {
    const first = await stream('&types=activity', reader);
    await a.token('far-a0', ['vm.read']);
    const cursor = (await eventually(() => first.events().find((e) => e.resource === 'tokens/far-a0'), 60_000, "A's event")).cursor;
    first.close();
    // More refused calls (one activity row each) than the messages held before the handshake.
    const N = 200;
    for (let i = 0; i < N; i++) await a.admin.request('DELETE', `/api/v1/folders/f_far${i}`);
    const ws = await WsClient.open(`${a.url.replace('http', 'ws')}/api/v1/events/stream?members=all&types=activity&cursor=${cursor}`, {
      protocols: [`bearer.${reader}`, 'hostd.events.v1'],
    });
    open.push(ws);
    const far = () =>
      ws
        .events()
        .filter((e) => /^folders\/f_far\d+$/.test(e.resource))
        .map((e) => e.resource);
    await eventually(() => far().length >= N, 60_000, `the ${N} events on the WebSocket`);
    expect(far()).to.deep.equal(Array.from({ length: N }, (_, i) => `folders/f_far${i}`));
  });

  it('a member that stops shows as members.down, and its events follow from where they stopped when it is back', async () => {
    const s = await stream('&types=activity', reader);
    await b.token('down-b0', ['vm.read']);
    await eventually(() => s.events().some((e) => e.resource === 'tokens/down-b0'), 60_000, "B's event before it stops");
    const port = b.clusterListen.split(':')[1];
    const dir = b.dataDir;
    await b.stop();
    const down = await eventually(
      () => s.events().find((e) => e.type === 'members.down' && e.data.peer_id === b.nodeId),
      60_000,
      'members.down of B on the stream',
    );
    expect(down.data.stream).to.equal(true);
    // A's part goes on while B is down.
    await a.token('down-a1', ['vm.read']);
    await eventually(() => s.events().some((e) => e.resource === 'tokens/down-a1'), 60_000, "A's event while B is down");
    b = await startDaemon({ dataDir: dir, env: { ...env, HOSTD_NODE_NAME: 'bravo', HOSTD_CLUSTER_ADDR: `127.0.0.1:${port}` } });
    // Made at once after B is back, whether or not the stream has reopened B's part yet: none may be missed.
    const after = ['down-b1', 'down-b2'];
    for (const n of after) await b.token(n, ['vm.read']);
    await eventually(() => after.every((n) => s.events().some((e) => e.resource === `tokens/${n}`)), 60_000, "B's events after it is back");
    const ofB = ours(s.events(), 'down-b').map((e) => e.resource);
    expect(ofB).to.deep.equal(['tokens/down-b0', 'tokens/down-b1', 'tokens/down-b2']);
    const types = s
      .events()
      .filter((e) => e.data.stream === true)
      .map((e) => e.type);
    expect(types.slice(types.indexOf('members.down'))).to.include('members.up');
  });

  it("applies the caller's scopes on each member: a token without system.read sees neither member's activity", async () => {
    const vmOnly = await a.token('all-vm-only', ['vm.read']);
    await eventually(
      async () => (await a.request('GET', `/api/v1/events?peer_id=${b.nodeId}&limit=1`, { token: vmOnly })).status === 200,
      60_000,
      'the vm.read token known on B',
    );
    const full = await stream('', reader);
    const narrow = await stream('', vmOnly);
    const made = ['scope-a1', 'scope-b1'];
    for (const n of made) await (n.includes('-a') ? a : b).token(n, ['vm.read']);
    await eventually(() => made.every((n) => full.events().some((e) => e.resource === `tokens/${n}`)), 60_000, 'the events on the system.read stream');
    // The narrow stream's part on B is open (its cursor holds B), and it was sent none of the activity.
    expect(narrow.events().filter((e) => e.type === 'activity')).to.deep.equal([]);
    expect(narrow.events().filter((e) => e.node_id === b.nodeId && e.data.stream !== true)).to.deep.equal([]);
  });

  it('includes a member that joins while the stream is open', async () => {
    const s = await stream('&types=activity', reader);
    c = await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'charlie' } });
    const j = await c.admin.request('POST', '/admin/cluster/join', { address: a.clusterAddr, token: await joinToken(a) });
    expect(j.status, JSON.stringify(j.body)).to.equal(200);
    const joined = c;
    await eventually(() => s.got.some((g) => joined.nodeId in entries(g.id)), 60_000, "the joiner's position on the stream");
    await joined.token('late-c1', ['vm.read']);
    const e = await eventually(() => s.events().find((x) => x.resource === 'tokens/late-c1'), 60_000, "the joiner's event on the stream");
    expect(e.node_id).to.equal(joined.nodeId);
    expect(Object.keys(entries(e.cursor)).sort()).to.deep.equal([a.nodeId, b.nodeId, joined.nodeId].sort());
  });

  it('a reader that stops reading gets lagged, with the combined cursor, and is closed', async () => {
    // Sends its request and stops reading once the stream is open (its first bytes: B's part has announced where it starts).
    const u = new URL(a.url);
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      const sock = net.connect(Number(u.port), u.hostname, () =>
        sock.write(
          `GET /api/v1/events/stream?members=all&types=activity HTTP/1.1\r\nhost: ${u.host}\r\naccept: text/event-stream\r\nauthorization: Bearer ${reader}\r\n\r\n`,
        ),
      );
      sock.once('data', (first) => {
        sock.pause();
        sock.unshift(first);
        resolve(sock);
      });
      sock.once('error', reject);
    });
    open.push({ close: () => socket.destroy() });
    // Refused calls on A, each an activity row of about 5 KiB (the id fills the row's summary, target and
    // metadata to their limits): 900 of them, about 4.4 MB, far more than the socket's buffers and the queue
    // of 64. What fills the buffers is bytes: fewer, larger rows take a third of the calls that 1.7 KiB rows did.
    const id = 'f_' + 'x'.repeat(3000);
    let sent = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (sent < 900) {
          sent++;
          await a.admin.request('DELETE', `/api/v1/folders/${id}`);
        }
      }),
    );
    const text = await new Promise<string>((resolve) => {
      const chunks: Buffer[] = [];
      socket.on('data', (c) => chunks.push(c));
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
      socket.resume();
    });
    const last = JSON.parse((text.match(/^data: .*$/gm)?.at(-1) ?? 'data: {}').slice(6));
    expect(last.type).to.equal('lagged');
    // Every member's position (the joiner of the test before included): the reader resumes from it and loses nothing.
    expect(Object.keys(entries(last.cursor)).sort()).to.deep.equal([a.nodeId, b.nodeId, ...(c ? [c.nodeId] : [])].sort());
  });

  it('refuses what it cannot serve with a clear status', async () => {
    const none = await a.token('all-none', ['vm.manage']);
    const r403 = await SseClient.open(a.url + '/api/v1/events/stream?members=all', { authorization: `Bearer ${none}` });
    open.push(r403);
    expect(r403.status).to.equal(403);
    const both = await SseClient.open(a.url + `/api/v1/events/stream?members=all&peer_id=${b.nodeId}`, { authorization: `Bearer ${reader}` });
    open.push(both);
    expect(both.status).to.equal(400);
    expect(both.body).to.match(/peer_id.*members=all/);
    const bad = await SseClient.open(a.url + '/api/v1/events/stream?members=all&cursor=bm90LWEtY3Vyc29y', { authorization: `Bearer ${reader}` });
    open.push(bad);
    expect(bad.status).to.equal(400);
    // events_list has no members argument: pages are read per member with peer_id.
    const list = await a.request('GET', '/api/v1/events?members=all', { token: reader });
    expect(list.status).to.equal(400);
    expect(JSON.stringify(list.body)).to.include("unknown argument 'members'");
  });
});
