/**
 * What GET /peers lists (the directory itself is the cluster's,
 * cluster/peers.ts: a node outside any cluster lists only itself).
 */
import type { Handler } from './context.js';

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

export function peerHandlers(dir: PeerDirectory): { peers_list: Handler } {
  return { peers_list: async () => ({ peers: await dir.list() }) };
}
