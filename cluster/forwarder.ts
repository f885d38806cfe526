/**
 * The Forwarder dispatch uses (api/dispatch.ts): resolves a peer_id against
 * the member list and runs the call on that member over the cluster channel.
 *
 *   peer_id of this node      -> 'self' (runs here)
 *   peer_id of another member -> 'peer' (forwarded; deadline config.forwardDeadlineMs)
 *   anything else             -> undefined (dispatch answers 404)
 */
import type { Forwarder } from '../api/dispatch.js';
import type { ClusterNode } from './node.js';

export function clusterForwarder(node: ClusterNode): Forwarder {
  return {
    resolve(peerId) {
      if (peerId === node.selfId) return 'self';
      return node.inCluster && node.membership.get(peerId) ? 'peer' : undefined;
    },
    forward(peerId, op, args, caller, requestId) {
      return node.forward(peerId, op.name, args, caller, requestId);
    },
  };
}
