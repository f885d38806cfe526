/**
 * The operator's cluster commands on the local admin socket (hostctl cluster
 * ...). Each change writes one activity row (join tokens: category auth;
 * init, join, remove: category system).
 *
 *   POST   /admin/cluster/init                 {}
 *   POST   /admin/cluster/join-token           {ttl_seconds?}      -> {token, expires_at}
 *   POST   /admin/cluster/join                 {address, token}
 *   DELETE /admin/cluster/members/<peer_id>
 *   POST   /admin/cluster/leave                 this node leaves (tells the others, forgets the cluster)
 *   GET    /admin/cluster/status
 */
import type { AdminApi } from '../daemon/admin.js';
import { badRequest } from '../daemon/lib/errors.js';
import type { Cluster } from './cluster.js';

export function registerClusterAdmin(admin: AdminApi, cluster: Cluster): void {
  const pairing = cluster.pairing;
  admin.route('POST', /^\/admin\/cluster\/init$/, async () => [201, await pairing.init()]);
  admin.route('POST', /^\/admin\/cluster\/join-token$/, async (_req, body) => {
    let ttlMs: number | undefined;
    if (body.ttl_seconds !== undefined) {
      if (typeof body.ttl_seconds !== 'number' || !Number.isFinite(body.ttl_seconds)) throw badRequest("argument 'ttl_seconds' must be a number");
      ttlMs = Math.round(body.ttl_seconds * 1000);
    }
    return [201, await pairing.createJoinToken(ttlMs)];
  });
  admin.route('POST', /^\/admin\/cluster\/join$/, async (_req, body) => {
    if (typeof body.address !== 'string' || !body.address) throw badRequest("argument 'address' must be host:port");
    if (typeof body.token !== 'string' || !body.token) throw badRequest("argument 'token' is required");
    return [200, await pairing.join(body.address, body.token)];
  });
  admin.route('DELETE', /^\/admin\/cluster\/members\/[^/]+$/, async (req) => {
    const id = decodeURIComponent(/\/cluster\/members\/([^/?]+)/.exec(req.originalUrl ?? req.url)?.[1] ?? '');
    return [200, await pairing.remove(id)];
  });
  admin.route('POST', /^\/admin\/cluster\/leave$/, async () => [200, await pairing.leaveCluster()]);
  admin.route('GET', /^\/admin\/cluster\/status$/, async () => [200, cluster.status()]);
}
