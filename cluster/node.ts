/**
 * This node's part in the cluster: the listener, the member list, the token
 * directory, the outgoing channels, the health probe, and the operator's
 * commands (init, join-token, join, remove, status). The forwarder, the peer
 * directory behind GET /peers and the lease link are views onto it.
 */
import { SerialQueue } from '../daemon/lib/serial.js';
import crypto from 'node:crypto';
import os from 'node:os';
import net from 'node:net';
import type { Logger } from 'pino';
import * as grpc from '@grpc/grpc-js';
import type { Config } from '../daemon/config.js';
import type { Store } from '../daemon/store/store.js';
import type { NodeIdentity } from '../daemon/node.js';
import type { TokenStore } from '../daemon/auth/tokens.js';
import type { ActivityLog } from '../daemon/activity/log.js';
import type { Dispatch } from '../api/dispatch.js';
import type { Caller } from '../daemon/lib/caller.js';
import { ApiError, badGateway, badRequest, conflict, errorBody, forbidden, notFound } from '../daemon/lib/errors.js';
import { ClusterFiles, type NodeCredentials } from '../certs/files.js';
import { createCa, createCsr, CsrError, fingerprint, generateKeyPair, issueNodeCert, issuedBy, keyMatchesCert, nodeIdOf, signCsr } from '../certs/pki.js';
import { DEFAULT_JOIN_TTL_MS, JoinTokenError, JoinTokens, parseJoinToken } from '../certs/join-tokens.js';
import { Membership, type Member } from './membership.js';
import { TokenDirectory, type OwnerSnapshot } from './directory.js';
import { ClusterServer, RpcError, type ClusterHandlers } from './server.js';
import { PeerClients, fetchPinnedCa, grpcCode, joinCall } from './client.js';
import { MAX_ARGS_BYTES } from './call-stream.js';
import type * as W from './proto.js';

/** Deadlines of the cluster's own traffic (forwarded calls use config.forwardDeadlineMs). */
export const DEADLINES = {
  probe: 1000,
  push: 2000,
  join: 15_000,
  lease: 2000,
  reachable: 1000,
};

/** What the lease module (cluster/lease.ts) plugs in; every hook is optional. */
export interface LeaseHooks {
  /** An incoming Lease RPC payload from member `from`. */
  handleLease?(msg: unknown, from: string): Promise<unknown>;
  /** An incoming ProxyConfig RPC payload from member `from`. */
  handleProxyConfig?(msg: unknown, from: string): Promise<unknown>;
  /** `hostctl cluster init`: this node becomes the first holder (epoch 1). */
  onInit?(): Promise<void>;
  /** Lease record and proxy configuration a joining node receives. */
  exportLease?(): Promise<unknown> | unknown;
  exportProxyConfig?(): Promise<unknown> | unknown;
  /** On the joining node: adopt what the accepting member sent. */
  adoptLease?(rec: unknown): Promise<void>;
  adoptProxyConfig?(rec: unknown): Promise<void>;
  /** On the joining node, once it serves: catch up (lease sync, proxy configuration pull). */
  afterJoin?(): Promise<void>;
  /** This node left or was removed from its cluster. */
  onLeave?(): Promise<void>;
}

export interface ClusterOptions {
  config: Config;
  identity: NodeIdentity;
  store: Store;
  tokens: TokenStore;
  activity: ActivityLog;
  log: Logger;
  /** Health probe period (default 2000 ms, env HOSTD_CLUSTER_PROBE_MS). */
  probeIntervalMs?: number;
}

export interface PeerHealth {
  reachable: boolean;
  last_seen: string | null;
  probing: boolean;
}

export interface ClusterStatus {
  in_cluster: boolean;
  cluster_id: string | null;
  node_id: string;
  name: string;
  address: string;
  listen: string;
  membership_version: number;
  forward_deadline_ms: number;
  members: Array<Member & { is_self: boolean; reachable: boolean; last_seen: string | null }>;
}

const ACTOR = 'local-admin';

export class ClusterNode implements ClusterHandlers {
  readonly membership: Membership;
  readonly directory: TokenDirectory;
  readonly joinTokens: JoinTokens;
  readonly files: ClusterFiles;
  readonly clients: PeerClients;
  private server!: ClusterServer;
  private creds: NodeCredentials | null = null;
  private dispatch?: Dispatch;
  private hooks: LeaseHooks = {};
  private readonly peerHealth = new Map<string, PeerHealth>();
  private probeTimer: NodeJS.Timeout | null = null;
  private readonly pulls = new Map<string, number>();
  private publishChain: Promise<unknown> = Promise.resolve();
  /** Membership changes made on this node, one at a time. */
  private readonly ops = new SerialQueue();
  private closed = false;
  /** Bound listener address and the address members use to reach this node. */
  listen = { host: '', port: 0 };
  advertise = '';
  readonly selfId: string;

