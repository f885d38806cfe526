/**
 * The forwarding stream (CallStream): one long-lived bidirectional stream per
 * pair of members carries every forwarded call.
 *
 *  - in process (a ClusterServer and a PeerClients on loopback, handlers
 *    stubbed): membership re-checked on every batch, per-call deadlines, a
 *    stream cut mid-call, long results split over frames, late replies;
 *  - with real daemons: a frame the token directory does not back is refused
 *    alone, a removed member's open stream is cut, a member that stops
 *    answering gives 502 at the deadline and the stream carries on, a member
 *    that dies mid-call gives 502 naming it at once.
 */
import { expect } from 'chai';
import pino from 'pino';
import { createCa, fingerprint, generateKeyPair, issueNodeCert } from '../../certs/pki.js';
import { ClusterServer, type ClusterHandlers } from '../../cluster/server.js';
import { PeerClients } from '../../cluster/client.js';
import { CHUNK_BYTES } from '../../cluster/call-stream.js';
import type { Member } from '../../cluster/membership.js';
import type * as W from '../../cluster/proto.js';
import { startDaemon, eventually, type TestDaemon } from '../helpers/daemon.js';
import { grpc, hostctl, joinToken, pair, pemOf, rawClient, rawStream } from './util.js';

describe('CallStream in process', function () {
  this.timeout(30_000);
  const ca = createCa('cl_stream_test');
  const mk = (id: string) => {
    const k = generateKeyPair();
    return { certPem: issueNodeCert(ca, k.publicKeyPem, id), keyPem: k.privateKeyPem };
  };
  const origin = mk('node_origin');
  const member = mk('node_member');
  const originMember: Member = { peer_id: 'node_origin', name: 'origin', address: '', fingerprint: fingerprint(origin.certPem), joined_at: '' };
  let members = new Map<string, Member>();
  let run: (f: W.CallFrame, peer: Member) => Promise<W.CallOutcome>;
  let ran: string[] = [];
  let server: ClusterServer;
  let clients: PeerClients;
  let target: Member;

  const nop = async (): Promise<any> => ({});
  const handlers: ClusterHandlers = {
    rpcCall: (f, peer) => {
      ran.push(f.operation);
      return run(f, peer);
    },
    rpcHealth: nop,
    rpcJoin: nop,
    rpcMembership: nop,
    rpcTokenDirectory: nop,
    rpcTokenDirectoryGet: nop,
    rpcLease: nop,
    rpcProxyConfig: nop,
    rpcEventStream: async () => () => undefined,
  };
  const echo = async (f: W.CallFrame, peer: Member): Promise<W.CallOutcome> => ({
    ok: true,
    result_json: JSON.stringify({ op: f.operation, args: JSON.parse(f.args_json), by: peer.peer_id }),
    status: 200,
    error: '',
  });
  const req = (operation: string, args: unknown = {}) => ({
    operation,
    args_json: JSON.stringify(args),
    caller: { token_id: 'tok_1', token_name: 'ops', scopes: ['files.read'] },
    origin: 'node_origin',
    request_id: 'req_1',
  });

  beforeEach(async () => {
    members = new Map([[originMember.fingerprint, originMember]]);
    run = echo;
    ran = [];
    server = new ClusterServer(handlers, (fp) => members.get(fp), pino({ level: 'silent' }));
    server.setCredentials({ caCertPem: ca.certPem, ...member });
    const at = await server.listen('127.0.0.1', 0);
    target = { peer_id: 'node_member', name: 'member', address: `127.0.0.1:${at.port}`, fingerprint: fingerprint(member.certPem), joined_at: '' };
    clients = new PeerClients(() => ({ caCertPem: ca.certPem, ...origin }));
  });

  afterEach(async () => {
    clients.close();
    await server.close();
  });

  it('multiplexes concurrent calls over one stream; results come back by id', async () => {
    const outs = await Promise.all(Array.from({ length: 50 }, (_, i) => clients.call(target, req(`op_${i}`, { i }), 5000)));
    outs.forEach((o, i) => {
      expect(o.ok).to.equal(true);
      expect(JSON.parse(o.result_json)).to.deep.equal({ op: `op_${i}`, args: { i }, by: 'node_origin' });
    });
    expect(ran).to.have.length(50);
  });

  it('splits a long result over frames and puts it back together, other calls interleaved', async () => {
    const big = 'x'.repeat(3 * CHUNK_BYTES + 1234) + 'é€😀';
    run = async (f, peer) => (f.operation === 'big' ? { ok: true, result_json: JSON.stringify({ big }), status: 200, error: '' } : echo(f, peer));
    const [b, ...small] = await Promise.all([
      clients.call(target, req('big'), 5000),
      ...Array.from({ length: 5 }, (_, i) => clients.call(target, req(`s${i}`), 5000)),
    ]);
    expect(JSON.parse(b.result_json).big).to.equal(big);
    small.forEach((o, i) => expect(JSON.parse(o.result_json).op).to.equal(`s${i}`));
  });

  it('a very long result does not hold up the short replies that follow it', async () => {
    const huge = 'y'.repeat(64 * CHUNK_BYTES);
    let hugeSent!: () => void;
    const started = new Promise<void>((r) => (hugeSent = r));
    run = async (f, peer) => {
      if (f.operation !== 'huge') return echo(f, peer);
      setImmediate(hugeSent);
      return { ok: true, result_json: JSON.stringify({ huge }), status: 200, error: '' };
    };
    const order: string[] = [];
    const h = clients.call(target, req('huge'), 20_000).then((o) => {
      order.push('huge');
      return o;
    });
    await started;
    const s = await clients.call(target, req('short'), 20_000);
    order.push('short');
    expect(JSON.parse(s.result_json).op).to.equal('short');
    expect(JSON.parse((await h).result_json).huge.length).to.equal(huge.length);
    expect(order).to.deep.equal(['short', 'huge']);
  });

  it('a member error status passes through per call', async () => {
    run = async (f, peer) => (f.operation === 'bad' ? { ok: false, result_json: '', status: 409, error: 'taken' } : echo(f, peer));
    const [bad, good] = await Promise.all([clients.call(target, req('bad'), 5000), clients.call(target, req('good'), 5000)]);
    expect(bad).to.include({ ok: false, status: 409, error: 'taken' });
    expect(good.ok).to.equal(true);
  });

  it('a call past its deadline fails alone; its late reply is dropped and the stream carries on', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let lateAnswered!: () => void;
    const late = new Promise<void>((r) => (lateAnswered = r));
    run = async (f, peer) => {
      if (f.operation !== 'slow') return echo(f, peer);
      await held;
      const out = await echo(f, peer);
      lateAnswered();
      return out;
    };
    const t0 = Date.now();
    const slow = clients.call(target, req('slow'), 300).catch((e) => e);
    const fast = await clients.call(target, req('fast'), 5000);
    expect(fast.ok).to.equal(true);
    const err = await slow;
    // It failed at its deadline (not before), while its handler was still held.
    expect(err.code).to.equal(grpc.status.DEADLINE_EXCEEDED);
    expect(Date.now() - t0).to.be.at.least(250);
    release();
    // The late reply is queued on the stream before the next call is read, so it reaches the client first and is dropped there.
    await late;
    const again = await clients.call(target, req('after'), 5000);
    expect(JSON.parse(again.result_json).op).to.equal('after');
  });

  it('a stream cut mid-call fails the calls in flight at once; the next call opens a new stream', async () => {
    run = () => new Promise(() => undefined); // never answers
    const pending = Promise.all([1, 2, 3].map((i) => clients.call(target, req(`p${i}`), 10_000).catch((e) => e)));
    await eventually(() => ran.length === 3, 5000, 'calls reached the member');
    server.dropFingerprint(originMember.fingerprint);
    // UNAVAILABLE from the cut, not DEADLINE_EXCEEDED at their 10 s deadline.
    for (const e of await pending) expect(e.code).to.equal(grpc.status.UNAVAILABLE);
    run = echo;
    const next = await eventually(() => clients.call(target, req('next'), 2000).catch(() => undefined), 5000, 'a new stream');
    expect(JSON.parse(next.result_json).op).to.equal('next');
  });

  it('checks the membership on every batch: a member removed while its stream is open is cut before its next frame runs', async () => {
    const s = rawStream(rawClient(target.address, ca.certPem, origin));
    s.send([{ id: 1, ...req('before') }]);
    expect((await s.replies([1])).get(1)!.ok).to.equal(true);
    // Removed from the member list, connection still open (no dropFingerprint).
    members.delete(originMember.fingerprint);
    s.send([{ id: 2, ...req('after-removal') }]);
    const err = await s.ended;
    expect(err?.code).to.equal(grpc.status.PERMISSION_DENIED);
    expect(ran).to.deep.equal(['before']);
  });

  it('the same certificate now naming another member is cut too', async () => {
    const s = rawStream(rawClient(target.address, ca.certPem, origin));
    s.send([{ id: 1, ...req('before') }]);
    await s.replies([1]);
    members.set(originMember.fingerprint, { ...originMember, peer_id: 'node_someone_else' });
    s.send([{ id: 2, ...req('after') }]);
    expect((await s.ended)?.code).to.equal(grpc.status.PERMISSION_DENIED);
    expect(ran).to.deep.equal(['before']);
  });

  it('a stream without a member certificate is refused when it opens', async () => {
    const s = rawStream(rawClient(target.address, ca.certPem, null));
    s.send([{ id: 1, ...req('x') }]);
    expect((await s.ended)?.code).to.equal(grpc.status.UNAUTHENTICATED);
    expect(ran).to.deep.equal([]);
  });
});

