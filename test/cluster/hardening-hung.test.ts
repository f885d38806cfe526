/**
 * Hardening item 8: a member that hangs (SIGSTOP: its sockets stay open, it
 * answers nothing). Two real daemons on loopback, the forward deadline at its
 * default of 10 s.
 *
 * - With the health probe at 500 ms: once the probe has seen the member
 *   unreachable, a forwarded call fails at once (the circuit is open), naming
 *   the member, instead of after the deadline; when the member continues, calls
 *   go through again.
 * - With the probe practically off (every 10 minutes): the keepalive ping
 *   finds the hung connection, so the first call fails before its deadline as
 *   unreachable (not "did not answer within"), and the second fails at once.
 */
import { expect } from 'chai';
import { startDaemon, eventually, type TestDaemon } from '../helpers/daemon.js';
import { pair, peersOf } from './util.js';

const DEADLINE_MS = 10_000;

describe('hardening: a hung member fails fast', function () {
  this.timeout(120_000);
  let nodes: TestDaemon[] = [];

  async function twoNodes(probeMs: number): Promise<{ a: TestDaemon; b: TestDaemon; token: string }> {
    const env = { HOSTD_FORWARD_DEADLINE_MS: String(DEADLINE_MS), HOSTD_CLUSTER_PROBE_MS: String(probeMs) };
    nodes = [await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'alpha' } }), await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'bravo' } })];
    await pair(nodes);
    const [a, b] = nodes;
    const token = await a.token('ops', ['files.read', 'system.read']);
    const ok = await a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token });
    expect(ok.status, ok.text).to.equal(200);
    return { a, b, token };
  }

  afterEach(async () => {
    for (const d of nodes) if (d.proc.exitCode === null) d.proc.kill('SIGCONT');
    await Promise.all(nodes.map((d) => d.stop()));
    nodes = [];
  });

  it('after the probe saw it unreachable, the next call fails in well under a second; it recovers on SIGCONT', async () => {
    const { a, b, token } = await twoNodes(500);
    b.proc.kill('SIGSTOP');
    await eventually(
      async () => (await peersOf(a, token)).find((p) => p.peer_id === b.nodeId)?.reachable === false,
      10_000,
      'the probe to see bravo unreachable',
    );
    const first = await a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token });
    expect(first.status, first.text).to.equal(502);
    const second = await a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token });
    expect(second.status, second.text).to.equal(502);
    // Refused by the open circuit without being sent (the message says so), rather than after the deadline.
    for (const r of [first, second]) {
      expect(r.body.error).to.include("peer 'bravo'").and.include(b.nodeId).and.include('health probe failed').and.include('the call was not sent');
    }
    b.proc.kill('SIGCONT');
    await eventually(
      async () => (await a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token })).status === 200,
      15_000,
      'forwarding to bravo again',
    );
  });

  it('without the probe, the keepalive ping finds the hung connection before the deadline; the next call fails at once', async () => {
    const { a, b, token } = await twoNodes(600_000);
    b.proc.kill('SIGSTOP');
    const first = await a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token });
    expect(first.status, first.text).to.equal(502);
    // The keepalive (2 s ping, 2 s timeout) ended the call, not its deadline: the message says which.
    expect(first.body.error).to.include('is unreachable').and.not.include('did not answer within');
    const second = await a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token });
    expect(second.status, second.text).to.equal(502);
    expect(second.body.error).to.include('the call was not sent');
    b.proc.kill('SIGCONT');
    // No probe runs: a trial call (half-open) finds it again.
    await eventually(
      async () => (await a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token })).status === 200,
      30_000,
      'forwarding to bravo again',
    );
  });
});