  private constructor(private readonly o: ClusterOptions) {
    this.selfId = o.identity.id;
    this.membership = new Membership(o.store);
    this.directory = new TokenDirectory(o.store, this.selfId);
    this.joinTokens = new JoinTokens(o.store);
    this.files = new ClusterFiles(o.config.dataDir);
    this.clients = new PeerClients(() => this.creds);
  }

  /** Loads the cluster state, binds the cluster listener, and resumes serving when this node is in a cluster. */
  static async start(o: ClusterOptions): Promise<ClusterNode> {
    const n = new ClusterNode(o);
    await n.membership.load();
    await n.directory.load();
    n.server = new ClusterServer(n, (fp) => n.membership.byFingerprint(fp), o.log.child({ mod: 'cluster' }));
    try {
      n.listen = await n.server.listen(o.config.cluster.host, o.config.cluster.port);
    } catch (err) {
      await n.server.close().catch(() => undefined);
      throw new Error(`cannot listen for cluster peers on ${hostPort(o.config.cluster.host, o.config.cluster.port)}: ${(err as Error).message} (set HOSTD_CLUSTER_ADDR)`);
    }
    n.advertise = advertiseAddress(o.config, n.listen.port, o.log);
    o.tokens.onChange(() => void n.publishTokens());
    if (n.membership.inCluster) {
      const creds = n.files.load();
      const self = n.membership.get(n.selfId);
      if (!creds || !self || fingerprint(creds.certPem) !== self.fingerprint) {
        o.log.error({ dir: n.files.dir }, 'cluster state is inconsistent (certificates missing or not matching the member list); this node serves no cluster traffic until it is removed and joins again');
      } else {
        n.creds = creds;
        n.server.setCredentials(creds);
        if (self.address !== n.advertise || self.name !== o.identity.name) {
          // Our address (or name) changed since the last start: tell everyone.
          const list = n.membership.list().map((m) => (m.peer_id === n.selfId ? { ...m, address: n.advertise, name: o.identity.name } : m));
          await n.membership.replace(n.membership.clusterId, n.membership.version + 1, list);
          void n.pushMembership(n.others());
        }
        await n.publishTokens();
        n.startProbe();
      }
    }
    return n;
  }

  /** The bound cluster listener as host:port (the real port when 0 was configured). */
  get listenAddress(): string {
    return hostPort(this.listen.host, this.listen.port);
  }

  setDispatch(d: Dispatch): void {
    this.dispatch = d;
  }

  setLeaseHooks(h: LeaseHooks): void {
    this.hooks = h;
  }

  get inCluster(): boolean {
    return this.membership.inCluster && this.creds !== null;
  }

  /** Members other than this node. */
  others(): Member[] {
    return this.membership.list().filter((m) => m.peer_id !== this.selfId);
  }

  healthOf(peerId: string): PeerHealth | undefined {
    return this.peerHealth.get(peerId);
  }

  // ---------------------------------------------------------------- operator commands


  init(): Promise<ClusterStatus> {
    return this.ops.run(async () => {
      if (this.membership.inCluster) throw conflict(`this node is already in cluster ${this.membership.clusterId}; remove it from that cluster first`);
      const clusterId = 'cl_' + crypto.randomBytes(6).toString('hex');
      const ca = createCa(clusterId);
      const keys = generateKeyPair();
      const certPem = issueNodeCert(ca, keys.publicKeyPem, this.selfId);
      const creds: NodeCredentials = { caCertPem: ca.certPem, caKeyPem: ca.keyPem, certPem, keyPem: keys.privateKeyPem };
      this.files.save(creds);
      await this.becomeMember(creds, clusterId, 1, [this.selfRecord(certPem)]);
      await this.hooks.onInit?.().catch((err) => this.o.log.warn({ err }, 'the proxy lease could not be initialised for the new cluster; take it over with POST /proxy/move'));
      await this.record('system', 'info', `Cluster ${clusterId} created with this node as its first member`, `cluster/${clusterId}`);
      this.o.log.info({ cluster_id: clusterId, address: this.advertise }, 'cluster created');
      return this.status();
    });
  }

