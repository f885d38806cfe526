/**
 * Three real daemons on loopback (own data dirs and ports): pairing with
 * hostctl, forwarding by peer_id, the token directory against forged scopes,
 * mutual TLS against foreign and removed certificates, join tokens, removal,
 * restart, and a member that dies.
 */
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { startDaemon, eventually, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { createCa, generateKeyPair, issueNodeCert } from '../../certs/pki.js';
import { activityOf, grpc, hostctl, remoteHostctl, joinToken, pair, pemOf, peersOf, rawCall, rawClient, rawForward } from './util.js';

const SCOPES = ['files.read', 'files.manage', 'system.read', 'vm.read', 'proxy.read', 'proxy.manage'];

describe('cluster on loopback (three daemons)', function () {
  this.timeout(120_000);
  let a: TestDaemon;
  let b: TestDaemon;
  let c: TestDaemon;
  let token: string; // made on A
  // Long enough that no call meant to succeed misses it on a loaded machine; the tests of the deadline wait it out.
  const deadlineMs = 10_000;
  const env = { HOSTD_FORWARD_DEADLINE_MS: String(deadlineMs), HOSTD_CLUSTER_PROBE_MS: '500' };

  before(async () => {
    [a, b, c] = await Promise.all([
      startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'alpha' } }),
      startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'bravo' } }),
      startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'charlie' } }),
    ]);
  });

  after(async () => {
    await Promise.all([a, b, c].map((d) => d?.stop()));
  });

  it('logs the real cluster port when configured with port 0', () => {
    for (const d of [a, b, c]) {
      expect(d.clusterListen).to.match(/^127\.0\.0\.1:\d+$/);
      expect(d.clusterListen).to.not.match(/:0$/);
      expect(d.clusterAddr).to.equal(d.clusterListen);
    }
  });

  it('pairs with hostctl: init, join-token, join x2', async () => {
    const init = await hostctl(a, 'cluster', 'init');
    expect(init.code, init.stderr).to.equal(0);
    for (const d of [b, c]) {
      const t = await hostctl(a, 'cluster', 'join-token');
      expect(t.code, t.stderr).to.equal(0);
      const lines = t.stdout.split('\n').filter(Boolean);
      expect(lines).to.have.length(1);
      expect(lines[0]).to.match(/^hostd-join\.[0-9a-f]{16}\.[A-Za-z0-9_-]{43}\.[0-9a-f]{64}$/);
      const j = await hostctl(d, 'cluster', 'join', a.clusterAddr, lines[0]);
      expect(j.code, j.stderr).to.equal(0);
    }
    const st = await hostctl(c, 'cluster', 'status');
    expect(st.code, st.stderr).to.equal(0);
    for (const d of [a, b, c]) expect(st.stdout).to.include(d.nodeId);
    token = await a.token('ops', SCOPES);
  });

  it('every /peers list shows all three members with is_self right, reachable', async () => {
    const ids = [a, b, c].map((d) => d.nodeId).sort();
    const tokens = new Map<TestDaemon, string>([
      [a, token],
      [b, await b.token('peers-b', ['system.read'])],
      [c, await c.token('peers-c', ['system.read'])],
    ]);
    for (const d of [a, b, c]) {
      const peers = await eventually(
        async () => {
          const p = await peersOf(d, tokens.get(d)!);
          return p.length === 3 && p.every((x) => x.reachable) ? p : undefined;
        },
        10_000,
        `all peers reachable from ${d.nodeId}`,
      );
      expect(peers.map((p) => p.peer_id).sort()).to.deep.equal(ids);
      for (const p of peers) {
        expect(p.is_self).to.equal(p.peer_id === d.nodeId);
        expect(p.address).to.match(/^127\.0\.0\.1:\d+$/);
        expect(p.last_seen).to.be.a('string');
      }
      expect(peers.find((p) => p.peer_id === b.nodeId)!.name).to.equal('bravo');
    }
    // Keys are private to the owner.
    for (const f of ['ca.key', 'node.key']) expect(fs.statSync(path.join(b.dataDir, 'cluster', f)).mode & 0o777).to.equal(0o600);
  });

  it('one token made on A works on B and C via peer_id; the member writes the row, A none', async () => {
    const list = await a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token });
    expect(list.status, list.text).to.equal(200);
    expect(list.body.folders).to.be.an('array');
    const made = await a.request('POST', '/api/v1/folders', { token, body: { storage_id: 'default', name: 'from-alpha', peer_id: c.nodeId } });
    expect(made.status, made.text).to.equal(201);
    expect(made.body.folder.path).to.include(c.dataDir);
    // It exists on C, not on A or B.
    const onC = await a.request('GET', `/api/v1/folders?peer_id=${c.nodeId}`, { token });
    expect(onC.body.folders.map((f: any) => f.name)).to.include('from-alpha');
    const onA = await a.request('GET', '/api/v1/folders', { token });
    expect(onA.body.folders.map((f: any) => f.name)).to.not.include('from-alpha');
    // The row: on C, transport cluster, origin A, actor the token's name; none on A.
    const cRows = (await activityOf(c, await c.token('audit-c', ['system.read']))).filter((r) => r.metadata.operation === 'folders_create');
    expect(cRows).to.have.length(1);
    expect(cRows[0].metadata.transport).to.equal('cluster');
    expect(cRows[0].metadata.origin).to.equal(a.nodeId);
    expect(cRows[0].actor).to.equal('ops');
    const aRows = (await activityOf(a, token)).filter((r) => r.metadata.operation === 'folders_create');
    expect(aRows).to.have.length(0);
  });

  it('peer_id of this node runs here; unknown peer_id is 404; tasks are read with peer_id', async () => {
    const self = await a.request('GET', `/api/v1/folders?peer_id=${a.nodeId}`, { token });
    expect(self.status).to.equal(200);
    const unknown = await a.request('GET', '/api/v1/folders?peer_id=node_nowhere', { token });
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error).to.include('node_nowhere');
    const tasks = await a.request('GET', `/api/v1/tasks?peer_id=${b.nodeId}`, { token });
    expect(tasks.status, tasks.text).to.equal(200);
    expect(tasks.body.tasks).to.be.an('array');
    // A task id unknown on B: B's own 404 comes back unchanged.
    const bTok = await b.token('tasks-b', ['vm.read']);
    const direct = await b.request('GET', '/api/v1/tasks/task_0123456789abcdef', { token: bTok });
    const fwd = await a.request('GET', `/api/v1/tasks/task_0123456789abcdef?peer_id=${b.nodeId}`, { token });
    expect(fwd.status).to.equal(404);
    expect(fwd.body).to.deep.equal(direct.body);
    // hostctl: --peer on any command runs each of its calls on that member (as a token: the admin socket's calls run only here).
    const health = await remoteHostctl(a, token, 'call', 'system_health', '--peer', b.nodeId);
    expect(health.code, health.stderr).to.equal(0);
    expect(JSON.parse(health.stdout).node).to.deep.equal({ id: b.nodeId, name: 'bravo' });
    const vms = await remoteHostctl(a, token, 'vm', 'list', `--peer=${b.nodeId}`);
    expect(vms.code, vms.stderr).to.equal(0);
    expect(vms.stdout.split('\n')[0]).to.match(/^VMID\s+NAME\s+STATE/);
    const nowhere = await remoteHostctl(a, token, 'vm', 'list', '--peer', 'node_nowhere');
    expect(nowhere.code).to.equal(1);
    expect(nowhere.stderr).to.include("peer 'node_nowhere' not found");
    const admin = await hostctl(a, 'vm', 'list', '--peer', b.nodeId);
    expect(admin.code).to.equal(1);
    expect(admin.stderr).to.include('calls made over the local admin socket run only on this node');
    const dangling = await hostctl(a, 'apps', 'list', '--peer');
    expect(dangling.code).to.equal(2);
    expect(dangling.stderr).to.include('--peer needs a member');
  });

  it("a member's 4xx passes through unchanged (folder name taken: 409)", async () => {
    const body = { storage_id: 'default', name: 'dup', peer_id: b.nodeId };
    expect((await a.request('POST', '/api/v1/folders', { token, body })).status).to.equal(201);
    const again = await a.request('POST', '/api/v1/folders', { token, body });
    expect(again.status).to.equal(409);
    const bTok = await b.token('dup-b', ['files.manage']);
    const direct = await b.request('POST', '/api/v1/folders', { token: bTok, body: { storage_id: 'default', name: 'dup' } });
    expect(direct.status).to.equal(409);
    expect(again.body).to.deep.equal(direct.body);
  });

  it('scopes are checked on the origin, and admin-socket calls are not forwarded', async () => {
    const reader = await a.token('reader', ['files.read']);
    const r = await a.request('POST', '/api/v1/folders', { token: reader, body: { storage_id: 'default', name: 'nope', peer_id: b.nodeId } });
    expect(r.status).to.equal(403);
    const viaAdmin = await a.admin.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`);
    expect(viaAdmin.status).to.equal(403);
    expect(viaAdmin.body.error).to.match(/admin socket run only on this node/);
  });

  it('a member cannot forge scopes (403) nor speak for another member; a non-member fails at TLS', async () => {
    const ca = pemOf(a).caCertPem;
    const tokInfo = (await a.admin.request('GET', '/admin/tokens')).body.tokens.find((t: any) => t.name === 'reader');
    const call = (scopes: string[], origin: string) => ({
      operation: 'folders_create',
      args_json: JSON.stringify({ storage_id: 'default', name: `forged-${origin.slice(-4)}-${scopes.length}` }),
      caller: { token_id: tokInfo.id, token_name: 'reader', scopes },
      origin,
      request_id: 'forge-test',
    });
    // A's real certificate: honest scopes work; extra scopes are refused by B.
    const asA = rawClient(b.clusterAddr, ca, pemOf(a));
    const honest = await rawForward(asA, { ...call(['files.read'], a.nodeId), operation: 'folders_list', args_json: '{}' });
    expect(honest.ok, honest.error).to.equal(true);
    const forged = await rawForward(asA, call(['files.read', 'files.manage'], a.nodeId));
    expect(forged.ok).to.equal(false);
    expect(forged.status).to.equal(403);
    expect(forged.error).to.match(/exceed/);
    // C's real certificate claiming A's token (or to be A): refused.
    const asC = rawClient(b.clusterAddr, ca, pemOf(c));
    const spoofOrigin = await rawForward(asC, call(['files.read'], a.nodeId));
    expect(spoofOrigin.status).to.equal(403);
    const notYours = await rawForward(asC, call(['files.read'], c.nodeId));
    expect(notYours.status).to.equal(403);
    asA.close();
    asC.close();
    // Nothing was created on B by any of these.
    const list = await a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token });
    expect(list.body.folders.map((f: any) => f.name).filter((n: string) => n.startsWith('forged'))).to.deep.equal([]);

    // A certificate from another CA, even for A's node id: the connection is dropped after the handshake.
    const other = createCa('cl_evil');
    const keys = generateKeyPair();
    const evil = rawClient(b.clusterAddr, ca, { certPem: issueNodeCert(other, keys.publicKeyPem, a.nodeId), keyPem: keys.privateKeyPem });
    const err = await rawForward(evil, call(['files.read', 'files.manage'], a.nodeId)).catch((e) => e);
    expect(err).to.be.instanceOf(Error);
    expect(err.code).to.equal(grpc.status.UNAVAILABLE);
    evil.close();
    // No certificate at all: only Join is open, everything else is UNAUTHENTICATED.
    const anon = rawClient(b.clusterAddr, ca, null);
    const anonErr = await rawForward(anon, call(['files.read'], a.nodeId)).catch((e) => e);
    expect(anonErr.code).to.equal(grpc.status.UNAUTHENTICATED);
    const anonHealth = await rawCall(anon, 'Health', {}).catch((e) => e);
    expect(anonHealth.code).to.equal(grpc.status.UNAUTHENTICATED);
    anon.close();
  });

  it('a token revoked on A disappears from the directory on B', async () => {
    const t = await a.token('short-lived', ['files.read']);
    const id = (await a.admin.request('GET', '/admin/tokens')).body.tokens.find((x: any) => x.name === 'short-lived').id;
    expect((await a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token: t })).status).to.equal(200);
    await a.admin.request('DELETE', '/admin/tokens/short-lived');
    expect((await a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token: t })).status).to.equal(401);
    // Even a member replaying it is refused once the directory has caught up.
    const asA = rawClient(b.clusterAddr, pemOf(a).caCertPem, pemOf(a));
    await eventually(
      async () => {
        const r = await rawForward(asA, {
          operation: 'folders_list',
          args_json: '{}',
          caller: { token_id: id, token_name: 'short-lived', scopes: ['files.read'] },
          origin: a.nodeId,
          request_id: 'x',
        });
        return r.status === 403;
      },
      5000,
      'revoked token refused on B',
    );
    asA.close();
  });

  it('join tokens are one-time and expire; a removed member is refused and forgotten', async () => {
    const d = await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'delta' } });
    try {
      // One-time: a spent token is refused.
      const t = await joinToken(a);
      const other = await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'echo' } });
      expect((await other.admin.request('POST', '/admin/cluster/join', { address: a.clusterAddr, token: t })).status).to.equal(200);
      const reuse = await d.admin.request('POST', '/admin/cluster/join', { address: a.clusterAddr, token: t });
      expect(reuse.status).to.equal(403);
      expect(reuse.body.error).to.match(/unknown or was already used/);
      // Expiry: a 1-second token, used after 1.3 s.
      const short = await hostctl(a, 'cluster', 'join-token', '--ttl', '1s');
      expect(short.code, short.stderr).to.equal(0);
      await new Promise((r) => setTimeout(r, 1300));
      const late = await d.admin.request('POST', '/admin/cluster/join', { address: a.clusterAddr, token: short.stdout.trim() });
      expect(late.status).to.equal(403);
      expect(late.body.error).to.match(/expired/);
      // A token for another cluster's CA (wrong pin) is refused before anything is sent.
      const pinned = t.replace(/\.[0-9a-f]{64}$/, '.' + '0'.repeat(64));
      expect((await d.admin.request('POST', '/admin/cluster/join', { address: a.clusterAddr, token: pinned })).status).to.equal(502);

      // Remove echo: everyone forgets it, its certificate is refused at once.
      const echoPem = pemOf(other);
      const ca = echoPem.caCertPem;
      const before = rawClient(b.clusterAddr, ca, echoPem);
      await eventually(
        async () =>
          await rawCall(before, 'Health', { from: other.nodeId }).then(
            () => true,
            () => false,
          ),
        5000,
        'echo accepted by B before removal',
      );
      const rm = await hostctl(b, 'cluster', 'remove', other.nodeId);
      expect(rm.code, rm.stderr).to.equal(0);
      const err = await rawCall(before, 'Health', { from: other.nodeId }).catch((e) => e);
      expect(err).to.be.instanceOf(Error);
      before.close();
      for (const n of [a, b, c]) {
        const after = rawClient(n.clusterAddr, ca, echoPem);
        const e = await rawCall(after, 'Health', { from: other.nodeId }).catch((x) => x);
        expect(e, `removed member accepted by ${n.nodeId}`).to.be.instanceOf(Error);
        after.close();
        await eventually(
          async () => !(await peersOf(n, n === a ? token : await n.token(`p-${Date.now()}`, ['system.read']))).some((p) => p.peer_id === other.nodeId),
          5000,
          `echo gone from ${n.nodeId}`,
        );
      }
      // The removed node learned it and is on its own again.
      await eventually(async () => (await other.admin.request('GET', '/admin/cluster/status')).body.in_cluster === false, 5000, 'echo left');
      expect(fs.existsSync(path.join(other.dataDir, 'cluster', 'node.key'))).to.equal(false);
      await other.stop();
      // Forwarding to it is now a plain unknown peer.
      expect((await a.request('GET', `/api/v1/folders?peer_id=${other.nodeId}`, { token })).status).to.equal(404);
      // Activity: the join-token and removal rows exist on the nodes that did them.
      const rows = await activityOf(b, await b.token('audit-b', ['system.read']));
      expect(rows.some((r) => r.category === 'system' && r.summary.includes('removed from the cluster'))).to.equal(true);
    } finally {
      await d.stop();
    }
  });

  it('moves the proxy between live members (GET /proxy/config shows holder and epoch everywhere)', async () => {
    const cfg0 = await a.request('GET', '/api/v1/proxy/config', { token });
    expect(cfg0.status, cfg0.text).to.equal(200);
    expect(cfg0.body.holder).to.equal(a.nodeId);
    const mv = await a.request('POST', '/api/v1/proxy/move', { token, body: { peer_id: b.nodeId } });
    expect(mv.status, mv.text).to.equal(200);
    expect(mv.body.holder).to.equal(b.nodeId);
    const epoch = mv.body.epoch;
    expect(epoch).to.be.greaterThan(cfg0.body.epoch);
    for (const d of [a, b, c]) {
      await eventually(
        async () => {
          const r = await a.request('GET', `/api/v1/proxy/config?peer_id=${d.nodeId}`, { token });
          return r.body.holder === b.nodeId && r.body.epoch === epoch && r.body.holding_here === (d === b);
        },
        5000,
        `holder seen on ${d.nodeId}`,
      );
    }
    // hostctl asks the member it is told to: B says it holds the proxy, A (asked directly) that it does not.
    const onB = await remoteHostctl(a, token, 'proxy', 'status', '--peer', b.nodeId);
    expect(onB.code, onB.stderr).to.equal(0);
    expect(onB.stdout).to.match(new RegExp(`^holder ${b.nodeId} \\(epoch ${epoch}\\)  <- this node$`, 'm'));
    const onA = await remoteHostctl(a, token, 'proxy', 'status');
    expect(onA.stdout).to.match(new RegExp(`^holder ${b.nodeId} \\(epoch ${epoch}\\)$`, 'm'));
    // Taking over while the holder is reachable is refused.
    const take = await a.request('POST', '/api/v1/proxy/move', { token, body: {} });
    expect(take.status).to.equal(409);
    // An unknown target is an argument error, not a routing 404.
    const unknown = await a.request('POST', '/api/v1/proxy/move', { token, body: { peer_id: 'node_nowhere' } });
    expect([unknown.status, unknown.body]).to.deep.equal([404, { error: "no cluster member 'node_nowhere'" }]);
    // Back to A for the next tests.
    expect((await a.request('POST', '/api/v1/proxy/move', { token, body: { peer_id: a.nodeId } })).status).to.equal(200);
  });

  it('state survives a restart: B comes back on its port and serves forwarded calls again', async () => {
    const port = b.clusterListen.split(':')[1];
    const dir = b.dataDir;
    await b.stop();
    const down = await a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token });
    expect(down.status).to.equal(502);
    b = await startDaemon({ dataDir: dir, env: { ...env, HOSTD_NODE_NAME: 'bravo', HOSTD_CLUSTER_ADDR: `127.0.0.1:${port}` } });
    expect(b.listening.in_cluster).to.equal(true);
    await eventually(async () => (await a.request('GET', `/api/v1/folders?peer_id=${b.nodeId}`, { token })).status === 200, 10_000, 'forwarding to B again');
    const peers = await peersOf(b, await b.token('after-restart', ['system.read']));
    expect(peers).to.have.length(3);
  });

  it('a killed member gives 502 naming it, within the deadline, and shows unreachable', async () => {
    await c.kill();
    for (const path of [`/api/v1/folders?peer_id=${c.nodeId}`]) {
      const r = await a.request('GET', path, { token });
      expect(r.status).to.equal(502);
      // Ended as unreachable or by the deadline (the message says which), not left waiting.
      expect(r.body.error)
        .to.include('charlie')
        .and.include(c.nodeId)
        .and.match(new RegExp(`unreachable|did not answer within ${deadlineMs} ms`));
    }
    const post = await a.request('POST', '/api/v1/folders', { token, body: { storage_id: 'default', name: 'to-dead', peer_id: c.nodeId } });
    expect(post.status).to.equal(502);
    // The origin records the failed mutating call (the member never ran it).
    const rows = (await activityOf(a, token)).filter((r) => r.metadata.operation === 'folders_create' && r.metadata.status === 502);
    expect(rows).to.have.length(1);
    expect(rows[0].metadata.peer_id).to.equal(c.nodeId);
    await eventually(async () => (await peersOf(a, token)).find((p) => p.peer_id === c.nodeId)?.reachable === false, 5000, 'C unreachable in /peers');
  });
});

describe('a member removed while it was down', function () {
  // Three daemon starts one after the other, and a pairing: minutes on a loaded machine.
  this.timeout(240_000);
  it("is refused when it comes back, and 'hostctl cluster leave' puts it on its own", async () => {
    const env = { HOSTD_CLUSTER_PROBE_MS: '300' };
    const x = await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'x-ray' } });
    const y = await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'yankee' } });
    try {
      await pair([x, y]);
      const port = y.clusterListen.split(':')[1];
      const dir = y.dataDir;
      const yId = y.nodeId;
      await y.stop();
      expect((await hostctl(x, 'cluster', 'remove', yId)).code).to.equal(0);
      const y2 = await startDaemon({ dataDir: dir, env: { ...env, HOSTD_NODE_NAME: 'yankee', HOSTD_CLUSTER_ADDR: `127.0.0.1:${port}` } });
      // It still believes it is a member, but x refuses its certificate: x is unreachable from it.
      const tok = await y2.token('y2', ['system.read']);
      await eventually(async () => (await peersOf(y2, tok)).find((p) => p.peer_id === x.nodeId)?.reachable === false, 30_000, 'y2 to find x unreachable');
      const left = await hostctl(y2, 'cluster', 'leave');
      expect(left.code, left.stderr).to.equal(0);
      expect((await y2.admin.request('GET', '/admin/cluster/status')).body.in_cluster).to.equal(false);
      expect((await peersOf(y2, tok)).map((p) => p.peer_id)).to.deep.equal([yId]);
      // It can join again with a new token.
      const j = await y2.admin.request('POST', '/admin/cluster/join', { address: x.clusterAddr, token: await joinToken(x) });
      expect(j.status, JSON.stringify(j.body)).to.equal(200);
      await y2.stop();
    } finally {
      await Promise.all([x.stop(), y.stop()]);
    }
  });
});

describe('cluster join validation', function () {
  this.timeout(120_000);
  it('refuses join without a cluster, init twice, and a join to nowhere', async () => {
    const d = await startDaemon({ dataDir: tempDir() });
    try {
      expect((await d.admin.request('POST', '/admin/cluster/join-token', {})).status).to.equal(409);
      expect((await d.admin.request('POST', '/admin/cluster/join', { address: 'nonsense', token: 'x' })).status).to.equal(400);
      expect((await d.admin.request('POST', '/admin/cluster/init', {})).status).to.equal(201);
      expect((await d.admin.request('POST', '/admin/cluster/init', {})).status).to.equal(409);
      const t = await joinToken(d);
      // Port 1 on loopback: nothing listens there.
      const r = await d.admin.request('POST', '/admin/cluster/join', { address: '127.0.0.1:1', token: t });
      expect(r.status).to.equal(409); // already in a cluster
    } finally {
      await d.stop();
    }
  });
});
