/**
 * The containment rules (policy/) applied to a whole configuration on this
 * node: where each entry's upstream is dialled (targets and host names
 * resolved here), which entries, domains and DNS forwarders the rules refuse
 * and why. What Caddy is given and what host-status lists both come from
 * here, so that they never disagree.
 */
import { errorBody } from '../lib/errors.js';
import { domainNameProblem, entryKey, type ProxyConfig } from './config.js';
import type { ProxyContext } from './context.js';
import type { UpstreamDial } from './driver.js';
import { parseHostPort, type HostPort } from './host-port.js';
import {
  acmeSettingsProblem,
  credentialKeysWithBraces,
  dialRefusal,
  dnsUpstreamRefusal,
  headerRefusal,
  listenPortRefusal,
  proxyListeners,
  resolveHost,
  type Refusal,
  type RuleContext,
} from './policy/rules.js';
import type { Providers } from './providers.js';
import { dialFor, findTarget, listTargets } from './targets.js';

/** What the rules decided for one configuration on this node. */
export interface Screened {
  /** Where each entry's upstream is dialled, or why it cannot be now, by entryKey(). */
  upstreams: Map<string, UpstreamDial>;
  /** Entries refused by a rule, by entryKey(). */
  refused: Map<string, Refusal>;
  /** Domains left out of Caddy's configuration, with why (`provider-missing` is not a containment rule). */
  skipDomains: Map<string, { rule: 'domain-name' | 'acme-placeholder' | 'provider-missing'; message: string }>;
}

/** One refused entry, domain or DNS forwarder as host-status lists it. */
export interface RefusedItem {
  kind: 'entry' | 'domain' | 'dns-upstream';
  name: string;
  rule: string;
  message: string;
}

/** An entry's upstream as checks and diagnostics see it; `refused` marks what the rules refused. */
export type EntryDial = { dial: string } | { error: string; refused?: boolean };

export class Screening {
  private lastRefusedText = '';

  constructor(
    private readonly ctx: ProxyContext,
    private readonly providers: Providers,
  ) {}

  /** The rules for an entry's upstream in `cfg`: this node's, and the proxy's own listeners (a loop). */
  entryRules(cfg: ProxyConfig, local?: Set<string>): RuleContext {
    const rules = this.ctx.rules;
    return { ...rules, ...(local ? { local: () => local } : {}), proxy: proxyListeners(cfg, this.ctx.settings.listenHost) };
  }

  async screen(cfg: ProxyConfig): Promise<Screened> {
    const upstreams = new Map<string, UpstreamDial>();
    const refused = new Map<string, Refusal>();
    const skipDomains: Screened['skipDomains'] = new Map();
    const needTargets = cfg.domains.some((d) => d.entries.some((e) => e.target_id !== null));
    const targets = needTargets ? (await listTargets(this.ctx.ports.all('guests'))).targets : [];
    // One look at this host's addresses for the whole pass.
    const rules = this.entryRules(cfg, this.ctx.rules.local());
    const acmeBad = acmeSettingsProblem(cfg.acme);
    const modules = await this.ctx.drivers.caddy.modules();
    for (const d of cfg.domains) {
      const nameBad = domainNameProblem(d.name);
      if (nameBad) skipDomains.set(d.name, { rule: 'domain-name', message: `domain name '${d.name}' ${nameBad}` });
      else if (d.cert_source !== 'internal') {
        const braces = credentialKeysWithBraces(this.providers.all().get(d.cert_source) ?? {});
        if (!modules.has(`dns.providers.${d.cert_source}`))
          skipDomains.set(d.name, { rule: 'provider-missing', message: `this Caddy build has no module dns.providers.${d.cert_source}` });
        else if (acmeBad) skipDomains.set(d.name, { rule: 'acme-placeholder', message: acmeBad });
        else if (braces.length)
          skipDomains.set(d.name, {
            rule: 'acme-placeholder',
            message: `the stored ${d.cert_source} credentials hold a brace in ${braces.join(', ')}, which the provider module would expand as a placeholder; store them again`,
          });
      }
      await Promise.all(
        d.entries.map(async (e) => {
          const k = entryKey(d.name, e);
          const r = listenPortRefusal(e.listen_port, rules) ?? headerRefusal(e.header_up);
          if (r) {
            refused.set(k, r);
            return;
          }
          if (e.host !== null) {
            const h = await resolveHost(e.host, e.port, rules);
            if ('refusal' in h) refused.set(k, h.refusal);
            else upstreams.set(k, 'error' in h ? { error: h.error } : { dial: h.dial, serverName: h.serverName });
            return;
          }
          try {
            const t = findTarget(targets, e.target_id!);
            const dial = dialFor(t, e.port);
            if ('error' in dial) {
              upstreams.set(k, dial);
              return;
            }
            const bad = dialRefusal(dial.ip, e.port, { target: t.target_id, kind: t.kind }, rules);
            if (bad) refused.set(k, bad);
            else upstreams.set(k, { dial: dial.dial });
          } catch (err) {
            upstreams.set(k, { error: errorBody(err).body.error });
          }
        }),
      );
    }
    return { upstreams, refused, skipDomains };
  }