  async createJoinToken(ttlMs = DEFAULT_JOIN_TTL_MS): Promise<{ token: string; expires_at: string }> {
    if (!this.inCluster) throw conflict("this node is not in a cluster; run 'hostctl cluster init' first");
    if (!Number.isFinite(ttlMs) || ttlMs < 1000 || ttlMs > 7 * 24 * 3600 * 1000) throw badRequest('join token lifetime must be between 1 second and 7 days');
    const out = await this.joinTokens.create(fingerprint(this.creds!.caCertPem), ttlMs);
    await this.record('auth', 'info', `Cluster join token ${out.id} created (expires ${out.expires_at})`, `cluster/join-tokens/${out.id}`);
    return { token: out.token, expires_at: out.expires_at };
  }

  join(address: string, tokenText: string): Promise<ClusterStatus> {
    return this.ops.run(async () => {
      if (this.membership.inCluster) throw conflict(`this node is already in cluster ${this.membership.clusterId}`);
      let parsed;
      try {
        parsed = parseJoinToken(tokenText);
      } catch (err) {
        throw badRequest((err as Error).message);
      }
      if (!/^\[?[^\]]*?\]?:\d{1,5}$/.test(address)) throw badRequest(`address must look like host:port, got '${address}'`);
      let caPem: string;
      try {
        caPem = await fetchPinnedCa(address, parsed.caFingerprint);
      } catch (err) {
        throw badGateway(`cannot join through ${address}: ${(err as Error).message}`);
      }
      const keys = generateKeyPair();
      const csr = createCsr(keys, this.selfId);
      let reply: W.JoinReply;
      try {
        reply = await joinCall<W.JoinReply>(address, caPem, 'Join', { token: tokenText.trim(), csr_pem: csr, node_id: this.selfId, name: this.o.identity.name, address: this.advertise }, DEADLINES.join);
      } catch (err) {
        throw joinError(address, err);
      }
      if (fingerprint(reply.ca_cert_pem) !== parsed.caFingerprint) throw badGateway(`${address} answered with a different cluster CA`);
      if (!issuedBy(reply.cert_pem, caPem) || !keyMatchesCert(keys.privateKeyPem, reply.cert_pem) || nodeIdOf(reply.cert_pem) !== this.selfId) {
        throw badGateway(`${address} answered with a certificate that is not valid for this node`);
      }
      const members = (reply.membership?.members ?? []).map(fromWire);
      if (!members.some((m) => m.peer_id === this.selfId && m.fingerprint === fingerprint(reply.cert_pem))) throw badGateway(`${address} answered with a member list that does not include this node`);
      const creds: NodeCredentials = { caCertPem: reply.ca_cert_pem, caKeyPem: reply.ca_key_pem, certPem: reply.cert_pem, keyPem: keys.privateKeyPem };
      this.files.save(creds);
      await this.directory.clearOthers();
      for (const s of reply.directory ?? []) if (members.some((m) => m.peer_id === s.owner)) await this.directory.accept(fromWireSnapshot(s));
      await this.becomeMember(creds, reply.membership.cluster_id, Number(reply.membership.version), members);
      const lease = parseJsonBytes(reply.lease_json);
      if (lease !== undefined) await this.hooks.adoptLease?.(lease);
      const proxy = parseJsonBytes(reply.proxy_config_json);
      if (proxy !== undefined) await this.hooks.adoptProxyConfig?.(proxy);
      await this.hooks.afterJoin?.().catch((err) => this.o.log.warn({ err }, 'catching up after the join failed; the periodic sync retries'));
      await this.record('system', 'info', `Joined cluster ${reply.membership.cluster_id} through ${address}`, `cluster/${reply.membership.cluster_id}`);
      this.o.log.info({ cluster_id: reply.membership.cluster_id, through: address, members: members.length }, 'joined cluster');
      return this.status();
    });
  }

  remove(peerId: string): Promise<{ removed: Member }> {
    return this.ops.run(async () => {
      if (!this.inCluster) throw conflict('this node is not in a cluster');
      const m = this.membership.get(peerId);
      if (!m) throw notFound(`peer '${peerId}' is not a member of this cluster`);
      if (peerId === this.selfId) throw conflict('a node cannot remove itself: run the remove command on another member');
      const list = this.membership.list().filter((x) => x.peer_id !== peerId);
      await this.membership.replace(this.membership.clusterId, this.membership.version + 1, list);
      await this.forget([m]);
      // Tell the others; tell the removed node too (best effort) so that it stops.
      await Promise.allSettled([this.pushMembership(this.others()), this.pushMembership([m], true)]);
      this.clients.drop(m.peer_id);
      await this.record('system', 'warning', `Node '${m.name}' (${m.peer_id}) removed from the cluster`, `peers/${m.peer_id}`);
      this.o.log.warn({ peer_id: m.peer_id, name: m.name }, 'member removed');
      return { removed: m };
    });
  }

  /**
   * This node leaves its cluster: the other members are told (best effort: a
   * node that was already removed is refused, which is fine) and this node
   * forgets the cluster and its certificates. The way out for a node that was
   * removed while it was down.
   */
  leaveCluster(): Promise<ClusterStatus> {
    return this.ops.run(async () => {
      if (!this.membership.inCluster) throw conflict('this node is not in a cluster');
      const others = this.others();
      if (this.inCluster && others.length) {
        const list = this.membership.list().filter((m) => m.peer_id !== this.selfId);
        const msg: W.MembershipUpdate = { version: this.membership.version + 1, members: list, from: this.selfId, cluster_id: this.membership.clusterId };
        await Promise.allSettled(others.map((m) => this.clients.unary<W.Ack>(m, 'Membership', msg, DEADLINES.push)));
      }
      await this.leave('the local operator (hostctl cluster leave)');
      return this.status();
    });
  }

  status(): ClusterStatus {
    return {
      in_cluster: this.inCluster,
      cluster_id: this.membership.clusterId || null,
      node_id: this.selfId,
      name: this.o.identity.name,
      address: this.advertise,
      listen: hostPort(this.listen.host, this.listen.port),
      membership_version: this.membership.version,
      forward_deadline_ms: this.o.config.forwardDeadlineMs,
      members: this.membership.list().map((m) => {
        const self = m.peer_id === this.selfId;
        const h = this.peerHealth.get(m.peer_id);
        return { ...m, is_self: self, reachable: self || !!h?.reachable, last_seen: self ? new Date().toISOString() : h?.last_seen ?? null };
      }),
    };
  }

  private selfRecord(certPem: string): Member {
    return { peer_id: this.selfId, name: this.o.identity.name, address: this.advertise, fingerprint: fingerprint(certPem), joined_at: new Date().toISOString() };
  }

  private async becomeMember(creds: NodeCredentials, clusterId: string, version: number, members: Member[]): Promise<void> {
    this.creds = creds;
    this.clients.reset();
    await this.membership.replace(clusterId, version, members);
    this.server.setCredentials(creds);
    await this.publishTokens();
    this.startProbe();
  }

  /** Drops what this node holds for members that left. */
  private async forget(gone: Member[]): Promise<void> {
    for (const m of gone) {
      this.server.dropFingerprint(m.fingerprint);
      this.clients.drop(m.peer_id);
      this.peerHealth.delete(m.peer_id);
      await this.directory.dropOwner(m.peer_id);
    }
  }

  /** This node was removed by another member: back to a cluster of one. */
  private async leave(by: string): Promise<void> {
    const clusterId = this.membership.clusterId;
    this.stopProbe();
    this.server.setCredentials(null);
    this.creds = null;
    this.clients.reset();
    this.peerHealth.clear();
    await this.membership.clear();
    await this.directory.clearOthers();
    await this.joinTokens.clear();
    this.files.remove();
    await this.hooks.onLeave?.().catch(() => undefined);
    await this.record('system', 'warning', `This node was removed from cluster ${clusterId} by ${by}`, `cluster/${clusterId}`);
    this.o.log.warn({ cluster_id: clusterId, by }, 'removed from the cluster');
  }

  private async record(category: 'auth' | 'system', severity: 'info' | 'warning', summary: string, target: string): Promise<void> {
    await this.o.activity.record({ category, severity, summary, target, actor: ACTOR, metadata: { transport: 'api', via: 'admin-socket' } }).catch((err) => this.o.log.error({ err }, 'activity write failed'));
  }

  // ---------------------------------------------------------------- pushes and probes

  private wireMembership(): W.MembershipUpdate {
    return { version: this.membership.version, members: this.membership.list(), from: this.selfId, cluster_id: this.membership.clusterId };
  }

  /** Pushes the member list to `targets`; failures are left to the probe's anti-entropy. */
  private async pushMembership(targets: Member[], quick = false): Promise<void> {
    const msg = this.wireMembership();
    await Promise.allSettled(targets.map((m) => this.clients.unary<W.Ack>(m, 'Membership', msg, quick ? DEADLINES.probe : DEADLINES.push).catch((err) => {
      this.o.log.debug({ peer_id: m.peer_id, err: (err as Error).message }, 'membership push failed');
    })));
  }

  /** Publishes this node's tokens to the directory and pushes the snapshot to every member when it changed. */
  publishTokens(): Promise<void> {
    const run = this.publishChain.then(async () => {
      const { snap, changed } = await this.directory.setSelf(this.o.tokens.list().map((t) => ({ id: t.id, name: t.name, scopes: t.scopes })));
      if (changed && this.inCluster) await this.pushDirectory(snap, this.others());
    });
    this.publishChain = run.catch((err) => this.o.log.error({ err }, 'token directory publish failed'));
    return this.publishChain as Promise<void>;
  }

  private async pushDirectory(snap: OwnerSnapshot, targets: Member[]): Promise<void> {
    await Promise.allSettled(targets.map((m) => this.clients.unary<W.Ack>(m, 'TokenDirectory', snap, DEADLINES.push).catch((err) => {
      this.o.log.debug({ peer_id: m.peer_id, err: (err as Error).message }, 'token directory push failed');
    })));
  }

  private startProbe(): void {
    if (this.probeTimer || this.closed) return;
    const p = this.o.probeIntervalMs;
    const every = p !== undefined && Number.isFinite(p) && p >= 50 ? p : 2000;
    this.probeTimer = setInterval(() => this.probeAll(), every);
    this.probeTimer.unref();
    this.probeAll();
  }

  private stopProbe(): void {
    if (this.probeTimer) clearInterval(this.probeTimer);
    this.probeTimer = null;
  }

  /** Probes every member shortly (a member was added: don't wait a whole period to see it). */
  private probeSoon(): void {
    if (this.closed) return;
    setTimeout(() => this.probeAll(), 300).unref();
  }

  private probeAll(): void {
    if (!this.inCluster) return;
    for (const m of this.others()) void this.probe(m);
  }

  /** One health probe; on success also repairs a peer that missed a membership or directory push. */
  async probe(m: Member): Promise<boolean> {
    let h = this.peerHealth.get(m.peer_id);
    if (!h) this.peerHealth.set(m.peer_id, (h = { reachable: false, last_seen: null, probing: false }));
    if (h.probing) return h.reachable;
    h.probing = true;
    try {
      const r = await this.clients.unary<W.HealthReply>(m, 'Health', { from: this.selfId, membership_version: this.membership.version }, DEADLINES.probe);
      h.reachable = true;
      h.last_seen = new Date().toISOString();
      if (Number(r.membership_version) < this.membership.version) void this.pushMembership([m]);
      const mine = this.directory.snapshot(this.selfId);
      if (mine && Number(r.directory_versions?.[this.selfId] ?? 0) < mine.version) void this.pushDirectory(mine, [m]);
      return true;
    } catch {
      h.reachable = false;
      return false;
    } finally {
      h.probing = false;
    }
  }

  /** A fresh reachability check (for the lease), not the cached probe result. */
  async isReachable(peerId: string): Promise<boolean> {
    if (peerId === this.selfId) return true;
    const m = this.membership.get(peerId);
    if (!m || !this.inCluster) return false;
    try {
      await this.clients.unary<W.HealthReply>(m, 'Health', { from: this.selfId, membership_version: this.membership.version }, DEADLINES.reachable);
      return true;
    } catch {
      return false;
    }
  }

  /** Sends an opaque JSON message to a member's Lease or ProxyConfig RPC. */
  async sendJson(peerId: string, method: 'Lease' | 'ProxyConfig', msg: unknown, deadlineMs = DEADLINES.lease): Promise<unknown> {
    const m = this.membership.get(peerId);
    if (!m) throw new Error(`peer '${peerId}' is not a member`);
    const r = await this.clients.unary<W.Json>(m, method, { json: Buffer.from(JSON.stringify(msg ?? null)) }, deadlineMs);
    return parseJsonBytes(r.json) ?? null;
  }

  // ---------------------------------------------------------------- forwarding (origin side)

  /**
   * Runs an operation on member `peerId` for `caller`. Its 4xx answers come
   * back unchanged; unreachable, too slow, or a 5xx become 502 naming it.
   */
  async forward(peerId: string, operation: string, args: Record<string, unknown>, caller: Caller, requestId: string): Promise<unknown> {
    const m = this.membership.get(peerId);
    if (!m) throw notFound(`peer '${peerId}' not found`);
    if (caller.tokenId === 'admin') {
      throw forbidden(`calls made over the local admin socket run only on this node; to reach peer '${m.name}' (${m.peer_id}), use an API token over HTTP or run hostctl on that node`);
    }
    const label = `peer '${m.name}' (${m.peer_id})`;
    const deadline = this.o.config.forwardDeadlineMs;
    const argsJson = JSON.stringify(args);
    if (argsJson.length > MAX_ARGS_BYTES / 3 && Buffer.byteLength(argsJson) > MAX_ARGS_BYTES) throw new ApiError(413, `arguments of ${operation} are too large to forward to ${label}`);
    let reply: W.CallOutcome;
    try {
      reply = await this.clients.call(m, {
        operation,
        args_json: argsJson,
        caller: { token_id: caller.tokenId, token_name: caller.tokenName, scopes: caller.scopes },
        origin: this.selfId,
        request_id: requestId,
      }, deadline);
    } catch (err) {
      const code = grpcCode(err);
      if (code === grpc.status.DEADLINE_EXCEEDED) throw badGateway(`${label} did not answer within ${deadline} ms`);
      if (code === grpc.status.UNAUTHENTICATED || code === grpc.status.PERMISSION_DENIED) throw badGateway(`${label} refused this node: ${(err as grpc.ServiceError).details}`);
      throw badGateway(`${label} is unreachable at ${m.address}: ${grpcDetail(err)}`);
    }
    if (reply.ok) return reply.result_json ? JSON.parse(reply.result_json) : {};
    const status = Number(reply.status) || 500;
    if (status >= 500) throw badGateway(`${label} failed to run ${operation}: ${reply.error} (${status})`);
    throw new ApiError(status, reply.error);
  }

  // ---------------------------------------------------------------- RPC handlers (member side)

  /** One forwarded call (a frame of `peer`'s CallStream): origin, token directory and scope checks, then dispatch. */
  async rpcCall(req: W.CallFrame, peer: Member): Promise<W.CallOutcome> {
    const fail = (status: number, error: string): W.CallOutcome => ({ ok: false, result_json: '', status, error });
    if (!this.dispatch) return fail(503, 'this node is starting');
    if (req.origin !== peer.peer_id) {
      this.o.log.warn({ peer_id: peer.peer_id, claimed: req.origin }, 'forwarded call refused: origin does not match the client certificate');
      return fail(403, `the calling member is '${peer.peer_id}', not '${req.origin}'`);
    }
    const c = req.caller ?? { token_id: '', token_name: '', scopes: [] };
    let tok = this.directory.lookup(peer.peer_id, c.token_id);
    if (!tok) {
      await this.pullDirectory(peer);
      tok = this.directory.lookup(peer.peer_id, c.token_id);
    }
    if (!tok) {
      this.o.log.warn({ peer_id: peer.peer_id, token_id: c.token_id }, 'forwarded call refused: token unknown to the directory');
      return fail(403, `token '${c.token_name || c.token_id}' is not a token of member '${peer.name}' (${peer.peer_id}) in this node's token directory`);
    }
    const claimed = [...new Set(c.scopes ?? [])];
    const extra = claimed.filter((s) => !tok!.scopes.includes(s));
    if (extra.length) {
      this.o.log.warn({ peer_id: peer.peer_id, token_id: tok.id, extra }, 'forwarded call refused: claimed scopes exceed the token');
      return fail(403, `forwarded scopes exceed those of token '${tok.name}': ${extra.join(', ')}`);
    }
    const caller: Caller = { tokenId: tok.id, tokenName: tok.name, scopes: claimed, transport: 'cluster', origin: peer.peer_id };
    let args: Record<string, unknown>;
    try {
      const parsed = JSON.parse(req.args_json || '{}');
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
      args = parsed;
    } catch {
      return fail(400, 'forwarded arguments are not a JSON object');
    }
    // One hop only: the origin already resolved peer_id to this node.
    delete args.peer_id;
    try {
      const result = await this.dispatch.call(req.operation, args, caller, req.request_id || `fwd-${crypto.randomBytes(4).toString('hex')}`);
      return { ok: true, result_json: JSON.stringify(result ?? {}), status: 200, error: '' };
    } catch (err) {
      const e = errorBody(err);
      return fail(e.status, e.body.error);
    }
  }

  /** Fetches a member's own token snapshot after a directory miss (at most once a second per member). */
  private async pullDirectory(peer: Member): Promise<void> {
    const last = this.pulls.get(peer.peer_id) ?? 0;
    if (Date.now() - last < 1000) return;
    this.pulls.set(peer.peer_id, Date.now());
    try {
      const snap = await this.clients.unary<W.DirectorySnapshot>(peer, 'TokenDirectoryGet', {}, DEADLINES.push);
      if (snap.owner === peer.peer_id) await this.directory.accept(fromWireSnapshot(snap));
    } catch (err) {
      this.o.log.debug({ peer_id: peer.peer_id, err: (err as Error).message }, 'token directory pull failed');
    }
  }

  async rpcHealth(_req: W.HealthRequest, _peer: Member): Promise<W.HealthReply> {
    return { node_id: this.selfId, name: this.o.identity.name, membership_version: this.membership.version, directory_versions: this.directory.versions() };
  }

  async rpcJoin(req: W.JoinRequest, remote: string): Promise<W.JoinReply> {
    return this.ops.run(async () => {
      if (!this.inCluster) throw new RpcError(grpc.status.FAILED_PRECONDITION, 'this node is not in a cluster');
      try {
        await this.joinTokens.consume(req.token);
      } catch (err) {
        this.o.log.warn({ remote, node_id: req.node_id, reason: (err as JoinTokenError).reason }, 'join refused');
        await this.record('auth', 'warning', `Join by node ${req.node_id || '?'} from ${remote} refused: ${(err as Error).message}`, `cluster/join`);
        throw new RpcError(grpc.status.PERMISSION_DENIED, (err as Error).message);
      }
      if (!/^[A-Za-z0-9_.-]{1,64}$/.test(req.node_id)) throw new RpcError(grpc.status.INVALID_ARGUMENT, 'node_id is not valid');
      if (this.membership.get(req.node_id)) throw new RpcError(grpc.status.ALREADY_EXISTS, `node ${req.node_id} is already a member; remove it first`);
      if (!/^\[?[^\]]*?\]?:\d{1,5}$/.test(req.address)) throw new RpcError(grpc.status.INVALID_ARGUMENT, `address must look like host:port, got '${req.address}'`);
      let certPem: string;
      try {
        certPem = signCsr({ certPem: this.creds!.caCertPem, keyPem: this.creds!.caKeyPem }, req.csr_pem, req.node_id);
      } catch (err) {
        throw new RpcError(grpc.status.INVALID_ARGUMENT, err instanceof CsrError ? err.message : `cannot sign the request: ${(err as Error).message}`);
      }
      const member: Member = { peer_id: req.node_id, name: (req.name || req.node_id).slice(0, 128), address: req.address, fingerprint: fingerprint(certPem), joined_at: new Date().toISOString() };
      await this.membership.replace(this.membership.clusterId, this.membership.version + 1, [...this.membership.list(), member]);
      // Everyone else learns of the new member before the joiner hears back.
      await this.pushMembership(this.others().filter((m) => m.peer_id !== member.peer_id));
      await this.record('system', 'info', `Node '${member.name}' (${member.peer_id}) joined the cluster from ${member.address}`, `peers/${member.peer_id}`);
      this.o.log.info({ peer_id: member.peer_id, name: member.name, address: member.address }, 'member joined');
      this.probeSoon();
      const lease = await this.hooks.exportLease?.();
      const proxy = await this.hooks.exportProxyConfig?.();
      return {
        cert_pem: certPem,
        ca_cert_pem: this.creds!.caCertPem,
        ca_key_pem: this.creds!.caKeyPem,
        membership: this.wireMembership(),
        directory: this.directory.all(),
        lease_json: Buffer.from(lease === undefined ? '' : JSON.stringify(lease)),
        proxy_config_json: Buffer.from(proxy === undefined ? '' : JSON.stringify(proxy)),
      };
    });
  }

  async rpcMembership(req: W.MembershipUpdate, peer: Member): Promise<W.Ack> {
    if (req.cluster_id !== this.membership.clusterId) throw new RpcError(grpc.status.FAILED_PRECONDITION, `this node is in cluster ${this.membership.clusterId}, not ${req.cluster_id}`);
    const list = (req.members ?? []).map(fromWire);
    const version = Number(req.version);
    return this.ops.run(async () => {
      if (!this.membership.shouldAdopt(version, list)) return { ok: true, detail: 'not newer' };
      if (!list.some((m) => m.peer_id === this.selfId)) {
        await this.leave(`${peer.name} (${peer.peer_id})`);
        return { ok: true, detail: 'left' };
      }
      const gone = this.membership.list().filter((m) => !list.some((x) => x.peer_id === m.peer_id && x.fingerprint === m.fingerprint));
      await this.membership.replace(this.membership.clusterId, version, list);
      await this.forget(gone);
      this.o.log.info({ version, members: list.length, from: peer.peer_id }, 'member list updated');
      this.probeSoon();
      return { ok: true, detail: 'adopted' };
    });
  }

  async rpcTokenDirectory(req: W.DirectorySnapshot, peer: Member): Promise<W.Ack> {
    if (req.owner !== peer.peer_id) throw new RpcError(grpc.status.PERMISSION_DENIED, 'a member may publish only its own token directory');
    const took = await this.directory.accept(fromWireSnapshot(req));
    return { ok: true, detail: took ? 'stored' : 'not newer' };
  }

  async rpcTokenDirectoryGet(_peer: Member): Promise<W.DirectorySnapshot> {
    return this.directory.snapshot(this.selfId) ?? { owner: this.selfId, version: 0, tokens: [] };
  }

  async rpcLease(msg: unknown, peer: Member): Promise<unknown> {
    if (!this.hooks.handleLease) throw new RpcError(grpc.status.UNIMPLEMENTED, 'this node has no lease module');
    checkFrom(msg, peer);
    return this.hooks.handleLease(msg, peer.peer_id);
  }

  async rpcProxyConfig(msg: unknown, peer: Member): Promise<unknown> {
    if (!this.hooks.handleProxyConfig) throw new RpcError(grpc.status.UNIMPLEMENTED, 'this node has no proxy configuration store');
    checkFrom(msg, peer);
    return this.hooks.handleProxyConfig(msg, peer.peer_id);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopProbe();
    this.clients.close();
    await this.server.close();
  }
}

