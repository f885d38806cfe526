/**
 * Keeps the cluster's token directory current: this node publishes its own
 * tokens (id, name, scopes; never a secret) on every change and pushes the
 * snapshot to every member; a member that misses a token on a forwarded call
 * pulls the origin's snapshot (at most once a second per member).
 */
import * as grpc from '@grpc/grpc-js';
import type { Member } from './membership.js';
import type { OwnerSnapshot } from './directory.js';
import { RpcError } from './server.js';
import { DEADLINES, type ClusterMesh } from './mesh.js';
import type * as W from './proto.js';

export class TokenSync {
  private readonly pulls = new Map<string, number>();
  private readonly inFlight = new Map<string, Promise<void>>();
  private publishChain: Promise<unknown> = Promise.resolve();

  constructor(private readonly mesh: ClusterMesh) {}

  /** Publishes this node's tokens to the directory and pushes the snapshot to every member when it changed. */
  publish(): Promise<void> {
    const run = this.publishChain.then(async () => {
      const { snap, changed } = await this.mesh.directory.setSelf(this.mesh.options.tokens.list().map((t) => ({ id: t.id, name: t.name, scopes: t.scopes })));
      if (changed && this.mesh.inCluster) await this.push(snap, this.mesh.others());
    });
    this.publishChain = run.catch((err) => this.mesh.log.error({ err }, 'token directory publish failed'));
    return this.publishChain as Promise<void>;
  }

  async push(snap: OwnerSnapshot, targets: Member[]): Promise<void> {
    await Promise.allSettled(
      targets.map((m) =>
        this.mesh.clients.unary<W.Ack>(m, 'TokenDirectory', snap, DEADLINES.push).catch((err) => {
          this.mesh.log.debug({ peer_id: m.peer_id, err: (err as Error).message }, 'token directory push failed');
        }),
      ),
    );
  }

  /**
   * Fetches a member's own token snapshot after a directory miss, at most once
   * a second per member. Misses that arrive while a pull is in flight or
   * scheduled share it, and a miss within a second of the last pull waits for
   * the next one instead of failing: a call made right after its token was
   * created (before the push arrived) must not 403 because an earlier miss
   * used up the second.
   */
  pull(peer: Member): Promise<void> {
    const pending = this.inFlight.get(peer.peer_id);
    if (pending) return pending;
    const wait = Math.max(0, (this.pulls.get(peer.peer_id) ?? 0) + 1000 - Date.now());
    const run = (async () => {
      try {
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        this.pulls.set(peer.peer_id, Date.now());
        const snap = await this.mesh.clients.unary<W.DirectorySnapshot>(peer, 'TokenDirectoryGet', {}, DEADLINES.push);
        if (snap.owner === peer.peer_id) await this.mesh.directory.accept(fromWireSnapshot(snap));
      } catch (err) {
        this.mesh.log.debug({ peer_id: peer.peer_id, err: (err as Error).message }, 'token directory pull failed');
      } finally {
        this.inFlight.delete(peer.peer_id);
      }
    })();
    this.inFlight.set(peer.peer_id, run);
    return run;
  }

  async rpcTokenDirectory(req: W.DirectorySnapshot, peer: Member): Promise<W.Ack> {
    if (req.owner !== peer.peer_id) throw new RpcError(grpc.status.PERMISSION_DENIED, 'a member may publish only its own token directory');
    const took = await this.mesh.directory.accept(fromWireSnapshot(req));
    return { ok: true, detail: took ? 'stored' : 'not newer' };
  }

  async rpcTokenDirectoryGet(_peer: Member): Promise<W.DirectorySnapshot> {
    return this.mesh.directory.snapshot(this.mesh.selfId) ?? { owner: this.mesh.selfId, version: 0, tokens: [] };
  }
}

export function fromWireSnapshot(wire: W.DirectorySnapshot): OwnerSnapshot {
  return {
    owner: wire.owner,
    version: Number(wire.version),
    tokens: (wire.tokens ?? []).map((t) => ({ id: t.id, name: t.name, scopes: [...(t.scopes ?? [])] })),
  };
}
