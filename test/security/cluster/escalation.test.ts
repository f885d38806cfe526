/**
 * A forwarded call never holds more scopes than the token that made it, on
 * two paired daemons (loopback):
 *
 * - Through the API: a token of A calling any operation it lacks a scope for
 *   with `peer_id` of B is refused on A (403 naming the scope) and never
 *   reaches B (no row in B's activity log, nothing made there).
 * - As a member: A's own certificate sending B forwarded calls by hand, as a
 *   member that does not play by the rules would. Claiming one scope more
 *   than the token has is refused for every scope; an honest claim is still
 *   checked by B's dispatch for every operation (403 naming the scope); the
 *   token of another member, the local administrator's id, a made-up token
 *   and another member's origin are refused. Every list comes from the
 *   registry.
 *
 * What no check can stop is documented in docs/security.md (Trust
 * assumptions): a member is the authority for its own token directory.
 */
import { expect } from 'chai';
import { ALL_SCOPES, operations } from '../../../api/registry/index.js';
import { startDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { API, Problems, callFor, minimalArgs, pool, primaryType, raw, sampleValue, show } from '../../helpers/conformance.js';
import { activityOf, pair, pemOf, rawClient, rawForward } from '../../cluster/util.js';

describe('escalation: forwarded calls and the scopes they carry (two paired daemons)', function () {
  this.timeout(300_000);
  let a: TestDaemon;
  let b: TestDaemon;
  let reader: string; // files.read, made on A
  let readerId: string;
  let bAll: string; // every scope, made on B
  let bOwnId: string;

  const tokenId = async (d: TestDaemon, name: string) =>
    (await d.admin.request('GET', '/admin/tokens')).body.tokens.find((t: any) => t.name === name).id as string;
  const frame = (operation: string, args: Record<string, unknown>, caller: { token_id: string; token_name: string; scopes: string[] }, origin = a.nodeId) => ({
    operation,
    args_json: JSON.stringify(args),
    caller,
    origin,
    request_id: `sec-${operation}`,
  });
  /** Arguments as a member forwards them (typed path parameters, sampled required arguments, no peer_id). */
  const fwdArgs = (name: string) => {
    const op = operations.find((o) => o.name === name)!;
    const args: Record<string, unknown> = { ...minimalArgs(op) };
    for (const [p, schema] of Object.entries(op.params)) args[p] = primaryType(schema) === 'integer' ? 1 : sampleValue(schema);
    return args;
  };

  before(async () => {
    const env = { HOSTD_FORWARD_DEADLINE_MS: '10000', HOSTD_CLUSTER_PROBE_MS: '500' };
    // One after the other: on a loaded machine two starts at once come close to the helper's start limit.
    a = await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'alpha' } });
    b = await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'bravo' } });
    await pair([a, b]);
    reader = await a.token('sec-reader', ['files.read']);
    readerId = await tokenId(a, 'sec-reader');
    bAll = await b.token('sec-b-all', [...ALL_SCOPES]);
    bOwnId = await tokenId(b, 'sec-b-all');
    // B knows A's token once a forwarded call with it went through.
    const warm = await raw(a.url, 'GET', `${API}/folders?peer_id=${b.nodeId}`, { token: reader });
    expect(warm.status, show(warm)).to.equal(200);
  });

  after(async () => {
    await Promise.all([a, b].map((d) => d?.stop()));
  });

  it('refuses on the origin every operation the token lacks a scope for, with peer_id of the member; nothing reaches the member', async () => {
    const before = (await activityOf(b, bAll)).length;
    const ops = operations.filter((o) => o.peerId === 'forward' && o.scopes.some((s) => s !== 'files.read'));
    const p = new Problems();
    await pool(ops, 8, async (op) => {
      const c = callFor(op, { ...minimalArgs(op), peer_id: b.nodeId });
      const r = await raw(a.url, c.method, c.path, { token: reader, body: c.body, timeoutMs: 60_000 });
      const missing = op.scopes.filter((s) => s !== 'files.read');
      p.add(
        op.name,
        r.status === 403 && missing.every((m) => r.body?.error?.includes(`'${m}'`)) ? undefined : `expected 403 naming ${missing.join(', ')}, got ${show(r)}`,
      );
    });
    p.check(ops.length);
    expect(ops.length).to.be.above(100);
    // Not one of them ran on B, or was even recorded there.
    expect((await activityOf(b, bAll)).length).to.equal(before);
    expect((await raw(b.url, 'GET', `${API}/folders`, { token: bAll })).body.folders).to.deep.equal([]);
  });

  it("refuses a member's claim of any scope the token does not have (403), for every scope", async () => {
    const asA = rawClient(b.clusterAddr, pemOf(a).caCertPem, pemOf(a));
    try {
      const p = new Problems();
      for (const extra of [...ALL_SCOPES].filter((s) => s !== 'files.read').sort()) {
        // The operation the extra scope would open, with the token's own scope beside it.
        const op = operations.find((o) => o.scopes.length === 1 && o.scopes[0] === extra)!;
        const r = await rawForward(asA, frame(op.name, fwdArgs(op.name), { token_id: readerId, token_name: 'sec-reader', scopes: ['files.read', extra] }));
        p.add(
          `${op.name} claiming ${extra}`,
          r.status === 403 && r.error.includes('exceed') && r.error.includes(extra) ? undefined : `expected 403 'exceed', got ${r.status} ${r.error}`,
        );
      }
      p.check(ALL_SCOPES.size - 1);
    } finally {
      asA.close();
    }
    expect((await raw(b.url, 'GET', `${API}/folders`, { token: bAll })).body.folders).to.deep.equal([]);
  });

  it("checks an honest claim again on the member: 403 from the member's dispatch for every operation beyond the token's scopes", async () => {
    const asA = rawClient(b.clusterAddr, pemOf(a).caCertPem, pemOf(a));
    try {
      const ops = operations.filter((o) => o.peerId === 'forward' && o.scopes.some((s) => s !== 'files.read'));
      const p = new Problems();
      await pool(ops, 4, async (op) => {
        const r = await rawForward(asA, frame(op.name, fwdArgs(op.name), { token_id: readerId, token_name: 'sec-reader', scopes: ['files.read'] }), 30_000);
        const missing = op.scopes.filter((s) => s !== 'files.read');
        p.add(
          op.name,
          r.status === 403 && missing.every((m) => r.error.includes(`'${m}'`))
            ? undefined
            : `expected 403 naming ${missing.join(', ')}, got ${r.status} ${r.error}`,
        );
      });
      p.check(ops.length);
      // A claim of fewer scopes than the token has is a narrower call, and is what the member runs with.
      const none = await rawForward(asA, frame('folders_list', {}, { token_id: readerId, token_name: 'sec-reader', scopes: [] }));
      expect(none.status, none.error).to.equal(403);
      const honest = await rawForward(asA, frame('folders_list', {}, { token_id: readerId, token_name: 'sec-reader', scopes: ['files.read'] }));
      expect(honest.ok, honest.error).to.equal(true);
    } finally {
      asA.close();
    }
  });

  it("refuses tokens the member does not own: the other member's, the local administrator's, made-up ones, and another origin", async () => {
    const asA = rawClient(b.clusterAddr, pemOf(a).caCertPem, pemOf(a));
    const every = [...ALL_SCOPES];
    try {
      const cases: Array<[string, ReturnType<typeof frame>]> = [
        [
          "B's own token, claimed by A",
          frame('folders_create', { storage_id: 'default', name: 'x1' }, { token_id: bOwnId, token_name: 'sec-b-all', scopes: every }),
        ],
        [
          'the local administrator',
          frame('folders_create', { storage_id: 'default', name: 'x2' }, { token_id: 'admin', token_name: 'local-admin', scopes: every }),
        ],
        [
          'a made-up token',
          frame('folders_create', { storage_id: 'default', name: 'x3' }, { token_id: 'tok_madeup00000000', token_name: 'ghost', scopes: every }),
        ],
        ['an empty token id', frame('folders_create', { storage_id: 'default', name: 'x4' }, { token_id: '', token_name: '', scopes: every })],
        [
          "B's node as origin",
          frame('folders_create', { storage_id: 'default', name: 'x5' }, { token_id: readerId, token_name: 'sec-reader', scopes: ['files.read'] }, b.nodeId),
        ],
      ];
      for (const [what, f] of cases) {
        const r = await rawForward(asA, f);
        expect(r.status, `${what}: ${r.error}`).to.equal(403);
      }
    } finally {
      asA.close();
    }
    expect((await raw(b.url, 'GET', `${API}/folders`, { token: bAll })).body.folders).to.deep.equal([]);
  });
});
