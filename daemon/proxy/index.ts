/**
 * The proxy domain: the cluster's reverse proxy on Caddy. The lease holder
 * runs Caddy with the replicated configuration, carries the floating
 * addresses and answers for the base domains in DNS; a move or a takeover
 * carries all of it to the new holder (docs/proxy.md).
 */
import path from 'node:path';
import { opsOf } from '../../api/registry/index.js';
import { defineDomain } from '../domain.js';
import { proxyHandlers, proxyLeaseHandlers } from './handlers.js';
import { DataPlane } from './dataplane.js';
import { ProxyRecords } from './records.js';
import { ProxyService } from './service.js';
import { parseProxySettings } from './settings.js';

export const proxyDomain = defineDomain({
  name: 'proxy',
  ops: opsOf('proxy'),
  async open(deps) {
    const settings = parseProxySettings(deps.settings);
    const log = deps.log.child({ domain: 'proxy' });
    const records = new ProxyRecords(deps.store);
    const plane = new DataPlane({
      node: deps.node, cluster: deps.cluster, ports: deps.ports, secrets: deps.secrets, records, log, settings,
      dir: path.join(deps.config.dataDir, 'proxy'), hostdConfig: deps.config,
    });
    // The shared CA root takes a second or two to make the first time: start it now, in the background.
    void plane.caRoot().catch((err) => log.warn({ err }, 'proxy: the internal CA root could not be made yet'));
    await plane.open();
    const svc = new ProxyService({ node: deps.node, cluster: deps.cluster, ports: deps.ports, secrets: deps.secrets, records, settings, plane });
    return {
      handlers: {
        ...proxyHandlers(svc),
        ...proxyLeaseHandlers(deps.cluster, deps.node.id, (previous, now) => plane.noteTakeover(previous, now, { automatic: false })),
      },
      info: async () => ({ name: 'proxy', built: true, runtimes: plane.runtimes() }),
      close: () => plane.close(),
    };
  },
});
