/**
 * Entries: POST /proxy/domains/{domain}/entries, PATCH and DELETE
 * /proxy/domains/{domain}/entries/{subdomain}, and GET /proxy/upstreams (the
 * apps, VMs and containers an entry can point at). An entry maps
 * `<subdomain>.<domain>` on a listen port to a host or a target; two entries
 * share a subdomain only on different listen ports. What an entry dials is
 * checked by the proxy's rules (policy/rules.ts) before it is stored, and
 * again on the serving node at every build.
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { CallContext } from '../lib/caller.js';
import { badRequest, conflict, notFound, unavailable } from '../lib/errors.js';
import { domainOf, type ConfigChanges } from './change.js';
import { effectiveScheme, effectiveSkipVerify, listenPortOf, type ProxyEntry } from './config.js';
import type { ProxyContext } from './context.js';
import { dialRefusal, headerRefusal, hostFormRefusal, listenPortRefusal, refusalError, resolveHost } from './policy/rules.js';
import type { Screening } from './screen.js';
import { dialFor, findTarget, listTargets } from './targets.js';

type EntryView = ResultOf<'proxy_entries_create'>['entry'];

export function entryView(domain: string, e: ProxyEntry): EntryView {
  return {
    domain,
    subdomain: e.subdomain,
    fqdn: `${e.subdomain}.${domain}`,
    listen_port: e.listen_port,
    port: e.port,
    host: e.host,
    target_id: e.target_id,
    upstream_scheme: e.upstream_scheme,
    effective_scheme: effectiveScheme(e),
    tls_skip_verify: e.tls_skip_verify,
    effective_tls_skip_verify: effectiveSkipVerify(e),
    header_up: { ...e.header_up },
  };
}

/** Header values go into an HTTP request as they are (the names are the schema's tokens). */
function checkHeaders(h: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h ?? {})) {
    if (/[\r\n\0]/.test(v)) throw badRequest(`header_up.${k}: the value must not contain CR, LF or NUL`);
    out[k] = v;
  }
  return out;
}

function checkHost(h: string): string {
  const v = h.trim();
  const r = hostFormRefusal(v);
  if (r) throw refusalError(r);
  return v;
}

const clashMessage = (sub: string, domain: string, listen: number) =>
  `entry ${sub}.${domain} on listen port ${listen} already exists; two entries may share a subdomain only on different listen ports`;

export class EntryOps {
  constructor(
    private readonly ctx: ProxyContext,
    private readonly changes: ConfigChanges,
    private readonly screening: Screening,
  ) {}

  async upstreams(): Promise<ResultOf<'proxy_upstreams_list'>> {
    const { targets, errors } = await listTargets(this.ctx.ports.all('guests'));
    return { upstreams: targets, ...(errors.length ? { errors } : {}) };
  }

  private async checkTarget(id: string): Promise<string> {
    const { targets } = await listTargets(this.ctx.ports.all('guests'));
    return findTarget(targets, id).target_id;
  }

  /**
   * The proxy's rules (policy/rules.ts) on an entry as a call leaves it in
   * `candidate`: 400 for what nothing allows, 403 naming the setting that
   * would. A host name must resolve now, so that what it reaches is checked
   * (400 when it has no address, 503 when the resolver does not answer within
   * 10 s), as nginx refuses an upstream it cannot resolve; the serving node
   * checks it again at every build. A target is checked on its address now,
   * if it has one, and again at every build. An upstream on one of the
   * proxy's own listeners is a loop.
   */
  private async checkEntryRules(e: ProxyEntry, candidate: Parameters<Screening['entryRules']>[0]): Promise<void> {
    const rules = this.screening.entryRules(candidate);
    const r = listenPortRefusal(e.listen_port, rules) ?? headerRefusal(e.header_up);
    if (r) throw refusalError(r);
    if (e.host !== null) {
      const h = await resolveHost(e.host, e.port, rules, 10_000);
      if ('refusal' in h) throw refusalError(h.refusal);
      if ('error' in h)
        throw h.kind === 'missing'
          ? badRequest(`${h.error}: the proxy dials only host names it can resolve and check`)
          : unavailable(`cannot check the upstream now: ${h.error}`);
      return;
    }
    const { targets } = await listTargets(this.ctx.ports.all('guests'));
    const t = findTarget(targets, e.target_id!);
    const dial = dialFor(t, e.port);
    if ('error' in dial) return;
    const bad = dialRefusal(dial.ip, e.port, { target: t.target_id, kind: t.kind }, rules);
    if (bad) throw refusalError(bad);
  }

