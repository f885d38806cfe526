/**
 * Who is in the cluster: the operator's commands (init, join-token, join,
 * remove, leave), the accepting side of a join, and member-list updates
 * pushed by other members. Changes made on this node run one at a time.
 */
import crypto from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { badGateway, badRequest, conflict, forbidden, notFound, type ApiError } from '../daemon/lib/errors.js';
import type { NodeCredentials } from '../certs/files.js';
import { createCa, createCsr, CsrError, fingerprint, generateKeyPair, issueNodeCert, issuedBy, keyMatchesCert, nodeIdOf, signCsr } from '../certs/pki.js';
import { DEFAULT_JOIN_TTL_MS, parseJoinToken } from '../certs/join-tokens.js';
import type { Member } from './membership.js';
import { RpcError } from './server.js';
import { fetchPinnedCa, grpcCode, joinCall } from './client.js';
import { DEADLINES, parseJsonBytes, type Cause, type ClusterMesh, type ClusterStatus } from './mesh.js';
import type { Probes } from './probes.js';
import { fromWireSnapshot, type TokenSync } from './token-sync.js';
import type * as W from './proto.js';
import { JoinGuard, checkJoinRequest, remoteHost, tokenRefusal } from './join-guard.js';

/** What the local operator may give as the address of a member to join through. */
const JOIN_THROUGH = /^\[?[^\]]*?\]?:\d{1,5}$/;

export class Pairing {
  /** Refused joins from the cluster port: bounded work, bounded trace. */
  readonly guard: JoinGuard;

  constructor(
    private readonly mesh: ClusterMesh,
    private readonly probes: Probes,
    private readonly tokens: TokenSync,
  ) {
    this.guard = new JoinGuard(mesh.log.child({ mod: 'cluster' }), (e) => mesh.record(e));
  }

  init(): Promise<ClusterStatus> {
    const mesh = this.mesh;
    return mesh.changes.run(async () => {
      if (mesh.membership.inCluster) throw conflict(`this node is already in cluster ${mesh.membership.clusterId}; remove it from that cluster first`);
      const clusterId = 'cl_' + crypto.randomBytes(6).toString('hex');
      const ca = createCa(clusterId);
      const keys = generateKeyPair();
      const certPem = issueNodeCert(ca, keys.publicKeyPem, mesh.selfId);
      const creds: NodeCredentials = { caCertPem: ca.certPem, caKeyPem: ca.keyPem, certPem, keyPem: keys.privateKeyPem };
      mesh.files.save(creds);
      await this.becomeMember(creds, clusterId, 1, [mesh.selfRecord(certPem)]);
      await mesh.hooks
        .onInit?.()
        .catch((err) => mesh.log.warn({ err }, 'the proxy lease could not be initialised for the new cluster; take it over with POST /proxy/move'));
      await mesh.audit('system', 'info', `Cluster ${clusterId} created with this node as its first member`, `cluster/${clusterId}`);
      mesh.log.info({ cluster_id: clusterId, address: mesh.advertise }, 'cluster created');
      return mesh.status();
    });
  }

  async createJoinToken(ttlMs = DEFAULT_JOIN_TTL_MS): Promise<{ token: string; expires_at: string }> {
    if (!this.mesh.inCluster) throw conflict("this node is not in a cluster; run 'hostctl cluster init' first");
    if (!Number.isFinite(ttlMs) || ttlMs < 1000 || ttlMs > 7 * 24 * 3600 * 1000) throw badRequest('join token lifetime must be between 1 second and 7 days');
    const out = await this.mesh.joinTokens.create(fingerprint(this.mesh.creds!.caCertPem), ttlMs);
    await this.mesh.audit('auth', 'info', `Cluster join token ${out.id} created (expires ${out.expires_at})`, `cluster/join-tokens/${out.id}`);
    return { token: out.token, expires_at: out.expires_at };
  }

