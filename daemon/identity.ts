/**
 * This node's identity: a stable id made at first start and kept in the store.
 */
import crypto from 'node:crypto';
import type { Store } from './store/store.js';

import type { NodeIdentity } from './domain.js';

export type { NodeIdentity };

export async function loadIdentity(store: Store, name: string): Promise<NodeIdentity> {
  const meta = store.sub<string>('meta');
  let id = await meta.get('node_id');
  if (!id) {
    id = 'node_' + crypto.randomBytes(6).toString('hex');
    await meta.put('node_id', id);
  }
  return { id, name };
}
