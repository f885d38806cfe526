/** The peers domain: GET /peers lists the members of this node's cluster (just itself outside one). */
import { defineDomain } from '../domain.js';
import { peerHandlers } from './handlers.js';

export const peersDomain = defineDomain({
  name: 'peers',
  ops: ['peers_list'] as const,
  async open(deps) {
    return {
      handlers: peerHandlers(deps.cluster),
      info: async () => ({ name: 'peers', built: true, runtimes: [] }),
      close: async () => {},
    };
  },
});
