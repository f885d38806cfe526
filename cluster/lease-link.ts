/**
 * What the proxy-holder lease (cluster/lease.ts) and the replicated proxy
 * configuration (cluster/proxy-config.ts) need from the cluster: who the
 * members are, and a way to send them JSON over the Lease and ProxyConfig
 * RPCs (mutual TLS, a deadline on every call).
 */
import type { LeasePeerLink } from './lease.js';
import type { ClusterNode } from './node.js';
import { DEADLINES } from './node.js';

export type { LeasePeerLink };

export function leaseLink(node: ClusterNode, deadlineMs = DEADLINES.lease): LeasePeerLink {
  return {
    selfId: node.selfId,
    // All member ids, this node included (just this node outside a cluster).
    members: () => (node.inCluster ? node.membership.ids() : [node.selfId]),
    // Rejects when the member is unreachable or misses the deadline.
    send: (peerId, msg) => node.sendJson(peerId, 'Lease', msg, deadlineMs),
    sendProxyConfig: (peerId, msg) => node.sendJson(peerId, 'ProxyConfig', msg, deadlineMs),
    // A fresh Health call with a short deadline, not the cached probe result.
    isReachable: (peerId) => node.isReachable(peerId),
  };
}