  join(address: string, tokenText: string): Promise<ClusterStatus> {
    const mesh = this.mesh;
    return mesh.changes.run(async () => {
      if (mesh.membership.inCluster) throw conflict(`this node is already in cluster ${mesh.membership.clusterId}`);
      let parsed;
      try {
        parsed = parseJoinToken(tokenText);
      } catch (err) {
        throw badRequest((err as Error).message);
      }
      if (!JOIN_THROUGH.test(address)) throw badRequest(`address must look like host:port, got '${address}'`);
      let caPem: string;
      try {
        caPem = await fetchPinnedCa(address, parsed.caFingerprint);
      } catch (err) {
        throw badGateway(`cannot join through ${address}: ${(err as Error).message}`);
      }
      const keys = generateKeyPair();
      const csr = createCsr(keys, mesh.selfId);
      let reply: W.JoinReply;
      try {
        reply = await joinCall<W.JoinReply>(
          address,
          caPem,
          'Join',
          { token: tokenText.trim(), csr_pem: csr, node_id: mesh.selfId, name: mesh.name, address: mesh.advertise },
          DEADLINES.join,
        );
      } catch (err) {
        throw joinError(address, err);
      }
      if (fingerprint(reply.ca_cert_pem) !== parsed.caFingerprint) throw badGateway(`${address} answered with a different cluster CA`);
      if (!issuedBy(reply.cert_pem, caPem) || !keyMatchesCert(keys.privateKeyPem, reply.cert_pem) || nodeIdOf(reply.cert_pem) !== mesh.selfId) {
        throw badGateway(`${address} answered with a certificate that is not valid for this node`);
      }
      const members = (reply.membership?.members ?? []).map(fromWire);
      if (!members.some((m) => m.peer_id === mesh.selfId && m.fingerprint === fingerprint(reply.cert_pem)))
        throw badGateway(`${address} answered with a member list that does not include this node`);
      const creds: NodeCredentials = { caCertPem: reply.ca_cert_pem, caKeyPem: reply.ca_key_pem, certPem: reply.cert_pem, keyPem: keys.privateKeyPem };
      mesh.files.save(creds);
      await mesh.directory.clearOthers();
      for (const s of reply.directory ?? []) if (members.some((m) => m.peer_id === s.owner)) await mesh.directory.accept(fromWireSnapshot(s));
      await this.becomeMember(creds, reply.membership.cluster_id, Number(reply.membership.version), members);
      const lease = parseJsonBytes(reply.lease_json);
      if (lease !== undefined) await mesh.hooks.adoptLease?.(lease);
      const proxy = parseJsonBytes(reply.proxy_config_json);
      if (proxy !== undefined) await mesh.hooks.adoptProxyConfig?.(proxy);
      await mesh.hooks.afterJoin?.().catch((err) => mesh.log.warn({ err }, 'catching up after the join failed; the periodic sync retries'));
      await mesh.audit('system', 'info', `Joined cluster ${reply.membership.cluster_id} through ${address}`, `cluster/${reply.membership.cluster_id}`);
      mesh.log.info({ cluster_id: reply.membership.cluster_id, through: address, members: members.length }, 'joined cluster');
      return mesh.status();
    });
  }

