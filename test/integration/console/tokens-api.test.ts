/**
 * Token operations over the API (tokens_list, tokens_create, tokens_revoke):
 * the local administrator (admin socket) manages tokens through /api/v1 and
 * dispatch writes the activity row; no bearer token may call them, whatever
 * its scopes; they take no peer_id and are no MCP tools.
 */
import { expect } from 'chai';
import { ALL_SCOPES, operations } from '../../../api/registry/index.js';
import { startDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { API, expectError, raw, resultMismatch, type RawReply } from '../../helpers/conformance.js';
import { getOperation } from '../../../api/registry/index.js';

/** Whether an admin-socket answer fits the operation's result schema (undefined when it does). */
const fits = (name: string, r: { status: number; body: unknown }) =>
  resultMismatch(getOperation(name)!, { status: r.status, headers: {}, body: r.body, text: JSON.stringify(r.body) } as RawReply);

describe('token operations over the API', function () {
  let d: TestDaemon;
  let all: string;

  before(async function () {
    this.timeout(60_000);
    d = await startDaemon();
    all = await d.token('every-scope', [...ALL_SCOPES]);
  });

  const rowsFor = async (target: string) => {
    const r = await d.admin.request('GET', `${API}/activity?limit=200`);
    expect(r.status).to.equal(200);
    return r.body.events.filter((x: any) => x.target === target);
  };

  it('the administrator creates a token (secret answered once), lists it without a secret, and revokes it', async () => {
    const mk = await d.admin.request('POST', `${API}/tokens`, { name: 'made-over-api', scopes: ['vm.read', 'files.read'] });
    expect(mk.status, JSON.stringify(mk.body)).to.equal(201);
    expect(mk.body.secret).to.match(/^hostd_/);
    expect(fits('tokens_create', mk)).to.equal(undefined);
    expect(mk.body.token).to.include({ name: 'made-over-api', last_used_at: null });
    expect(mk.body.token.scopes).to.deep.equal(['files.read', 'vm.read']);
    expect((await d.request('GET', `${API}/folders`, { token: mk.body.secret })).status).to.equal(200);

    const list = await d.admin.request('GET', `${API}/tokens`);
    expect(list.status).to.equal(200);
    expect(fits('tokens_list', list)).to.equal(undefined);
    expect(JSON.stringify(list.body)).not.to.include(mk.body.secret);
    const row = list.body.tokens.find((t: any) => t.name === 'made-over-api');
    expect(Object.keys(row).sort()).to.deep.equal(['created_at', 'id', 'last_used_at', 'name', 'scopes']);

    const rv = await d.admin.request('DELETE', `${API}/tokens/made-over-api`);
    expect(rv.status, JSON.stringify(rv.body)).to.equal(200);
    expect(rv.body.revoked.name).to.equal('made-over-api');
    expect(fits('tokens_revoke', rv)).to.equal(undefined);
    expect((await d.request('GET', `${API}/folders`, { token: mk.body.secret })).status).to.equal(401);
    expectError(await raw(d.url, 'GET', `${API}/folders`, { token: mk.body.secret }), 401);
  });

  it('each call writes one activity row through dispatch: transport api, actor admin, no secret', async () => {
    const mk = await d.admin.request('POST', `${API}/tokens`, { name: 'audited', scopes: ['vm.read'] });
    expect(mk.status).to.equal(201);
    await d.admin.request('DELETE', `${API}/tokens/audited`);
    const rows = await rowsFor('tokens/audited');
    expect(rows.map((r: any) => r.metadata.operation).sort()).to.deep.equal(['tokens_create', 'tokens_revoke']);
    for (const r of rows) {
      expect(r).to.include({ actor: 'admin', category: 'auth', severity: 'info' });
      expect(r.metadata.transport).to.equal('api');
      expect(JSON.stringify(r)).not.to.include(mk.body.secret);
    }
  });

  it('no bearer token may call them, not even one holding every scope (403 saying so)', async () => {
    for (const [method, path, body] of [
      ['GET', '/tokens', undefined],
      ['POST', '/tokens', { name: 'minted', scopes: ['vm.read'] }],
      ['DELETE', '/tokens/every-scope', undefined],
    ] as const) {
      const r = await raw(d.url, method, `${API}${path}`, {
        token: all,
        body: body && JSON.stringify(body),
        headers: body ? { 'content-type': 'application/json' } : {},
      });
      expectError(r, 403, 'local administrator', 'every-scope');
    }
    // Nothing was minted and the token is still there.
    const names = (await d.admin.request('GET', `${API}/tokens`)).body.tokens.map((t: any) => t.name);
    expect(names).to.include('every-scope').and.not.include('minted');
  });

  it('arguments are checked: a bad name, an unknown scope, an extra field, a peer_id (400)', async () => {
    for (const body of [
      { name: 'has space', scopes: [] },
      { name: 'ok-name', scopes: ['root.everything'] },
      { name: 'ok-name', scopes: [], extra: 1 },
      { name: 'ok-name', scopes: ['vm.read'], peer_id: 'elsewhere' },
      { name: 'admin', scopes: [] },
    ]) {
      const r = await d.admin.request('POST', `${API}/tokens`, body);
      expect(r.status, JSON.stringify([body, r.body])).to.equal(400);
    }
    expect((await d.admin.request('DELETE', `${API}/tokens/no-such-token`)).status).to.equal(404);
  });

  it('tokens_whoami tells any caller its own name and scopes, and whether it is the administrator', async () => {
    const reader = await d.token('just-reading', ['vm.read']);
    const r = await d.request('GET', `${API}/whoami`, { token: reader });
    expect(r.status).to.equal(200);
    expect(r.body).to.deep.equal({ name: 'just-reading', scopes: ['vm.read'], administrator: false });
    const a = await d.admin.request('GET', `${API}/whoami`);
    expect(a.body).to.include({ name: 'admin', administrator: true });
    expect(a.body.scopes).to.have.length(ALL_SCOPES.size);
  });

  it('are no MCP tools (an MCP client always holds a bearer token)', () => {
    const ops = operations.filter((o) => o.domain === 'tokens' && o.name !== 'tokens_whoami');
    expect(ops.map((o) => o.name).sort()).to.deep.equal(['tokens_create', 'tokens_list', 'tokens_revoke']);
    for (const o of ops) expect(o).to.include({ mcp: false, admin: true, peerId: 'none' });
  });
});
