/**
 * The state every job of the cluster shares: this node's credentials, the
 * member list, the token directory, the join tokens, the outgoing channels
 * and the listener, plus the few primitives the jobs use (push the member
 * list, send a JSON message, record an audit event). The jobs themselves live
 * in their own files: pairing (init, join, remove, leave), probes, token
 * sync, forwarding (origin side) and the RPC service (peer side); cluster.ts
 * puts them together.
 */
import net from 'node:net';
import os from 'node:os';
import type { Logger } from 'pino';
import type { Config } from '../daemon/config.js';
import type { Store } from '../daemon/store/store.js';
import type { NodeIdentity } from '../daemon/domain.js';
import { SerialQueue } from '../daemon/lib/serial.js';
import { ClusterFiles, type NodeCredentials } from '../certs/files.js';
import { fingerprint } from '../certs/pki.js';
import { JoinTokens } from '../certs/join-tokens.js';
import { Membership, type Member } from './membership.js';
import { TokenDirectory } from './directory.js';
import type { ClusterServer } from './server.js';
import { PeerClients } from './client.js';
import { Circuits } from './circuit.js';
import type * as W from './proto.js';

/** Deadlines of the cluster's own traffic (forwarded calls use config.forwardDeadlineMs). */
export const DEADLINES = {
  probe: 1000,
  push: 2000,
  join: 15_000,
  lease: 2000,
  reachable: 1000,
};

/** What the lease and the replicated configuration plug in; every hook is optional. */
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

export type { AuditEvent, Cause } from './audit.js';
import type { AuditEvent, Cause } from './audit.js';

/** The tokens this node holds, as the directory publishes them (never a secret). */
export interface TokenSource {
  list(): Array<{ id: string; name: string; scopes: string[] }>;
  onChange(cb: () => void): void;
}

export interface ClusterOptions {
  config: Config;
  identity: NodeIdentity;
  store: Store;
  tokens: TokenSource;
  /** Records an event in the activity log (the recorder dispatch owns). */
  audit(event: AuditEvent): Promise<void>;
  log: Logger;
  /** Health probe period (default 2000 ms, env HOSTD_CLUSTER_PROBE_MS). */
  probeIntervalMs?: number;
  /** Told when a member's probe answers after not answering (up) or stops answering (down): the event stream's members.* events. */
  onReachability?(member: { peer_id: string; name: string }, reachable: boolean): void;
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

export class ClusterMesh {
  readonly selfId: string;
  readonly membership: Membership;
  readonly directory: TokenDirectory;
  readonly joinTokens: JoinTokens;
  readonly files: ClusterFiles;
  readonly clients: PeerClients;
  /** Reachability of the other members, as the probe last saw it. */
  readonly health = new Map<string, PeerHealth>();
  /** Whether forwarded calls to a member go, or fail fast (circuit.ts). */
  readonly circuits = new Circuits();
  /** Membership changes made on this node, one at a time. */
  readonly changes = new SerialQueue();
  server!: ClusterServer;
  creds: NodeCredentials | null = null;
  hooks: LeaseHooks = {};
  closed = false;
  /** Bound listener address and the address members use to reach this node. */
  listen = { host: '', port: 0 };
  advertise = '';

  constructor(readonly options: ClusterOptions) {
    this.selfId = options.identity.id;
    this.membership = new Membership(options.store);
    this.directory = new TokenDirectory(options.store, this.selfId);
    this.joinTokens = new JoinTokens(options.store);
    this.files = new ClusterFiles(options.config.dataDir);
    this.clients = new PeerClients(() => this.creds);
  }

  get log(): Logger {
    return this.options.log;
  }

  get name(): string {
    return this.options.identity.name;
  }

  get inCluster(): boolean {
    return this.membership.inCluster && this.creds !== null;
  }

  /** Members other than this node. */
  others(): Member[] {
    return this.membership.list().filter((m) => m.peer_id !== this.selfId);
  }

  status(): ClusterStatus {
    return {
      in_cluster: this.inCluster,
      cluster_id: this.membership.clusterId || null,
      node_id: this.selfId,
      name: this.name,
      address: this.advertise,
      listen: hostPort(this.listen.host, this.listen.port),
      membership_version: this.membership.version,
      forward_deadline_ms: this.options.config.forwardDeadlineMs,
      members: this.membership.list().map((m) => {
        const self = m.peer_id === this.selfId;
        const h = this.health.get(m.peer_id);
        return { ...m, is_self: self, reachable: self || !!h?.reachable, last_seen: self ? new Date().toISOString() : (h?.last_seen ?? null) };
      }),
    };
  }

  selfRecord(certPem: string): Member {
    return { peer_id: this.selfId, name: this.name, address: this.advertise, fingerprint: fingerprint(certPem), joined_at: new Date().toISOString() };
  }

  wireMembership(): W.MembershipUpdate {
    return { version: this.membership.version, members: this.membership.list(), from: this.selfId, cluster_id: this.membership.clusterId };
  }

  /** Pushes the member list to `targets`; failures are left to the probe's anti-entropy. */
  async pushMembership(targets: Member[], quick = false): Promise<void> {
    const msg = this.wireMembership();
    await Promise.allSettled(
      targets.map((m) =>
        this.clients.unary<W.Ack>(m, 'Membership', msg, quick ? DEADLINES.probe : DEADLINES.push).catch((err) => {
          this.log.debug({ peer_id: m.peer_id, err: (err as Error).message }, 'membership push failed');
        }),
      ),
    );
  }

  /** Sends an opaque JSON message to a member's Lease or ProxyConfig RPC. */
  async sendJson(peerId: string, method: 'Lease' | 'ProxyConfig', msg: unknown, deadlineMs = DEADLINES.lease): Promise<unknown> {
    const m = this.membership.get(peerId);
    if (!m) throw new Error(`peer '${peerId}' is not a member`);
    const r = await this.clients.unary<W.Json>(m, method, { json: Buffer.from(JSON.stringify(msg ?? null)) }, deadlineMs);
    return parseJsonBytes(r.json) ?? null;
  }

  /** Records an event; `cause` when it came over the cluster port (else it is the local operator's). */
  async audit(category: AuditEvent['category'], severity: AuditEvent['severity'], summary: string, target: string, cause?: Cause): Promise<void> {
    await this.record({ category, severity, summary, target, ...cause });
  }

  /** Records a complete event; a failed write is logged, never thrown. */
  async record(event: AuditEvent): Promise<void> {
    await this.options.audit(event).catch((err) => this.log.error({ err }, 'activity write failed'));
  }
}

export function parseJsonBytes(bytes: Buffer | Uint8Array | undefined): unknown {
  if (!bytes || bytes.length === 0) return undefined;
  try {
    return JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    return undefined;
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
        log.warn(
          { advertise: `${a.address}:${boundPort}` },
          'cluster listens on every interface; advertising the first non-loopback address (set HOSTD_CLUSTER_ADVERTISE to choose)',
        );
        return hostPort(a.address, boundPort);
      }
    }
  }
  return hostPort('127.0.0.1', boundPort);
}
