/**
 * What GET /peers lists. A single node is its own cluster of one until it is
 * paired; the cluster module supplies a fuller directory once it runs.
 */
import type { Handler } from './context.js';
import type { NodeIdentity } from './node.js';

export interface PeerInfo {
  peer_id: string;
  name: string;
  address: string | null;
  is_self: boolean;
  reachable: boolean;
  last_seen: string | null;
}

export interface PeerDirectory {
  list(): Promise<PeerInfo[]>;
}

export function soloDirectory(self: NodeIdentity, address: string | null): PeerDirectory {
  return {
    list: async () => [{ peer_id: self.id, name: self.name, address, is_self: true, reachable: true, last_seen: new Date().toISOString() }],
  };
}

export function peerHandlers(dir: PeerDirectory): { peers_list: Handler } {
  return { peers_list: async () => ({ peers: await dir.list() }) };
}
