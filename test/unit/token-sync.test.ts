import { expect } from 'chai';
import { TokenSync } from '../../cluster/token-sync.js';
import type { ClusterMesh } from '../../cluster/mesh.js';
import type { Member } from '../../cluster/membership.js';
import type { OwnerSnapshot } from '../../cluster/directory.js';

/** A mesh with just what pull() touches: a client whose TokenDirectoryGet answers the member's current tokens, and a directory. */
function fakeMesh(peerTokens: () => string[]) {
  const held = new Map<string, OwnerSnapshot>();
  let gets = 0;
  let version = 0;
  const mesh = {
    log: { debug() {}, error() {} },
    clients: {
      async unary(_m: Member, method: string) {
        expect(method).to.equal('TokenDirectoryGet');
        gets++;
        await new Promise((r) => setTimeout(r, 30));
        return { owner: 'node_b', version: ++version, tokens: peerTokens().map((id) => ({ id, name: id, scopes: ['files.read'] })) };
      },
    },
    directory: {
      async accept(s: OwnerSnapshot) {
        held.set(s.owner, s);
        return true;
      },
    },
  };
  const knows = (id: string) => !!held.get('node_b')?.tokens.some((t) => t.id === id);
  return { mesh: mesh as unknown as ClusterMesh, knows, gets: () => gets };
}

const peer = { peer_id: 'node_b', name: 'b' } as Member;

describe('token directory pulls after a miss', () => {
  it('concurrent misses share one pull, and every one of them sees its result', async () => {
    const f = fakeMesh(() => ['t1']);
    const sync = new TokenSync(f.mesh);
    // What the forwarded-call path does: pull, then look the token up again.
    const seen = await Promise.all(
      Array.from({ length: 20 }, async () => {
        await sync.pull(peer);
        return f.knows('t1');
      }),
    );
    expect(seen).to.deep.equal(Array(20).fill(true));
    expect(f.gets()).to.equal(1);
  });

  it('a miss within a second of the last pull waits for the next pull instead of going without (a token made just now)', async () => {
    const tokens = ['t1'];
    const f = fakeMesh(() => tokens);
    const sync = new TokenSync(f.mesh);
    await sync.pull(peer);
    tokens.push('t2'); // made on the member after the first pull
    const t0 = Date.now();
    await Promise.all([sync.pull(peer), sync.pull(peer), sync.pull(peer)]);
    expect(f.knows('t2')).to.equal(true);
    expect(f.gets()).to.equal(2); // the rate bound holds: one more pull for the three misses
    expect(Date.now() - t0).to.be.at.least(900);
  });
});
