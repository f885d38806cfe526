/**
 * Ownership across a peer: two real daemons paired in a cluster on loopback.
 * A token made on A creates a sandbox on B through peer_id; B records it as
 * that token's (by id, from the replicated token directory): another token,
 * or B's own token of the same name, neither sees nor reaches it. The
 * sandboxes boot a blank disk (no guest needed for these rules) and are
 * destroyed at once.
 */
import { expect } from 'chai';
import { eventually } from '../../helpers/daemon.js';
import { killGuests, requireVmsRuntime, type VmsEnv } from '../../helpers/vms-fixture.js';
import { call, importBlank, onlyTheseVms, startSandboxDaemon } from '../../helpers/sandboxes-fixture.js';
import { pair } from '../../cluster/util.js';

const AGENT = ['sandbox.read', 'sandbox.manage'];
const ENV = { HOSTD_CLUSTER_PROBE_MS: '500', HOSTD_FORWARD_DEADLINE_MS: '20000' };

describe('sandboxes across a peer (two daemons, QEMU)', function () {
  this.timeout(5 * 60_000);
  let a: VmsEnv;
  let b: VmsEnv;
  let alice = '';
  let bob = '';

  before(async function () {
    await requireVmsRuntime(this, 'sandboxes');
    a = await startSandboxDaemon({ env: { ...ENV, HOSTD_NODE_NAME: 'alpha' } });
    b = await startSandboxDaemon({ env: { ...ENV, HOSTD_NODE_NAME: 'bravo' } });
    await pair([a.d, b.d]);
    alice = await a.d.token('alice', AGENT);
    bob = await a.d.token('bob', AGENT);
    await importBlank(b);
  });

  after(async function () {
    for (const x of [a, b]) if (x) await killGuests(x.root);
  });

  it("a forwarded create is the same token's on the peer; another token gets 404 there and lists nothing", async () => {
    const peer = b.d.nodeId;
    const body = { image_id: 'blank', idempotency_key: 'peer-1', labels: { where: 'bravo' }, peer_id: peer };
    // The token directory reaches B shortly after the token is made.
    const made = await eventually(
      async () => {
        const r = await call(a, alice, 'POST', '/sandboxes', body);
        return r.status === 201 ? r : undefined;
      },
      30_000,
      'a create forwarded to B',
    );
    const id = made.body.sandbox.id;
    expect(made.body.sandbox).to.include({ owner: 'alice', state: 'booting', image_id: 'blank' });
    // A replay through the peer returns it.
    const replay = await call(a, alice, 'POST', '/sandboxes', body);
    expect(replay.status, replay.text).to.equal(201);
    expect(replay.body).to.deep.include({ replayed: true });
    expect(replay.body.sandbox.id).to.equal(id);
    // Its token reads it on B, not on A.
    const got = await call(a, alice, 'GET', `/sandboxes/${id}?peer_id=${peer}`);
    expect(got.status, got.text).to.equal(200);
    expect(got.body.sandbox.labels).to.deep.equal({ where: 'bravo' });
    expect((await call(a, alice, 'GET', `/sandboxes?peer_id=${peer}`)).body.sandboxes.map((s: any) => s.id)).to.deep.equal([id]);
    expect((await call(a, alice, 'GET', '/sandboxes')).body.sandboxes).to.deep.equal([]);
    expect((await call(a, alice, 'GET', `/sandboxes/${id}`)).status).to.equal(404);
    // Another token of A: 404 through the peer, empty list, never 403.
    const msg = { error: `sandbox '${id}' not found` };
    for (const [method, p, args] of [
      ['GET', `/sandboxes/${id}?peer_id=${peer}`, undefined],
      ['POST', `/sandboxes/${id}/suspend`, { peer_id: peer }],
      ['DELETE', `/sandboxes/${id}?peer_id=${peer}`, undefined],
    ] as const) {
      const r = await call(a, bob, method, p, args);
      expect(r.status, `${method} ${p}: ${r.text}`).to.equal(404);
      expect(r.body).to.deep.equal(msg);
    }
    expect((await call(a, bob, 'GET', `/sandboxes?peer_id=${peer}&include_destroyed=true`)).body.sandboxes).to.deep.equal([]);
    // Bob's same idempotency key on B is his own.
    const own = await call(a, bob, 'POST', '/sandboxes', { ...body });
    expect(own.status, own.text).to.equal(201);
    expect(own.body.sandbox.id).to.not.equal(id);
    // B's own token named 'alice' is another token: it owns nothing there.
    const localAlice = await b.d.token('alice', AGENT);
    expect((await call(b, localAlice, 'GET', '/sandboxes?include_destroyed=true')).body.sandboxes).to.deep.equal([]);
    expect((await call(b, localAlice, 'GET', `/sandboxes/${id}`)).status).to.equal(404);
    // B's operator sees both, each with its owner.
    const all = (await b.d.admin.request('GET', '/admin/sandboxes')).body.sandboxes;
    expect(all.map((s: any) => [s.id, s.owner]).sort()).to.deep.equal(
      [
        [id, 'alice'],
        [own.body.sandbox.id, 'bob'],
      ].sort(),
    );
    // Destroyed through the peer by their tokens: tombstones on B, nothing left running.
    const d = await call(a, alice, 'DELETE', `/sandboxes/${id}?peer_id=${peer}`);
    expect(d.status, d.text).to.equal(200);
    expect(d.body.sandbox).to.include({ state: 'destroyed', destroyed_by: 'alice' });
    expect((await call(a, bob, 'DELETE', `/sandboxes/${own.body.sandbox.id}?peer_id=${peer}`)).status).to.equal(200);
    await onlyTheseVms(b, []);
    await onlyTheseVms(a, []);
  });
});
