/**
 * Faults, with three daemons each in its own network namespace on a bridge
 * (test/cluster/netns.ts). Clients run inside the namespaces (curl through
 * `ip netns exec`); pairing uses the admin sockets, which are files.
 *
 *  - a node cut off: forwarding to it gives 502 naming it within the
 *    deadline, /peers shows it unreachable, and it comes back;
 *  - the proxy lease across a partition: the minority side cannot take over,
 *    a takeover needs the holder unreachable, the majority side can, and no
 *    epoch ever has two holders.
 */
import { expect } from 'chai';
import { startDaemon, eventually, type TestDaemon } from '../helpers/daemon.js';
import { NetLab } from './netns.js';
import { pair } from './util.js';
import { requireOrSkip } from '../helpers/runtime-gate.js';

describe('cluster faults in network namespaces', function () {
  this.timeout(120_000);
  // Long enough that no call meant to succeed misses it on a loaded machine; the tests of the deadline wait it out.
  const deadlineMs = 10_000;
  let lab: NetLab;
  let nodes: TestDaemon[] = [];
  const tokens: string[] = [];

  before(async function () {
    // CI runs as root; a developer without root cannot make namespaces.
    requireOrSkip(this, 'cluster', (await NetLab.available()) ? null : 'network namespaces cannot be made here (needs root and ip netns)');
    lab = new NetLab(3);
    await lab.setup();
    nodes = await Promise.all(
      lab.nodes.map((n, i) =>
        startDaemon({
          netns: n.ns,
          env: {
            HOSTD_NODE_NAME: `ns-node-${i + 1}`,
            HOSTD_HTTP_ADDR: '127.0.0.1:0', // the namespace's own loopback
            HOSTD_CLUSTER_ADDR: `${n.addr}:7788`,
            HOSTD_FORWARD_DEADLINE_MS: String(deadlineMs),
            HOSTD_CLUSTER_PROBE_MS: '500',
          },
        }),
      ),
    );
    await pair(nodes);
    for (const [i, d] of nodes.entries())
      tokens[i] = await d.token(`ops-${i + 1}`, ['files.read', 'files.manage', 'system.read', 'proxy.read', 'proxy.manage']);
  });

  after(async () => {
    await Promise.all(nodes.map((d) => d.stop()));
    await lab?.cleanup();
  });

  const peerView = async (i: number, j: number) =>
    (await nodes[i].request('GET', '/api/v1/peers', { token: tokens[i] })).body.peers.find((p: any) => p.peer_id === nodes[j].nodeId);
  const proxyState = async (i: number) => (await nodes[i].request('GET', '/api/v1/proxy/config', { token: tokens[i] })).body;

  it('forwards between namespaces', async () => {
    expect(nodes[0].clusterAddr).to.equal(`${lab.nodes[0].addr}:7788`);
    const r = await nodes[0].request('POST', '/api/v1/folders', {
      token: tokens[0],
      body: { storage_id: 'default', name: 'in-ns3', peer_id: nodes[2].nodeId },
    });
    expect(r.status, r.text).to.equal(201);
  });

  it('a node cut off gives 502 naming it within the deadline, shows unreachable, and comes back', async () => {
    await lab.cut(2);
    try {
      const r = await nodes[0].request('GET', `/api/v1/folders?peer_id=${nodes[2].nodeId}`, { token: tokens[0] });
      expect(r.status, r.text).to.equal(502);
      // Ended by the deadline or by the connection's keepalive, which fires before it: the message says which.
      expect(r.body.error)
        .to.include('ns-node-3')
        .and.include(nodes[2].nodeId)
        .and.match(new RegExp(`did not answer within ${deadlineMs} ms|is unreachable`));
      await eventually(async () => (await peerView(0, 2))?.reachable === false, 5000, 'node 3 unreachable from node 1');
      expect((await peerView(0, 1)).reachable).to.equal(true);
    } finally {
      await lab.restore(2);
    }
    await eventually(async () => (await peerView(0, 2))?.reachable === true, 10_000, 'node 3 reachable again');
    await eventually(
      async () => (await nodes[0].request('GET', `/api/v1/folders?peer_id=${nodes[2].nodeId}`, { token: tokens[0] })).status === 200,
      10_000,
      'forwarding to node 3 again',
    );
  });

  it('proxy lease: only the majority side takes over, and no epoch has two holders', async () => {
    const seen = new Map<number, string>();
    const note = async () => {
      for (let i = 0; i < nodes.length; i++) {
        const s = await proxyState(i);
        if (s.holding_here) {
          const prev = seen.get(s.epoch);
          expect(prev === undefined || prev === nodes[i].nodeId, `two holders at epoch ${s.epoch}`).to.equal(true);
          seen.set(s.epoch, nodes[i].nodeId);
        }
      }
    };
    // After init node 1 holds.
    await eventually(async () => (await proxyState(2)).holder === nodes[0].nodeId, 5000, 'everyone knows node 1 holds');
    await note();

    // Node 3 alone (minority) cannot take over; node 2 cannot while node 1 is reachable.
    await lab.cut(2);
    try {
      const minority = await nodes[2].request('POST', '/api/v1/proxy/move', { token: tokens[2], body: {} });
      expect(minority.status, minority.text).to.be.oneOf([503, 409]);
      expect(minority.status).to.equal(503);
      const busy = await nodes[1].request('POST', '/api/v1/proxy/move', { token: tokens[1], body: {} });
      expect(busy.status, busy.text).to.equal(409);
      await note();
    } finally {
      await lab.restore(2);
    }
    await eventually(async () => (await peerView(0, 2))?.reachable === true, 10_000, 'node 3 back');

    // The holder (node 1) is cut off: node 2, on the majority side, takes over.
    await lab.cut(0);
    try {
      const take = await nodes[1].request('POST', '/api/v1/proxy/move', { token: tokens[1], body: {} });
      expect(take.status, take.text).to.equal(200);
      expect(take.body.holder).to.equal(nodes[1].nodeId);
      expect(take.body.holding).to.equal(true);
      await note();
      // Node 1, isolated, cannot take anything higher.
      const isolated = await nodes[0].request('POST', '/api/v1/proxy/move', { token: tokens[0], body: { peer_id: nodes[0].nodeId } });
      expect(isolated.status).to.equal(503);
      await note();
    } finally {
      await lab.restore(0);
    }
    // Node 1 learns of the higher epoch and stops holding.
    await eventually(
      async () => {
        const s = await proxyState(0);
        return s.holder === nodes[1].nodeId && !s.holding_here;
      },
      15_000,
      'node 1 steps down',
    );
    await note();
    expect([...seen.values()]).to.include(nodes[1].nodeId);
  });
});
