import type { HandlersOf } from '../../api/registry/handlers.js';
import type { ClusterPorts } from '../domain.js';

export function peerHandlers(cluster: Pick<ClusterPorts, 'peers'>): HandlersOf<'peers_list'> {
  return { peers_list: async () => ({ peers: await cluster.peers() }) };
}