  remove(peerId: string): Promise<{ removed: Member }> {
    const mesh = this.mesh;
    return mesh.changes.run(async () => {
      if (!mesh.inCluster) throw conflict('this node is not in a cluster');
      const m = mesh.membership.get(peerId);
      if (!m) throw notFound(`peer '${peerId}' is not a member of this cluster`);
      if (peerId === mesh.selfId) throw conflict('a node cannot remove itself: run the remove command on another member');
      const list = mesh.membership.list().filter((x) => x.peer_id !== peerId);
      await mesh.membership.replace(mesh.membership.clusterId, mesh.membership.version + 1, list);
      await this.forget([m]);
      // Tell the others; tell the removed node too (best effort) so that it stops.
      await Promise.allSettled([mesh.pushMembership(mesh.others()), mesh.pushMembership([m], true)]);
      mesh.clients.drop(m.peer_id);
      await mesh.audit('system', 'warning', `Node '${m.name}' (${m.peer_id}) removed from the cluster`, `peers/${m.peer_id}`);
      mesh.log.warn({ peer_id: m.peer_id, name: m.name }, 'member removed');
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
    const mesh = this.mesh;
    return mesh.changes.run(async () => {
      if (!mesh.membership.inCluster) throw conflict('this node is not in a cluster');
      const others = mesh.others();
      if (mesh.inCluster && others.length) {
        const list = mesh.membership.list().filter((m) => m.peer_id !== mesh.selfId);
        const msg: W.MembershipUpdate = { version: mesh.membership.version + 1, members: list, from: mesh.selfId, cluster_id: mesh.membership.clusterId };
        await Promise.allSettled(others.map((m) => mesh.clients.unary<W.Ack>(m, 'Membership', msg, DEADLINES.push)));
      }
      await this.leave('the local operator (hostctl cluster leave)');
      return mesh.status();
    });
  }

  /** Serves again after a restart (credentials checked by the caller); tells everyone if our address or name changed. */
  async resume(): Promise<void> {
    const mesh = this.mesh;
    const self = mesh.membership.get(mesh.selfId)!;
    if (self.address !== mesh.advertise || self.name !== mesh.name) {
      const list = mesh.membership.list().map((m) => (m.peer_id === mesh.selfId ? { ...m, address: mesh.advertise, name: mesh.name } : m));
      await mesh.membership.replace(mesh.membership.clusterId, mesh.membership.version + 1, list);
      void mesh.pushMembership(mesh.others());
    }
    await this.tokens.publish();
    this.probes.start();
  }

  // ---------------------------------------------------------------- RPCs

  /**
   * A node without a certificate asks to join (the one RPC open to it). Every
   * field is checked before anything is looked up, written or logged; the
   * join token is spent outside the membership queue, so refused attempts do
   * not hold up membership changes. See join-guard.ts for what a refusal
   * leaves behind.
   */
  async rpcJoin(req: W.JoinRequest, peer: string): Promise<W.JoinReply> {
    const mesh = this.mesh;
    const remote = remoteHost(peer);
    if (!this.guard.enter()) {
      this.guard.refused(remote, 'busy', 'too many joins at once');
      throw new RpcError(grpc.status.RESOURCE_EXHAUSTED, 'too many joins at once; try again in a few seconds');
    }
    try {
      if (!mesh.inCluster) throw new RpcError(grpc.status.FAILED_PRECONDITION, 'this node is not in a cluster');
      const bad = checkJoinRequest(req);
      if (bad) {
        this.guard.refused(remote, bad.reason, bad.message);
        throw new RpcError(grpc.status.INVALID_ARGUMENT, bad.message);
      }
      // A node id that is already a member is refused before the token is spent.
      if (mesh.membership.get(req.node_id)) throw new RpcError(grpc.status.ALREADY_EXISTS, `node ${req.node_id} is already a member; remove it first`);
      let joinTokenId: string;
      try {
        joinTokenId = (await mesh.joinTokens.consume(req.token)).id;
      } catch (err) {
        const refusal = tokenRefusal(err);
        this.guard.refused(remote, refusal.reason, refusal.message, req.node_id);
        throw new RpcError(grpc.status.PERMISSION_DENIED, refusal.message);
      }
      return await this.admit(req, remote, joinTokenId);
    } finally {
      this.guard.leave();
    }
  }

  /** Adds a node whose request and join token were accepted; one membership change at a time. */
  private admit(req: W.JoinRequest, remote: string, joinTokenId: string): Promise<W.JoinReply> {
    const mesh = this.mesh;
    return mesh.changes.run(async () => {
      if (!mesh.inCluster) throw new RpcError(grpc.status.FAILED_PRECONDITION, 'this node is not in a cluster');
      if (mesh.membership.get(req.node_id)) throw new RpcError(grpc.status.ALREADY_EXISTS, `node ${req.node_id} is already a member; remove it first`);
      let certPem: string;
      try {
        certPem = signCsr({ certPem: mesh.creds!.caCertPem, keyPem: mesh.creds!.caKeyPem }, req.csr_pem, req.node_id);
      } catch (err) {
        throw new RpcError(grpc.status.INVALID_ARGUMENT, err instanceof CsrError ? err.message : `cannot sign the request: ${(err as Error).message}`);
      }
      const member: Member = {
        peer_id: req.node_id,
        name: req.name || req.node_id,
        address: req.address,
        fingerprint: fingerprint(certPem),
        joined_at: new Date().toISOString(),
      };
      await mesh.membership.replace(mesh.membership.clusterId, mesh.membership.version + 1, [...mesh.membership.list(), member]);
      // Everyone else learns of the new member before the joiner hears back.
      await mesh.pushMembership(mesh.others().filter((m) => m.peer_id !== member.peer_id));
      await mesh.audit('system', 'info', `Node '${member.name}' (${member.peer_id}) joined the cluster from ${member.address}`, `peers/${member.peer_id}`, {
        actor: `peer:${member.peer_id}`,
        metadata: { transport: 'cluster', remote, join_token: joinTokenId },
      });
      mesh.log.info({ peer_id: member.peer_id, name: member.name, address: member.address }, 'member joined');
      this.probes.soon();
      const lease = await mesh.hooks.exportLease?.();
      const proxy = await mesh.hooks.exportProxyConfig?.();
      return {
        cert_pem: certPem,
        ca_cert_pem: mesh.creds!.caCertPem,
        ca_key_pem: mesh.creds!.caKeyPem,
        membership: mesh.wireMembership(),
        directory: mesh.directory.all(),
        lease_json: Buffer.from(lease === undefined ? '' : JSON.stringify(lease)),
        proxy_config_json: Buffer.from(proxy === undefined ? '' : JSON.stringify(proxy)),
      };
    });
  }

  async rpcMembership(req: W.MembershipUpdate, peer: Member): Promise<W.Ack> {
    const mesh = this.mesh;
    if (req.cluster_id !== mesh.membership.clusterId)
      throw new RpcError(grpc.status.FAILED_PRECONDITION, `this node is in cluster ${mesh.membership.clusterId}, not ${req.cluster_id}`);
    const list = (req.members ?? []).map(fromWire);
    const version = Number(req.version);
    return mesh.changes.run(async () => {
      if (!mesh.membership.shouldAdopt(version, list)) return { ok: true, detail: 'not newer' };
      if (!list.some((m) => m.peer_id === mesh.selfId)) {
        await this.leave(`${peer.name} (${peer.peer_id})`, { actor: `peer:${peer.peer_id}`, metadata: { transport: 'cluster' } });
        return { ok: true, detail: 'left' };
      }
      const gone = mesh.membership.list().filter((m) => !list.some((x) => x.peer_id === m.peer_id && x.fingerprint === m.fingerprint));
      await mesh.membership.replace(mesh.membership.clusterId, version, list);
      await this.forget(gone);
      mesh.log.info({ version, members: list.length, from: peer.peer_id }, 'member list updated');
      this.probes.soon();
      return { ok: true, detail: 'adopted' };
    });
  }

  // ---------------------------------------------------------------- internals

  private async becomeMember(creds: NodeCredentials, clusterId: string, version: number, members: Member[]): Promise<void> {
    const mesh = this.mesh;
    mesh.creds = creds;
    mesh.clients.reset();
    await mesh.membership.replace(clusterId, version, members);
    mesh.server.setCredentials(creds);
    await this.tokens.publish();
    this.probes.start();
  }

  /** Drops what this node holds for members that left. */
  private async forget(gone: Member[]): Promise<void> {
    const mesh = this.mesh;
    for (const m of gone) {
      mesh.server.dropFingerprint(m.fingerprint);
      mesh.clients.drop(m.peer_id);
      mesh.health.delete(m.peer_id);
      mesh.circuits.forget(m.peer_id);
      await mesh.directory.dropOwner(m.peer_id);
    }
  }

  /** This node was removed by another member: back to a cluster of one. */
  private async leave(by: string, cause?: Cause): Promise<void> {
    const mesh = this.mesh;
    const clusterId = mesh.membership.clusterId;
    this.probes.stop();
    mesh.server.setCredentials(null);
    mesh.creds = null;
    mesh.clients.reset();
    mesh.health.clear();
    await mesh.membership.clear();
    await mesh.directory.clearOthers();
    await mesh.joinTokens.clear();
    mesh.files.remove();
    await mesh.hooks.onLeave?.().catch(() => undefined);
    await mesh.audit('system', 'warning', `This node was removed from cluster ${clusterId} by ${by}`, `cluster/${clusterId}`, cause);
    mesh.log.warn({ cluster_id: clusterId, by }, 'removed from the cluster');
  }
}

function fromWire(wire: W.WireMember): Member {
  return { peer_id: wire.peer_id, name: wire.name, address: wire.address, fingerprint: wire.fingerprint, joined_at: wire.joined_at };
}

function joinError(address: string, err: unknown): ApiError {
  const e = err as grpc.ServiceError;
  const detail = e?.details || e?.message || String(err);
  switch (grpcCode(err)) {
    case grpc.status.PERMISSION_DENIED:
      return forbidden(`join refused by ${address}: ${detail}`);
    case grpc.status.ALREADY_EXISTS:
      return conflict(`join refused by ${address}: ${detail}`);
    case grpc.status.FAILED_PRECONDITION:
      return conflict(`join refused by ${address}: ${detail}`);
    case grpc.status.INVALID_ARGUMENT:
      return badRequest(`join refused by ${address}: ${detail}`);
    case grpc.status.DEADLINE_EXCEEDED:
      return badGateway(`${address} did not answer the join within ${DEADLINES.join} ms`);
    default:
      return badGateway(`cannot join through ${address}: ${detail}`);
  }
}
