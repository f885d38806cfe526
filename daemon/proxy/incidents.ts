/**
 * Incident bundles: captured on the node where something went wrong (a
 * configuration Caddy refused, an upstream that started failing its check, a
 * takeover, Caddy exiting, a floating address another host answers for),
 * with what a reader needs to understand it later; listed and read by
 * GET /proxy/incidents[/{incident_id}]. Stored credentials are cut out of
 * every bundle.
 */
import type { ResultOf } from '../../api/registry/index.js';
import { notFound } from '../lib/errors.js';
import { validateProxyConfig } from './config.js';
import type { ProxyContext } from './context.js';
import type { Providers } from './providers.js';
import type { Incident, IncidentKind } from './records.js';

export class Incidents {
  constructor(
    private readonly ctx: ProxyContext,
    private readonly providers: Providers,
  ) {}

  /** Records an incident; a failure to record is logged, never thrown (the caller is handling another failure). */
  async capture(kind: IncidentKind, summary: string, details: Record<string, unknown>): Promise<Incident | null> {
    const { ctx } = this;
    try {
      const snap = ctx.config();
      const l = ctx.lease();
      const raw = {
        kind,
        at: new Date().toISOString(),
        node_id: ctx.node.id,
        summary,
        lease: { holder: ctx.holder(), epoch: l.epoch, holding: ctx.holdsProxy() },
        config_version: snap.version,
        config: validateProxyConfig(snap.config),
        caddy_config: ctx.drivers.caddy.loaded(),
        caddy_log: ctx.drivers.caddy.log(100),
        details,
      };
      const clean = JSON.parse(this.providers.redact(JSON.stringify(raw))) as Omit<Incident, 'incident_id'>;
      const inc = await ctx.records.addIncident(clean);
      ctx.log.warn({ incident_id: inc.incident_id, kind }, `proxy incident: ${summary}`);
      return inc;
    } catch (err) {
      ctx.log.error({ err }, 'capturing a proxy incident failed');
      return null;
    }
  }

  /** The newest first. */
  async list(): Promise<ResultOf<'proxy_incidents_list'>> {
    const all = await this.ctx.records.listIncidents();
    return { incidents: all.map((i) => ({ incident_id: i.incident_id, kind: i.kind, at: i.at, node_id: i.node_id, summary: i.summary })) };
  }

  async get(id: string): Promise<ResultOf<'proxy_incidents_get'>> {
    const i = await this.ctx.records.getIncident(id);
    if (!i) throw notFound(`incident '${id}' not found`);
    return i;
  }
}