  /** What the rules refuse in `cfg` on this node, as host-status lists it. */
  async refusals(cfg: ProxyConfig): Promise<RefusedItem[]> {
    const s = await this.screen(cfg);
    return [
      ...[...s.skipDomains]
        .filter(([, x]) => x.rule !== 'provider-missing')
        .map(([name, x]) => ({ kind: 'domain' as const, name, rule: x.rule, message: x.message })),
      ...[...s.refused].map(([name, r]) => ({ kind: 'entry' as const, name, rule: r.rule, message: r.message })),
      ...this.dnsUpstreams(cfg.dns_upstreams).refused.map((x) => ({
        kind: 'dns-upstream' as const,
        name: x.upstream,
        rule: x.refusal.rule,
        message: x.refusal.message,
      })),
    ].sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Dial addresses per entry key (for checks and diagnostics). */
  async dials(cfg: ProxyConfig): Promise<Map<string, EntryDial>> {
    const s = await this.screen(cfg);
    const out = new Map<string, EntryDial>();
    for (const d of cfg.domains) {
      if (s.skipDomains.has(d.name)) continue;
      for (const e of d.entries) {
        const k = entryKey(d.name, e);
        const r = s.refused.get(k);
        const up = s.upstreams.get(k);
        out.set(
          k,
          r
            ? { error: `refused by the proxy rules (${r.rule}): ${r.message}`, refused: true }
            : up && 'dial' in up
              ? { dial: up.dial }
              : { error: up?.error ?? 'upstream not resolved' },
        );
      }
    }
    return out;
  }

  /** The configured forwarders this node's rules allow, and those they refuse (stored before the rules). */
  dnsUpstreams(list: string[]): { allowed: HostPort[]; refused: Array<{ upstream: string; refusal: Refusal }> } {
    const allowed: HostPort[] = [];
    const refused: Array<{ upstream: string; refusal: Refusal }> = [];
    for (const u of list) {
      const hp = parseHostPort(u);
      if (!hp) continue;
      const r = dnsUpstreamRefusal(u, hp, this.ctx.rules);
      if (r) refused.push({ upstream: u, refusal: r });
      else allowed.push(hp);
    }
    return { allowed, refused };
  }

  /** Says once (per change) in hostd's log what the rules leave out of Caddy's configuration. */
  noteRefusals(s: Screened): void {
    const items = [...s.refused].map(([entry, r]) => ({ entry, rule: r.rule, message: r.message }));
    const text = JSON.stringify(items);
    if (text === this.lastRefusedText) return;
    this.lastRefusedText = text;
    if (items.length)
      this.ctx.log.warn({ refused: items }, 'proxy: entries refused by the proxy rules are left out of what Caddy dials (GET /proxy/host-status)');
  }
}
