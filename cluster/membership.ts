/**
 * The member list: store sublevel 'peers' (one record per member, this node
 * included) plus a version in sublevel 'cluster' under 'state'. The whole list
 * is replaced at once (one batch) whenever a member joins or is removed; a
 * node adopts a pushed list only when its version is higher than its own (a
 * tie between different lists is broken by a digest, so every node settles on
 * the same one).
 */
import crypto from 'node:crypto';
import type { Store, Sub } from '../daemon/store/store.js';

export interface Member {
  peer_id: string;
  name: string;
  address: string;
  fingerprint: string;
  joined_at: string;
}

export interface ClusterState {
  cluster_id: string;
  version: number;
  created_at: string;
}

export class Membership {
  private readonly peers: Sub<Member>;
  private readonly meta: Sub<ClusterState>;
  private members = new Map<string, Member>();
  private byFp = new Map<string, Member>();
  private state: ClusterState | null = null;

  constructor(private readonly store: Store) {
    this.peers = store.sub<Member>('peers');
    this.meta = store.sub<ClusterState>('cluster');
  }

  async load(): Promise<void> {
    this.state = (await this.meta.get('state')) ?? null;
    this.index(await this.peers.values().all());
  }

  private index(list: Member[]): void {
    this.members = new Map(list.map((m) => [m.peer_id, m]));
    this.byFp = new Map(list.map((m) => [m.fingerprint, m]));
  }

  get inCluster(): boolean {
    return this.state !== null && this.members.size > 0;
  }

  get version(): number {
    return this.state?.version ?? 0;
  }

  get clusterId(): string {
    return this.state?.cluster_id ?? '';
  }

  list(): Member[] {
    return [...this.members.values()].sort((a, b) => a.joined_at.localeCompare(b.joined_at) || a.peer_id.localeCompare(b.peer_id));
  }

  ids(): string[] {
    return this.list().map((m) => m.peer_id);
  }

  get(peerId: string): Member | undefined {
    return this.members.get(peerId);
  }

  byFingerprint(fp: string): Member | undefined {
    return this.byFp.get(fp);
  }

  /** Replaces the whole list and its version, atomically. */
  async replace(clusterId: string, version: number, list: Member[]): Promise<void> {
    const old = [...this.members.keys()];
    const state: ClusterState = { cluster_id: clusterId, version, created_at: this.state?.created_at ?? new Date().toISOString() };
    await this.store.batch([
      ...old.filter((id) => !list.some((m) => m.peer_id === id)).map((id) => ({ type: 'del' as const, sub: this.peers, key: id })),
      ...list.map((m) => ({ type: 'put' as const, sub: this.peers, key: m.peer_id, value: m })),
      { type: 'put', sub: this.meta, key: 'state', value: state },
    ]);
    this.state = state;
    this.index(list);
  }

  /** Forgets the cluster entirely (this node was removed). */
  async clear(): Promise<void> {
    await this.store.batch([
      ...[...this.members.keys()].map((id) => ({ type: 'del' as const, sub: this.peers, key: id })),
      { type: 'del', sub: this.meta, key: 'state' },
    ]);
    this.state = null;
    this.index([]);
  }

  /**
   * Whether a pushed list should replace ours: a higher version wins; at the
   * same version, different lists are ordered by digest.
   */
  shouldAdopt(version: number, list: Member[]): boolean {
    if (version > this.version) return true;
    if (version < this.version) return false;
    const theirs = digest(list);
    const ours = digest(this.list());
    return theirs !== ours && theirs > ours;
  }
}

export function digest(list: Member[]): string {
  const canon = [...list].sort((a, b) => a.peer_id.localeCompare(b.peer_id)).map((m) => [m.peer_id, m.name, m.address, m.fingerprint, m.joined_at]);
  return crypto.createHash('sha256').update(JSON.stringify(canon)).digest('hex');
}