  async create(args: ArgsOf<'proxy_entries_create'>, call: CallContext): Promise<ResultOf<'proxy_entries_create'>> {
    const subdomain = args.subdomain.toLowerCase();
    const listen = listenPortOf(args.listen_port);
    if (args.host !== undefined && args.target_id !== undefined) throw badRequest('give host or target_id, not both');
    if (args.host === undefined && args.target_id === undefined) throw badRequest('host is required when no target_id is given');
    const host = args.host !== undefined ? checkHost(args.host) : null;
    const target = args.target_id !== undefined ? await this.checkTarget(args.target_id) : null;
    const entry: ProxyEntry = {
      subdomain,
      listen_port: listen,
      port: args.port,
      host,
      target_id: target,
      upstream_scheme: args.upstream_scheme ?? '',
      tls_skip_verify: args.tls_skip_verify ?? null,
      header_up: checkHeaders(args.header_up),
    };
    domainOf(this.ctx.current(), args.domain);
    const r = await this.changes.run(
      (c) => {
        const d = domainOf(c, args.domain);
        if (d.entries.some((e) => e.subdomain === subdomain && e.listen_port === listen)) throw conflict(clashMessage(subdomain, d.name, listen));
        return { ...c, domains: c.domains.map((x) => (x === d ? { ...x, entries: [...x.entries, entry] } : x)) };
      },
      () => ({ entry: entryView(args.domain, entry) }),
      (candidate) => this.checkEntryRules(entry, candidate),
    );
    call.note({
      summary: `Proxy entry ${subdomain}.${args.domain}:${listen} -> ${host ? `${host}:${args.port}` : `${target} port ${args.port}`}`,
      target: `proxy/domains/${args.domain}/entries/${subdomain}`,
      metadata: { listen_port: listen, port: args.port, host, target_id: target },
    });
    return r;
  }

  async update(args: ArgsOf<'proxy_entries_update'>, call: CallContext): Promise<ResultOf<'proxy_entries_update'>> {
    const listen = listenPortOf(args.listen_port);
    if (args.host !== undefined && args.target_id !== undefined) throw badRequest('give host or target_id, not both');
    const host = args.host !== undefined ? checkHost(args.host) : undefined;
    const target = args.target_id !== undefined ? await this.checkTarget(args.target_id) : undefined;
    const newSub = args.new_subdomain?.toLowerCase();
    const headers = args.header_up !== undefined ? checkHeaders(args.header_up) : undefined;
    let moved: { domain: string; entry: ProxyEntry } | null = null;
    const r = await this.changes.run(
      (c) => {
        const from = domainOf(c, args.domain);
        const old = from.entries.find((e) => e.subdomain === args.subdomain && e.listen_port === listen);
        if (!old) throw notFound(`entry '${args.subdomain}.${args.domain}' on listen port ${listen} not found`);
        const toName = args.new_domain ?? from.name;
        const to = c.domains.find((x) => x.name === toName);
        if (!to) throw notFound(`new_domain '${toName}' is not a configured domain`);
        const e: ProxyEntry = {
          ...old,
          subdomain: newSub ?? old.subdomain,
          listen_port: args.new_listen_port ? args.new_listen_port : old.listen_port,
          port: args.port,
          host: host !== undefined ? host : target !== undefined ? null : old.host,
          target_id: target !== undefined ? target : host !== undefined ? null : old.target_id,
          upstream_scheme: args.upstream_scheme ?? old.upstream_scheme,
          tls_skip_verify: args.tls_skip_verify ?? old.tls_skip_verify,
          header_up: headers ?? old.header_up,
        };
        if (to.entries.some((x) => x !== old && x.subdomain === e.subdomain && x.listen_port === e.listen_port))
          throw conflict(clashMessage(e.subdomain, to.name, e.listen_port));
        moved = { domain: to.name, entry: e };
        return {
          ...c,
          domains: c.domains.map((x) => {
            let entries = x === from ? x.entries.filter((y) => y !== old) : x.entries;
            if (x === to) entries = x === from ? x.entries.map((y) => (y === old ? e : y)) : [...entries, e];
            return { ...x, entries };
          }),
        };
      },
      () => ({ entry: entryView(moved!.domain, moved!.entry) }),
      (candidate) => this.checkEntryRules(moved!.entry, candidate),
    );
    const m = moved as { domain: string; entry: ProxyEntry } | null;
    call.note({
      summary: `Proxy entry ${args.subdomain}.${args.domain}:${listen} updated${m && (m.domain !== args.domain || m.entry.subdomain !== args.subdomain || m.entry.listen_port !== listen) ? ` (now ${m.entry.subdomain}.${m.domain}:${m.entry.listen_port})` : ''}`,
      target: `proxy/domains/${args.domain}/entries/${args.subdomain}`,
      metadata: { listen_port: listen, new_domain: m?.domain, new_subdomain: m?.entry.subdomain, new_listen_port: m?.entry.listen_port },
    });
    return r;
  }

  async delete(args: ArgsOf<'proxy_entries_delete'>, call: CallContext): Promise<ResultOf<'proxy_entries_delete'>> {
    const listen = listenPortOf(args.listen_port);
    const r = await this.changes.run(
      (c) => {
        const d = domainOf(c, args.domain);
        const old = d.entries.find((e) => e.subdomain === args.subdomain && e.listen_port === listen);
        if (!old) throw notFound(`entry '${args.subdomain}.${args.domain}' on listen port ${listen} not found`);
        return { ...c, domains: c.domains.map((x) => (x === d ? { ...x, entries: x.entries.filter((y) => y !== old) } : x)) };
      },
      () => ({ deleted: `${args.subdomain}.${args.domain}`, listen_port: listen }),
    );
    call.note({
      summary: `Proxy entry ${args.subdomain}.${args.domain}:${listen} deleted`,
      target: `proxy/domains/${args.domain}/entries/${args.subdomain}`,
      metadata: { listen_port: listen },
    });
    return r;
  }
}