/** A lease or proxy-config message must name as its sender the member whose certificate sent it. */
function checkFrom(msg: unknown, peer: Member): void {
  const from = (msg as { from?: unknown } | null)?.from;
  if (from !== undefined && from !== peer.peer_id) throw new RpcError(grpc.status.PERMISSION_DENIED, `message claims to be from '${String(from)}' but was sent by '${peer.peer_id}'`);
}

function fromWire(m: W.WireMember): Member {
  return { peer_id: m.peer_id, name: m.name, address: m.address, fingerprint: m.fingerprint, joined_at: m.joined_at };
}

function fromWireSnapshot(s: W.DirectorySnapshot): OwnerSnapshot {
  return { owner: s.owner, version: Number(s.version), tokens: (s.tokens ?? []).map((t) => ({ id: t.id, name: t.name, scopes: [...(t.scopes ?? [])] })) };
}

function parseJsonBytes(b: Buffer | Uint8Array | undefined): unknown {
  if (!b || b.length === 0) return undefined;
  try {
    return JSON.parse(Buffer.from(b).toString('utf8'));
  } catch {
    return undefined;
  }
}

/** A grpc error's message without grpc-js's connection boilerplate. */
export function grpcDetail(err: unknown): string {
  const e = err as grpc.ServiceError;
  let d = e?.details || e?.message || String(err);
  d = d.replace(/\.?\s*Resolution note:.*$/s, '').replace(/^No connection established\. Last error: (Error: )?/, '');
  return d || 'no answer';
}