describe('CallStream between daemons', function () {
  this.timeout(120_000);
  // Below the keepalive's detection (a 2 s ping, a 2 s timeout), so that a member that stops answering is ended by the deadline.
  const deadlineMs = 1500;
  const env = { HOSTD_FORWARD_DEADLINE_MS: String(deadlineMs), HOSTD_CLUSTER_PROBE_MS: '500' };
  let a: TestDaemon;
  let b: TestDaemon;
  let token: string;

  before(async () => {
    [a, b] = await Promise.all([startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'stream-a' } }), startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'stream-b' } })]);
    await pair([a, b]);
    token = await a.token('ops', ['files.read', 'files.manage']);
  });

  after(async () => {
    if (b?.proc.exitCode === null && b.proc.signalCode === null) b.proc.kill('SIGCONT');
    await Promise.all([a, b].map((d) => d?.stop()));
  });

  const fwd = () => a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token });

  it('carries many concurrent forwarded calls', async () => {
    const rs = await Promise.all(Array.from({ length: 40 }, () => fwd()));
    for (const r of rs) expect(r.status, r.text).to.equal(200);
  });

  it('a frame claiming a token or scopes the directory does not back gets 403; the other frames of the batch run', async () => {
    const reader = await a.token('reader', ['files.read']);
    const id = (await a.admin.request('GET', '/admin/tokens')).body.tokens.find((t: any) => t.name === 'reader').id;
    expect((await a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token: reader })).status).to.equal(200); // B knows the token
    const frame = (n: number, over: Record<string, unknown> = {}) => ({
      id: n,
      operation: 'folders_list',
      args_json: '{}',
      caller: { token_id: id, token_name: 'reader', scopes: ['files.read'] },
      origin: a.nodeId,
      request_id: `frame-${n}`,
      ...over,
    });
    const s = rawStream(rawClient(b.clusterAddr, pemOf(a).caCertPem, pemOf(a)));
    try {
      s.send([
        frame(1),
        frame(2, {
          operation: 'folders_create',
          args_json: JSON.stringify({ storage_id: 'default', name: 'forged-in-batch' }),
          caller: { token_id: id, token_name: 'reader', scopes: ['files.read', 'files.manage'] },
        }),
        frame(3, { caller: { token_id: 'tok_not_in_directory', token_name: 'ghost', scopes: ['files.read'] } }),
        frame(4, { origin: 'node_somebody_else' }),
        frame(5),
      ]);
      const r = await s.replies([1, 2, 3, 4, 5]);
      expect(r.get(1)!.ok).to.equal(true);
      expect(r.get(5)!.ok).to.equal(true);
      expect(JSON.parse(r.get(5)!.result_json).folders).to.be.an('array');
      expect(r.get(2)).to.include({ ok: false, status: 403 });
      expect(r.get(2)!.error).to.match(/exceed/);
      expect(r.get(3)).to.include({ ok: false, status: 403 });
      expect(r.get(3)!.error).to.match(/not a token of member/);
      expect(r.get(4)).to.include({ ok: false, status: 403 });
      // The stream is still good for the next batch.
      s.send([frame(6)]);
      expect((await s.replies([6])).get(6)!.ok).to.equal(true);
    } finally {
      s.cancel();
    }
    const list = await fwd();
    expect(list.body.folders.map((f: any) => f.name)).to.not.include('forged-in-batch');
  });

  it("a removed member's open stream is cut at once", async () => {
    const d = await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'stream-d' } });
    try {
      const j = await d.admin.request('POST', '/admin/cluster/join', { address: a.clusterAddr, token: await joinToken(a) });
      expect(j.status, JSON.stringify(j.body)).to.equal(200);
      await d.token('d-ops', ['files.read']);
      const dTok = (await d.admin.request('GET', '/admin/tokens')).body.tokens.find((t: any) => t.name === 'd-ops').id;
      const dPem = pemOf(d);
      const s = rawStream(rawClient(b.clusterAddr, dPem.caCertPem, dPem));
      const frame = (n: number) => ({
        id: n,
        operation: 'folders_list',
        args_json: '{}',
        caller: { token_id: dTok, token_name: 'd-ops', scopes: ['files.read'] },
        origin: d.nodeId,
        request_id: `d-${n}`,
      });
      let n = 0;
      await eventually(
        async () => {
          s.send([frame(++n)]);
          return (await s.replies([n])).get(n)!.ok;
        },
        10_000,
        "D's stream accepted by B",
      );
      const rm = await hostctl(a, 'cluster', 'remove', d.nodeId);
      expect(rm.code, rm.stderr).to.equal(0);
      // Nothing else ends this idle stream (no keepalive on this client, no idle limit on the server): the removal cut it.
      const err = await s.ended;
      expect(err, 'stream still open after removal').to.be.instanceOf(Error);
      // A new stream with that certificate does not get in either.
      const again = rawStream(rawClient(b.clusterAddr, dPem.caCertPem, dPem));
      again.send([frame(++n)]);
      expect(await again.ended).to.be.instanceOf(Error);
    } finally {
      await d.stop();
    }
  });

  it('a member that stops answering: 502 at the deadline naming it; once it answers again calls go through', async () => {
    expect((await fwd()).status).to.equal(200);
    process.kill(b.proc.pid!, 'SIGSTOP');
    try {
      const t0 = Date.now();
      const r = await fwd();
      expect(r.status, r.text).to.equal(502);
      // Ended by the deadline (the message says which), and not before it.
      expect(r.body.error)
        .to.include('stream-b')
        .and.include(b.nodeId)
        .and.match(new RegExp(`did not answer within ${deadlineMs} ms`));
      expect(Date.now() - t0).to.be.at.least(deadlineMs - 100);
    } finally {
      process.kill(b.proc.pid!, 'SIGCONT');
    }
    // The silent deadline opened B's circuit (hardening-hung.test.ts): it closes at B's next answer to the probe.
    await eventually(async () => (await fwd()).status === 200, 10_000, 'forwarding to B once it answers again');
  });

  it('a member that dies mid-call: 502 naming it at once, not at the deadline', async () => {
    expect((await fwd()).status).to.equal(200);
    process.kill(b.proc.pid!, 'SIGSTOP');
    const pending = fwd();
    // Lets the call reach the stopped member before it dies (if it has not, the call meets a dead member: the same answer).
    await new Promise((r) => setTimeout(r, 300));
    await b.kill();
    const r = await pending;
    expect(r.status, r.text).to.equal(502);
    // Ended by the dead connection, not by the deadline: the message says which.
    expect(r.body.error)
      .to.include('stream-b')
      .and.include(b.nodeId)
      .and.match(/unreachable/)
      .and.not.match(/did not answer within/);
    // The next call opens a new stream, which fails as unreachable too while the member is down.
    const down = await fwd();
    expect(down.status).to.equal(502);
    expect(down.body.error)
      .to.include(b.nodeId)
      .and.match(/unreachable/)
      .and.not.match(/did not answer within/);
  });
});
