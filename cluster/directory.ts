/**
 * The cluster-wide token directory: for every member, the id, name and scopes
 * of the tokens it holds (never a secret or a hash). A member runs a forwarded
 * call only for a token the origin member owns, and never with more scopes
 * than that token has.
 *
 * Each member is the only authority for its own snapshot: it bumps the
 * snapshot's version on every token create/revoke and pushes it to all
 * members; a receiver keeps the higher version. Stored in sublevel
 * 'token_directory', keyed by owner node id.
 */
import type { Store, Sub } from '../daemon/store/store.js';

export interface DirEntry {
  id: string;
  name: string;
  scopes: string[];
}

export interface OwnerSnapshot {
  owner: string;
  version: number;
  tokens: DirEntry[];
}

export class TokenDirectory {
  private readonly sub: Sub<OwnerSnapshot>;
  private readonly owners = new Map<string, { snap: OwnerSnapshot; byId: Map<string, DirEntry> }>();

  constructor(
    store: Store,
    private readonly selfId: string,
  ) {
    this.sub = store.sub<OwnerSnapshot>('token_directory');
  }

  async load(): Promise<void> {
    for (const s of await this.sub.values().all()) this.set(s);
  }

  private set(snap: OwnerSnapshot): void {
    this.owners.set(snap.owner, { snap, byId: new Map(snap.tokens.map((t) => [t.id, t])) });
  }

  snapshot(owner: string): OwnerSnapshot | undefined {
    return this.owners.get(owner)?.snap;
  }

  all(): OwnerSnapshot[] {
    return [...this.owners.values()].map((o) => o.snap);
  }

  versions(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [k, v] of this.owners) out[k] = v.snap.version;
    return out;
  }

  /** The token `tokenId` as its owner published it, or undefined. */
  lookup(owner: string, tokenId: string): DirEntry | undefined {
    return this.owners.get(owner)?.byId.get(tokenId);
  }

  /** Publishes this node's own tokens; bumps the version when they changed. Returns the snapshot. */
  async setSelf(tokens: DirEntry[]): Promise<{ snap: OwnerSnapshot; changed: boolean }> {
    const canon = tokens.map((t) => ({ id: t.id, name: t.name, scopes: [...t.scopes].sort() })).sort((a, b) => a.id.localeCompare(b.id));
    const cur = this.snapshot(this.selfId);
    if (cur && JSON.stringify(cur.tokens) === JSON.stringify(canon)) return { snap: cur, changed: false };
    // Versions are milliseconds, kept strictly increasing, so a node that lost
    // its directory record still publishes a version above the old one.
    const version = Math.max((cur?.version ?? 0) + 1, Date.now());
    const snap: OwnerSnapshot = { owner: this.selfId, version, tokens: canon };
    await this.sub.put(snap.owner, snap);
    this.set(snap);
    return { snap, changed: true };
  }

  /** Stores another member's snapshot when it is newer than ours. */
  async accept(offered: OwnerSnapshot): Promise<boolean> {
    if (offered.owner === this.selfId) return false;
    const cur = this.snapshot(offered.owner);
    if (cur && cur.version >= offered.version) return false;
    const snap: OwnerSnapshot = {
      owner: offered.owner,
      version: offered.version,
      tokens: offered.tokens.map((t) => ({ id: t.id, name: t.name, scopes: [...t.scopes] })),
    };
    await this.sub.put(snap.owner, snap);
    this.set(snap);
    return true;
  }

  async dropOwner(owner: string): Promise<void> {
    if (!this.owners.has(owner)) return;
    this.owners.delete(owner);
    await this.sub.del(owner);
  }

  /** Forgets every other member's tokens (this node left its cluster). */
  async clearOthers(): Promise<void> {
    for (const owner of [...this.owners.keys()]) if (owner !== this.selfId) await this.dropOwner(owner);
  }
}
