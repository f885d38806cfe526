/**
 * GET /peers: every member with its reachability as the periodic health probe
 * last saw it (this node is always reachable, last seen now). A node outside
 * any cluster lists only itself.
 */
import type { PeerInfo } from '../daemon/domain.js';
import type { ClusterNode } from './node.js';

export function clusterPeers(node: ClusterNode, selfName: string): () => Promise<PeerInfo[]> {
  return async (): Promise<PeerInfo[]> => {
      const now = new Date().toISOString();
      if (!node.inCluster) {
        return [{ peer_id: node.selfId, name: selfName, address: null, is_self: true, reachable: true, last_seen: now }];
      }
      return node.membership.list().map((m) => {
        const self = m.peer_id === node.selfId;
        const h = node.healthOf(m.peer_id);
        return {
          peer_id: m.peer_id,
          name: m.name,
          address: m.address,
          is_self: self,
          reachable: self ? true : !!h?.reachable,
          last_seen: self ? now : h?.last_seen ?? null,
        };
      });
  };
}
