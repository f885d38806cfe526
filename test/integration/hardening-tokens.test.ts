/**
 * Token durability (hardening items 3 and 4).
 *
 * Item 3: a revoked token must never come back, whatever order the revoke's
 * delete and a last-used flush reach the disk in. The token table's writes are
 * held at a gate the test opens one at a time, in every order, so each
 * interleaving is run deterministically; then the store is reopened as a
 * restart would.
 *
 * Item 4: listing tokens (hostctl token list, the cluster's directory publish
 * on every create) must not lose pending last-used times.
 */
import path from 'node:path';
import { expect } from 'chai';
import { Store } from '../../daemon/store/store.js';
import { TokenStore } from '../../daemon/auth/tokens.js';
import { startDaemon, tempDir } from '../helpers/daemon.js';

const SCOPES = new Set(['files.read', 'system.read']);

/** Holds every write of one sublevel until the test releases it. */
class Gate {
  readonly held: Array<{ what: string; release: () => void }> = [];
  private waiters: Array<() => void> = [];

  constructor(sub: any) {
    for (const method of ['put', 'del', 'batch'] as const) {
      const orig = sub[method].bind(sub);
      sub[method] = (...args: unknown[]) =>
        new Promise((resolve, reject) => {
          this.held.push({ what: method, release: () => orig(...args).then(resolve, reject) });
          for (const w of this.waiters.splice(0)) w();
        });
    }
  }

  /** Resolves once `n` writes are held. */
  async until(n: number): Promise<void> {
    while (this.held.length < n) await new Promise<void>((r) => this.waiters.push(r));
  }
}

async function withStore<T>(dir: string, fn: (store: Store) => Promise<T>): Promise<T> {
  const store = await Store.open(path.join(dir, 'db'));
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

async function tokenNames(dir: string): Promise<string[]> {
  return withStore(dir, async (store) => {
    const t = new TokenStore(store, SCOPES);
    await t.init();
    const names = t.list().map((x) => x.name);
    await t.close();
    return names;
  });
}

describe('hardening: token revocation is final and durable', function () {
  this.timeout(60_000);

  // Two writers race: the periodic flush (holding the token's use time) and
  // the revoke. Either may start first; when both writes are in flight the
  // disk may apply them in either order: each order is run.
  for (const first of ['flush', 'revoke'] as const) {
    for (const order of [
      ['del', 'batch'],
      ['batch', 'del'],
    ]) {
      it(`${first} first, held writes applied ${order.join(' then ')} when both are in flight: the token stays revoked after a restart`, async () => {
        const dir = tempDir('hostd-revoke-');
        let authenticatedAfterRevoke: unknown;
        let listedAfterRevoke: string[] = [];
        await withStore(dir, async (store) => {
          const tokens = new TokenStore(store, SCOPES);
          await tokens.init();
          const { secret } = await tokens.create('victim', ['files.read']);
          await tokens.create('keeper', ['files.read']);
          expect(tokens.authenticate(secret)?.name).to.equal('victim');
          const gate = new Gate(store.sub('tokens'));
          const calls: Array<Promise<unknown>> = [];
          if (first === 'flush') {
            calls.push(tokens.flush());
            await gate.until(1);
            calls.push(tokens.revoke('victim'));
          } else {
            calls.push(tokens.revoke('victim'));
            calls.push(tokens.flush());
          }
          // Final at once, before any write has reached the disk (checked below).
          authenticatedAfterRevoke = tokens.authenticate(secret);
          listedAfterRevoke = tokens.list().map((t) => t.name);
          let done = false;
          void Promise.allSettled(calls).then(() => (done = true));
          const prefer = [...order];
          while (!done) {
            await new Promise((r) => setTimeout(r, 10));
            if (!gate.held.length) continue;
            const want = prefer.shift();
            const pick = gate.held.find((h) => h.what === want) ?? gate.held[0];
            gate.held.splice(gate.held.indexOf(pick), 1);
            pick.release();
          }
          await tokens.close();
        });
        expect(await tokenNames(dir), 'tokens after a restart').to.deep.equal(['keeper']);
        expect(authenticatedAfterRevoke, 'the revoked secret authenticates while its delete is in flight').to.equal(undefined);
        expect(listedAfterRevoke).to.deep.equal(['keeper']);
      });
    }
  }

  it('the revoke answers only after its delete is stored', async () => {
    const dir = tempDir('hostd-revoke-');
    await withStore(dir, async (store) => {
      const tokens = new TokenStore(store, SCOPES);
      await tokens.init();
      await tokens.create('victim', ['files.read']);
      const gate = new Gate(store.sub('tokens'));
      let answered = false;
      const revoke = tokens.revoke('victim').then(() => (answered = true));
      await gate.until(1);
      await new Promise((r) => setTimeout(r, 20));
      expect(answered).to.equal(false);
      expect(gate.held[0].what).to.equal('del');
      gate.held.splice(0)[0].release();
      await revoke;
      await tokens.close();
    });
    expect(await tokenNames(dir)).to.deep.equal([]);
  });
});

describe('hardening: last_used_at survives listing', function () {
  this.timeout(60_000);

  it('in process: list() leaves the pending use time for the flush', async () => {
    const dir = tempDir('hostd-lastused-');
    await withStore(dir, async (store) => {
      const tokens = new TokenStore(store, SCOPES);
      await tokens.init();
      const { secret } = await tokens.create('bot', ['files.read']);
      tokens.authenticate(secret);
      const listed = tokens.list()[0].last_used_at;
      expect(listed).to.be.a('string');
      await tokens.close(); // the last flush
      const again = new TokenStore(store, SCOPES);
      await again.init();
      expect(again.list()[0].last_used_at).to.equal(listed);
      await again.close();
    });
  });

  it('through the daemon: used, listed, another token created (directory publish), restarted: last_used_at is kept', async () => {
    const dir = tempDir('hostd-lastused-');
    const d = await startDaemon({ dataDir: dir });
    const secret = await d.token('bot', ['files.read']);
    expect((await d.request('GET', '/api/v1/folders', { token: secret })).status).to.equal(200);
    const listed = await d.admin.request('GET', '/admin/tokens');
    const seen = listed.body.tokens.find((t: any) => t.name === 'bot').last_used_at;
    expect(seen).to.be.a('string');
    await d.token('other', ['files.read']); // publishes the token directory, which lists the tokens
    await d.stop();
    const d2 = await startDaemon({ dataDir: dir });
    const after = await d2.admin.request('GET', '/admin/tokens');
    expect(after.body.tokens.find((t: any) => t.name === 'bot').last_used_at).to.equal(seen);
    await d2.stop();
  });
});

describe("tokens: the local administrator's name is not a token name", function () {
  this.timeout(60_000);

  it('a token named admin (in any case) is refused with 400: activity rows and task owners name the administrator so', async () => {
    const dir = tempDir('hostd-opname-');
    await withStore(dir, async (store) => {
      const tokens = new TokenStore(store, SCOPES);
      await tokens.init();
      try {
        for (const name of ['admin', 'Admin', 'ADMIN']) {
          const err = await tokens.create(name, ['files.read']).then(
            () => null,
            (e) => e,
          );
          expect(err, name).to.include({ status: 400, message: `token name '${name}' is reserved for the local administrator` });
        }
        expect(tokens.list()).to.deep.equal([]);
        expect((await tokens.create('admins', ['files.read'])).token.name).to.equal('admins');
      } finally {
        await tokens.close();
      }
    });
  });
});
