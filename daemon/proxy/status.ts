/**
 * What the proxy is doing: GET /proxy/host-status (this node's view: its
 * runtimes, the lease, what it serves and what its rules refuse) and GET
 * /proxy/diagnostics (the holder's: Caddy, listeners, upstream checks,
 * recent errors and incidents; another member hands the call on).
 */
import type { ResultOf } from '../../api/registry/index.js';
import type { CallContext } from '../lib/caller.js';
import type { ProxyContext } from './context.js';
import type { DataPlane, PlaneParts } from './dataplane.js';
import { hostPort } from './host-port.js';
import { tcpCheck } from './plane-checks.js';
import type { Providers } from './providers.js';

export class StatusOps {
  constructor(
    private readonly ctx: ProxyContext,
    private readonly plane: DataPlane,
    private readonly parts: Pick<PlaneParts, 'screening' | 'vip' | 'dns' | 'checks'>,
    private readonly providers: Providers,
  ) {}

  private async caddyVersion(): Promise<string | null> {
    return (await this.ctx.drivers.caddy.availability()).find((a) => a.name === 'caddy')?.version ?? null;
  }

  async hostStatus(): Promise<ResultOf<'proxy_host_status'>> {
    const { ctx, plane, parts } = this;
    const snap = ctx.config();
    const runtimes = await ctx.runtimes();
    const missing: string[] = [];
    for (const r of runtimes) if (!r.available) missing.push(`${r.name}: ${r.reason}`);
    for (const d of snap.config.domains) {
      if (d.cert_source === 'internal') continue;
      const p = await this.providers.status(d.cert_source);
      if (!p.available) missing.push(`domain ${d.name}: ${p.reason}`);
    }
    const dns = parts.dns.status();
    if (!ctx.settings.dnsListen) missing.push(`dns responder: ${dns.error}`);
    return {
      node_id: ctx.node.id,
      runtimes,
      caddy_version: await this.caddyVersion(),
      holding: ctx.holdsProxy(),
      holder: ctx.holder(),
      epoch: ctx.lease().epoch,
      enabled: snap.config.enabled,
      serving: ctx.serving(),
      caddy_running: ctx.drivers.caddy.running(),
      config_version: snap.version,
      applied_version: plane.appliedVersion(),
      last_apply_error: plane.lastApplyError(),
      listen_host: ctx.settings.listenHost,
      rules: { allow_loopback_upstreams: ctx.settings.allowLoopbackUpstreams, allow_privileged_listen_ports: ctx.settings.allowPrivilegedListenPorts },
      refused: await parts.screening.refusals(snap.config),
      refused_on: ctx.node.id,
      vip: parts.vip.state(),
      dns,
      missing,
    };
  }

  async diagnostics(call: CallContext): Promise<ResultOf<'proxy_diagnostics_get'>> {
    return this.ctx.onHolder(call, async () => {
      const { ctx, plane, parts } = this;
      const { caddy } = ctx.drivers;
      const snap = ctx.config();
      const cfg = snap.config;
      const serving = ctx.serving();
      const adminOk = await caddy.adminAnswers();
      const counters = adminOk ? await caddy.upstreamCounters() : [];
      const ports = [...new Set(cfg.domains.flatMap((d) => d.entries.map((e) => e.listen_port)))].sort((a, b) => a - b);
      const lh = ctx.settings.listenHost;
      const checkHost = lh === '' || lh === '0.0.0.0' ? '127.0.0.1' : lh === '::' ? '::1' : lh;
      const listeners = serving
        ? await Promise.all(
            ports.map(async (p) => {
              const r = await tcpCheck(hostPort(checkHost, p), 1000);
              return { port: p, address: `${checkHost}:${p}`, listening: r.ok, error: r.error, http3: cfg.http3 };
            }),
          )
        : [];
      const checks = serving ? await parts.checks.run(false) : [];
      const l = ctx.lease();
      return {
        node_id: ctx.node.id,
        collected_at: new Date().toISOString(),
        lease: { holder: l.holder ?? ctx.node.id, epoch: l.epoch, holding: ctx.holdsProxy() },
        enabled: cfg.enabled,
        serving,
        caddy: { running: caddy.running(), pid: caddy.pid(), version: await this.caddyVersion(), admin_ok: adminOk },
        config: {
          replicated_version: snap.version,
          applied_version: plane.appliedVersion(),
          last_apply_error: plane.lastApplyError(),
          domains: cfg.domains.length,
          entries: cfg.domains.reduce((n, d) => n + d.entries.length, 0),
        },
        listeners,
        upstreams: checks.map((c) => ({ ...c, caddy: counters.find((u) => u.address === c.dial) ?? null })),
        vip: { configured: cfg.vip, ...parts.vip.state() },
        dns: { ...parts.dns.status(), upstreams: cfg.dns_upstreams, stats: parts.dns.stats() },
        recent_errors: caddy
          .log(400)
          .filter((x) => x.level === 'error' || x.level === 'warn' || x.level === 'fatal')
          .slice(-50),
        incidents: (await ctx.records.listIncidents()).slice(0, 10).map((i) => ({ incident_id: i.incident_id, kind: i.kind, at: i.at, summary: i.summary })),
      };
    });
  }
}
