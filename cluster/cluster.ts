/**
 * This node's part in the cluster, put together from its jobs: the shared
 * state (mesh.ts), membership changes (pairing.ts), health probes
 * (probes.ts), token-directory sync (token-sync.ts), forwarding on the
 * origin side (forwarding.ts) and the RPC service on the peer side
 * (rpc-service.ts). The composition root sees only this class.
 */
import crypto from 'node:crypto';
import type { Dispatch, Forwarder } from '../api/dispatch.js';
import type { PeerInfo } from '../daemon/domain.js';
import { fingerprint } from '../certs/pki.js';
import type { LeasePeerLink } from './lease.js';
import { ClusterServer } from './server.js';
import { ClusterMesh, DEADLINES, advertiseAddress, hostPort, type ClusterOptions, type ClusterStatus, type LeaseHooks } from './mesh.js';
import { TokenSync } from './token-sync.js';
import { Probes } from './probes.js';
import { Pairing } from './pairing.js';
import { Forwarding } from './forwarding.js';
import { RpcService } from './rpc-service.js';
import type { EventService } from '../daemon/events/service.js';

export type { AuditEvent, ClusterOptions, ClusterStatus, LeaseHooks } from './mesh.js';

export class Cluster {
  readonly mesh: ClusterMesh;
  readonly pairing: Pairing;
  readonly forwarder: Forwarder;
  private readonly tokens: TokenSync;
  private readonly probes: Probes;
  private readonly rpc: RpcService;

  private constructor(options: ClusterOptions) {
    this.mesh = new ClusterMesh(options);
    this.tokens = new TokenSync(this.mesh);
    this.probes = new Probes(this.mesh, this.tokens);
    this.pairing = new Pairing(this.mesh, this.probes, this.tokens);
    this.forwarder = new Forwarding(this.mesh);
    this.rpc = new RpcService(this.mesh, this.pairing, this.probes, this.tokens);
  }

  /** Loads the cluster state, binds the cluster listener, and resumes serving when this node is in a cluster. */
  static async start(options: ClusterOptions): Promise<Cluster> {
    const cluster = new Cluster(options);
    const mesh = cluster.mesh;
    await mesh.membership.load();
    await mesh.directory.load();
    mesh.server = new ClusterServer(cluster.rpc, (fp) => mesh.membership.byFingerprint(fp), options.log.child({ mod: 'cluster' }));
    try {
      mesh.listen = await mesh.server.listen(options.config.cluster.host, options.config.cluster.port);
    } catch (err) {
      await mesh.server.close().catch(() => undefined);
      throw new Error(
        `cannot listen for cluster peers on ${hostPort(options.config.cluster.host, options.config.cluster.port)}: ${(err as Error).message} (set HOSTD_CLUSTER_ADDR)`,
      );
    }
    mesh.advertise = advertiseAddress(options.config, mesh.listen.port, options.log);
    options.tokens.onChange(() => void cluster.tokens.publish());
    if (mesh.membership.inCluster) {
      const creds = mesh.files.load();
      const self = mesh.membership.get(mesh.selfId);
      if (!creds || !self || fingerprint(creds.certPem) !== self.fingerprint) {
        options.log.error(
          { dir: mesh.files.dir },
          'cluster state is inconsistent (certificates missing or not matching the member list); this node serves no cluster traffic until it is removed and joins again',
        );
      } else {
        mesh.creds = creds;
        mesh.server.setCredentials(creds);
        await cluster.pairing.resume();
      }
    }
    return cluster;
  }

  get selfId(): string {
    return this.mesh.selfId;
  }

  get inCluster(): boolean {
    return this.mesh.inCluster;
  }

  /** The bound cluster listener as host:port (the real port when 0 was configured). */
  get listenAddress(): string {
    return hostPort(this.mesh.listen.host, this.mesh.listen.port);
  }

  get advertise(): string {
    return this.mesh.advertise;
  }

  /** Opens another member's event stream for a caller (events_stream with peer_id). */
  streamForwarder(): Forwarding['stream'] {
    const f = this.forwarder as Forwarding;
    return (peerId, caller, args, lastEventId, requestId, sink) => f.stream(peerId, caller, args, lastEventId, requestId, sink);
  }

  /** The event service forwarded event streams are served from. */
  setEvents(events: EventService): void {
    this.rpc.setEvents(events);
  }

  setDispatch(dispatch: Dispatch): void {
    this.rpc.setDispatch(dispatch);
  }

  setLeaseHooks(hooks: LeaseHooks): void {
    this.mesh.hooks = hooks;
  }

  status(): ClusterStatus {
    return this.mesh.status();
  }

  /** All member ids, this node included (just this node outside a cluster). */
  memberIds(): string[] {
    return this.mesh.inCluster ? this.mesh.membership.ids() : [this.mesh.selfId];
  }

  /**
   * GET /peers: every member with its reachability as the periodic health
   * probe last saw it (this node is always reachable, last seen now). A node
   * outside any cluster lists only itself.
   */
  async peers(): Promise<PeerInfo[]> {
    const mesh = this.mesh;
    const now = new Date().toISOString();
    if (!mesh.inCluster) return [{ peer_id: mesh.selfId, name: mesh.name, address: null, is_self: true, reachable: true, last_seen: now }];
    return mesh.membership.list().map((m) => {
      const self = m.peer_id === mesh.selfId;
      const h = mesh.health.get(m.peer_id);
      return {
        peer_id: m.peer_id,
        name: m.name,
        address: m.address,
        is_self: self,
        reachable: self ? true : !!h?.reachable,
        last_seen: self ? now : (h?.last_seen ?? null),
      };
    });
  }

  /**
   * What the lease and the replicated configuration need: who the members
   * are, and a way to send them JSON over the Lease and ProxyConfig RPCs
   * (mutual TLS, a deadline on every call).
   */
  leaseLink(deadlineMs = DEADLINES.lease): LeasePeerLink {
    return {
      selfId: this.mesh.selfId,
      members: () => this.memberIds(),
      // Rejects when the member is unreachable or misses the deadline.
      send: (peerId, msg) => this.mesh.sendJson(peerId, 'Lease', msg, deadlineMs),
      sendProxyConfig: (peerId, msg) => this.mesh.sendJson(peerId, 'ProxyConfig', msg, deadlineMs),
      // A fresh Health call with a short deadline, not the cached probe result.
      isReachable: (peerId) => this.probes.isReachable(peerId),
    };
  }

  /**
   * Key material every member derives alike: HKDF over the cluster CA's
   * private key, which every member holds since it joined. Null outside a cluster.
   */
  sharedSecret(purpose: string): Buffer | null {
    const key = this.mesh.creds?.caKeyPem;
    if (!key || !this.mesh.inCluster) return null;
    return Buffer.from(crypto.hkdfSync('sha256', Buffer.from(key), Buffer.from(this.mesh.membership.clusterId), Buffer.from(purpose), 32));
  }

  async close(): Promise<void> {
    this.mesh.closed = true;
    this.probes.stop();
    // The summary of refused joins not recorded one by one is written now, not lost.
    this.pairing.guard.close();
    this.mesh.clients.close();
    await this.mesh.server.close();
  }
}