function joinError(address: string, err: unknown): ApiError {
  const e = err as grpc.ServiceError;
  const detail = e?.details || e?.message || String(err);
  switch (grpcCode(err)) {
    case grpc.status.PERMISSION_DENIED: return forbidden(`join refused by ${address}: ${detail}`);
    case grpc.status.ALREADY_EXISTS: return conflict(`join refused by ${address}: ${detail}`);
    case grpc.status.FAILED_PRECONDITION: return conflict(`join refused by ${address}: ${detail}`);
    case grpc.status.INVALID_ARGUMENT: return badRequest(`join refused by ${address}: ${detail}`);
    case grpc.status.DEADLINE_EXCEEDED: return badGateway(`${address} did not answer the join within ${DEADLINES.join} ms`);
    default: return badGateway(`cannot join through ${address}: ${detail}`);
  }
}

export function hostPort(host: string, port: number): string {
  return net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * The address members use to reach this node: HOSTD_CLUSTER_ADVERTISE (a
 * missing or 0 port is replaced by the bound one), else the listen address,
 * else (listening on every interface) the first non-loopback IPv4 address.
 */
export function advertiseAddress(config: Config, boundPort: number, log: Logger): string {
  const adv = config.clusterAdvertise?.trim();
  if (adv) {
    const m = /^\[?([^\]]*?)\]?(?::(\d{1,5}))?$/.exec(adv);
    if (m && m[1]) {
      const port = m[2] && Number(m[2]) !== 0 ? Number(m[2]) : boundPort;
      return hostPort(m[1], port);
    }
    log.warn({ advertise: adv }, 'HOSTD_CLUSTER_ADVERTISE is not host[:port]; ignoring it');
  }
  const host = config.cluster.host;
  if (host && host !== '0.0.0.0' && host !== '::') return hostPort(host, boundPort);
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.family === 'IPv4' && !a.internal) {
        log.warn({ advertise: `${a.address}:${boundPort}` }, 'cluster listens on every interface; advertising the first non-loopback address (set HOSTD_CLUSTER_ADVERTISE to choose)');
        return hostPort(a.address, boundPort);
      }
    }
  }
  return hostPort('127.0.0.1', boundPort);
}
