/**
 * The event stream in a cluster of two real daemons: a member that stops
 * shows as `members.down` in the other's stream, and `members.up` when it is
 * back; `events_list` and `events_stream` with `peer_id` read that member's
 * events, under the caller's scopes there.
 */
import { expect } from 'chai';
import { eventually, startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { SseClient, WsClient } from '../integration/events/stream-client.js';
import { pair } from './util.js';

describe('events in a cluster', function () {
  this.timeout(300_000);
  const env = { HOSTD_CLUSTER_PROBE_MS: '300' };
  let a: TestDaemon;
  let b: TestDaemon;

  before(async () => {
    a = await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'alpha' } });
    b = await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'bravo' } });
    await pair([a, b]);
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it('a member that stops shows as members.down, and members.up when it is back', async () => {
    const reader = await a.token('cluster-reader', ['system.read']);
    const stream = await SseClient.open(a.url + '/api/v1/events/stream?types=members.', { authorization: `Bearer ${reader}` });
    try {
      expect(stream.status).to.equal(200);
      const port = b.clusterListen.split(':')[1];
      const dir = b.dataDir;
      await b.stop();
      await eventually(() => stream.events().some((e) => e.type === 'members.down' && e.data.peer_id === b.nodeId), 60_000, 'members.down of B');
      b = await startDaemon({ dataDir: dir, env: { ...env, HOSTD_NODE_NAME: 'bravo', HOSTD_CLUSTER_ADDR: `127.0.0.1:${port}` } });
      const ofB = () =>
        stream
          .events()
          .filter((e) => e.data.peer_id === b.nodeId)
          .map((e) => e.type);
      // The up after the down (the pairing's own up may come first, from just before the stream opened).
      await eventually(() => ofB().lastIndexOf('members.up') > ofB().indexOf('members.down'), 60_000, 'members.up of B after its down');
      // Reachability is what the probes see: on a loaded machine a probe may time out once more, so only the order is held.
      const seq = ofB();
      expect(seq.slice(seq.indexOf('members.down'))).to.include('members.up');
      // The page of the same events holds the stream's, in the same order.
      const page = await a.request('GET', '/api/v1/events?types=members.&limit=1000', { token: reader });
      const paged = page.body.events.filter((e: { data: { peer_id: string } }) => e.data.peer_id === b.nodeId).map((e: { seq: number }) => e.seq);
      const streamed = stream
        .events()
        .filter((e) => e.data.peer_id === b.nodeId)
        .map((e) => e.seq);
      expect(paged.slice(paged.indexOf(streamed[0]), paged.indexOf(streamed[0]) + streamed.length)).to.deep.equal(streamed);
    } finally {
      stream.close();
    }
  });

  it("events_list with peer_id answers that member's events, under the caller's scopes there", async () => {
    const reader = await a.token('peer-reader', ['system.read']);
    const vmOnly = await a.token('peer-vm-only', ['vm.read']);
    // The tokens reach B by the cluster's token sync: forwarding works once they have.
    const r = await eventually(
      async () => {
        const x = await a.request('GET', `/api/v1/events?peer_id=${b.nodeId}&limit=1000`, { token: reader });
        return x.status === 200 ? x : undefined;
      },
      60_000,
      'a forwarded events_list',
    );
    expect(r.body.events.length).to.be.greaterThan(0);
    expect(r.body.events.every((e: { node_id: string }) => e.node_id === b.nodeId)).to.equal(true);
    const hidden = await a.request('GET', `/api/v1/events?peer_id=${b.nodeId}&limit=1000`, { token: vmOnly });
    expect(hidden.status).to.equal(200);
    expect(hidden.body.events).to.deep.equal([]);
  });

  it("events_stream with peer_id streams that member's events, under the caller's scopes there, and resumes from its cursor", async () => {
    const reader = await a.token('stream-reader', ['system.read']);
    const vmOnly = await a.token('stream-vm-only', ['vm.read']);
    const first = await eventually(
      async () => {
        const x = await a.request('GET', `/api/v1/events?peer_id=${b.nodeId}&limit=1000`, { token: reader });
        return x.status === 200 ? x : undefined;
      },
      60_000,
      'a forwarded events_list',
    );
    const cursor = first.body.next_cursor as string;
    const s = await SseClient.open(a.url + `/api/v1/events/stream?peer_id=${b.nodeId}&cursor=${cursor}&types=activity`, { authorization: `Bearer ${reader}` });
    const hidden = await SseClient.open(a.url + `/api/v1/events/stream?peer_id=${b.nodeId}&types=activity`, { authorization: `Bearer ${vmOnly}` });
    try {
      expect(s.status).to.equal(200);
      expect(hidden.status).to.equal(200);
      // Activity on B: tokens made there.
      const made = ['on-b-1', 'on-b-2'];
      for (const n of made) await b.token(n, ['vm.read']);
      await eventually(() => made.every((n) => s.events().some((e) => e.resource === `tokens/${n}`)), 60_000, "B's events through A");
      expect(s.events().every((e) => e.node_id === b.nodeId)).to.equal(true);
      expect(
        s
          .events()
          .filter((e) => e.resource.startsWith('tokens/on-b-'))
          .map((e) => e.resource),
      ).to.deep.equal(made.map((n) => `tokens/${n}`));
      expect(hidden.events()).to.deep.equal([]);
      // The same over a WebSocket.
      const ws = await WsClient.open(`${a.url.replace('http', 'ws')}/api/v1/events/stream?peer_id=${b.nodeId}&cursor=${cursor}&types=activity`, {
        protocols: [`bearer.${reader}`, 'hostd.events.v1'],
      });
      try {
        await eventually(() => made.every((n) => ws.events().some((e) => e.resource === `tokens/${n}`)), 60_000, "B's events through A over a WebSocket");
        expect(
          ws
            .events()
            .filter((e) => e.resource.startsWith('tokens/on-b-'))
            .map((e) => e.resource),
        ).to.deep.equal(made.map((n) => `tokens/${n}`));
      } finally {
        ws.close();
      }
      // The member logged the stream as one forwarded over the cluster.
      // (The member's log arrives through a pipe: wait for the line rather than read it at once.)
      await eventually(
        () => b.logs.some((l) => l.msg === 'forwarded event stream opened' && l.transport === 'cluster'),
        30_000,
        "the member's log line of the forwarded stream",
      );
      // A refusal on the member comes back as its status: a token with no read scope.
      const none = await a.token('stream-none', ['vm.manage']);
      expect((await SseClient.open(a.url + `/api/v1/events/stream?peer_id=${b.nodeId}`, { authorization: `Bearer ${none}` })).status).to.equal(403);
    } finally {
      s.close();
      hidden.close();
    }
  });
});
