/**
 * The proxy domain: the cluster's reverse proxy on Caddy. The lease holder
 * runs Caddy with the replicated configuration, carries the floating
 * addresses and answers for the base domains in DNS; a move or a takeover
 * carries all of it to the new holder (docs/proxy.md).
 *
 * This module composes the parts: the drivers (caddy/, net/, dns/), the
 * context they share, recovery of what the last run left (awaited before any
 * call is served), the data plane, and the operations by resource.
 */
import path from 'node:path';
import { opsOf } from '../../api/registry/index.js';
import { defineDomain } from '../domain.js';
import { testPause } from '../lib/test-pause.js';
import { AcmeOps } from './acme.js';
import { CaddyRuntime } from './caddy/index.js';
import { CertOps } from './certs.js';
import { ConfigChanges } from './change.js';
import { ProxyContext } from './context.js';
import { DataPlane } from './dataplane.js';
import { DnsSockets } from './dns/index.js';
import { DomainOps } from './domains.js';
import { EntryOps } from './entries.js';
import { proxyHandlers } from './handlers.js';
import { HolderOps } from './holder.js';
import { Incidents } from './incidents.js';
import { IpAddresses } from './net/index.js';
import { NetworkOps } from './network.js';
import { CaddyPlane } from './plane-caddy.js';
import { UpstreamChecks } from './plane-checks.js';
import { DnsPlane } from './plane-dns.js';
import { StateReports } from './plane-state.js';
import { HolderWatch } from './plane-takeover.js';
import { VipPlane } from './plane-vip.js';
import { Providers } from './providers.js';
import { ProxyRecords } from './records.js';
import { proxyRecovery } from './recovery.js';
import { Screening } from './screen.js';
import { ServingOps } from './serving.js';
import { parseProxySettings } from './settings.js';
import { StatusOps } from './status.js';

export const proxyDomain = defineDomain({
  name: 'proxy',
  ops: opsOf('proxy'),
  async open(deps) {
    const settings = parseProxySettings(deps.settings);
    const log = deps.log.child({ domain: 'proxy' });
    const dir = path.join(deps.config.dataDir, 'proxy');
    const drivers = { caddy: new CaddyRuntime(dir, log, settings.caddyBinary), addresses: new IpAddresses(), dns: new DnsSockets() };
    const records = new ProxyRecords(deps.store);
    const ctx = new ProxyContext({
      node: deps.node,
      cluster: deps.cluster,
      ports: deps.ports,
      secrets: deps.secrets,
      records,
      settings,
      drivers,
      log,
      pause: testPause(deps.env, 'proxy', log),
      hostdConfig: deps.config,
      dir,
    });
    await proxyRecovery(ctx).run();

    const providers = new Providers(ctx);
    await providers.load();
    const screening = new Screening(ctx, providers);
    const incidents = new Incidents(ctx, providers);
    const caddy = new CaddyPlane(ctx, screening, providers);
    const vip = new VipPlane(ctx, caddy, incidents);
    let plane: DataPlane | null = null;
    const dns = new DnsPlane(ctx, screening, () => plane?.peers() ?? []);
    const checks = new UpstreamChecks(ctx, screening, incidents);
    const holders = new HolderWatch(ctx, incidents, () => void plane?.kick());
    const states = new StateReports(ctx, deps.events);
    plane = new DataPlane(ctx, { screening, incidents, caddy, vip, dns, checks, holders, states });
    await plane.open();

    const changes = new ConfigChanges(ctx, plane, incidents);
    const certs = new CertOps(ctx, providers, caddy, plane);
    const handlers = proxyHandlers({
      holder: new HolderOps(deps.cluster, deps.node.id, (previous, now) => holders.noteTakeover(previous, now, { automatic: false })),
      serving: new ServingOps(ctx, changes, plane),
      domains: new DomainOps(changes, providers),
      entries: new EntryOps(ctx, changes, screening),
      acme: new AcmeOps(ctx, changes, providers, plane),
      network: new NetworkOps(ctx, changes, dns),
      certs,
      status: new StatusOps(ctx, plane, { screening, vip, dns, checks }, providers),
      incidents,
    });
    const p = plane;
    return {
      handlers,
      info: async () => ({ name: 'proxy', built: true, runtimes: await ctx.runtimes() }),
      close: () => p.close(),
      provides: {
        proxyFigures: {
          config: () => ({ version: ctx.config().version, applied_version: p.appliedVersion(), apply_failed: p.lastApplyError() !== null }),
          certificates: () => certs.expiries(),
          onApply: (watch) => p.onApply(watch),
        },
      },
    };
  },
});
