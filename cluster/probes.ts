/**
 * The health probe: every member is asked for its health every period; the
 * answers say who is reachable (GET /peers, hostctl cluster status) and repair
 * a member that missed a membership or token-directory push (anti-entropy).
 */
import type { Member } from './membership.js';
import { DEADLINES, type ClusterMesh } from './mesh.js';
import type { TokenSync } from './token-sync.js';
import type * as W from './proto.js';
import { grpcDetail } from './forwarding.js';

export class Probes {
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly mesh: ClusterMesh,
    private readonly tokens: TokenSync,
  ) {}

  start(): void {
    if (this.timer || this.mesh.closed) return;
    const p = this.mesh.options.probeIntervalMs;
    const every = p !== undefined && Number.isFinite(p) && p >= 50 ? p : 2000;
    this.timer = setInterval(() => this.probeAll(), every);
    this.timer.unref();
    this.probeAll();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Probes every member shortly (a member was added: don't wait a whole period to see it). */
  soon(): void {
    if (this.mesh.closed) return;
    setTimeout(() => this.probeAll(), 300).unref();
  }

  private probeAll(): void {
    if (!this.mesh.inCluster) return;
    for (const m of this.mesh.others()) void this.probe(m);
  }

  /** One health probe; on success also repairs a peer that missed a membership or directory push. */
  async probe(member: Member): Promise<boolean> {
    let health = this.mesh.health.get(member.peer_id);
    if (!health) this.mesh.health.set(member.peer_id, (health = { reachable: false, last_seen: null, probing: false }));
    if (health.probing) return health.reachable;
    health.probing = true;
    const was = health.reachable;
    try {
      const reply = await this.mesh.clients.unary<W.HealthReply>(
        member,
        'Health',
        { from: this.mesh.selfId, membership_version: this.mesh.membership.version },
        DEADLINES.probe,
      );
      health.reachable = true;
      health.last_seen = new Date().toISOString();
      this.mesh.circuits.answered(member.peer_id);
      if (Number(reply.membership_version) < this.mesh.membership.version) void this.mesh.pushMembership([member]);
      const mine = this.mesh.directory.snapshot(this.mesh.selfId);
      if (mine && Number(reply.directory_versions?.[this.mesh.selfId] ?? 0) < mine.version) void this.tokens.push(mine, [member]);
      return true;
    } catch (err) {
      health.reachable = false;
      // Forwarded calls to it fail fast from now until it answers again.
      this.mesh.circuits.failed(member.peer_id, `health probe failed: ${grpcDetail(err)}`, true);
      return false;
    } finally {
      health.probing = false;
      if (health.reachable !== was) this.mesh.options.onReachability?.({ peer_id: member.peer_id, name: member.name }, health.reachable);
    }
  }

  /** A fresh reachability check (for the lease), not the cached probe result. */
  async isReachable(peerId: string): Promise<boolean> {
    if (peerId === this.mesh.selfId) return true;
    const m = this.mesh.membership.get(peerId);
    if (!m || !this.mesh.inCluster) return false;
    try {
      await this.mesh.clients.unary<W.HealthReply>(
        m,
        'Health',
        { from: this.mesh.selfId, membership_version: this.mesh.membership.version },
        DEADLINES.reachable,
      );
      return true;
    } catch {
      return false;
    }
  }

  async rpcHealth(_req: W.HealthRequest, _peer: Member): Promise<W.HealthReply> {
    return {
      node_id: this.mesh.selfId,
      name: this.mesh.name,
      membership_version: this.mesh.membership.version,
      directory_versions: this.mesh.directory.versions(),
    };
  }
}
