/**
 * Base domains: POST /proxy/domains, PATCH and DELETE
 * /proxy/domains/{domain}. A domain's name is stored lowercase; a rename
 * keeps its entries, a delete removes them with it. Its certificate source
 * is the internal CA or an ACME DNS provider this node's Caddy has and holds
 * credentials for.
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { CallContext } from '../lib/caller.js';
import { badRequest, conflict } from '../lib/errors.js';
import { domainOf, type ConfigChanges } from './change.js';
import type { ProxyDomain } from './config.js';
import { entryView } from './entries.js';
import { PROVIDER_NAME, type Providers } from './providers.js';

type DomainView = ResultOf<'proxy_domains_create'>['domain'];

export function domainView(d: ProxyDomain): DomainView {
  return { name: d.name, cert_source: d.cert_source, entries: d.entries.map((e) => entryView(d.name, e)) };
}

export class DomainOps {
  constructor(
    private readonly changes: ConfigChanges,
    private readonly providers: Providers,
  ) {}

  private async checkCertSource(source: string): Promise<void> {
    if (source === 'internal') return;
    if (!PROVIDER_NAME.test(source)) throw badRequest(`cert_source '${source}' must be 'internal' or a DNS provider name (GET /proxy/providers)`);
    const p = await this.providers.status(source);
    if (!p.available) throw badRequest(`cert_source '${source}': ${p.reason}`);
    if (!this.providers.has(source)) throw badRequest(`cert_source '${source}': no credentials stored for it; PUT /proxy/acme/credentials first`);
  }

  async create(args: ArgsOf<'proxy_domains_create'>, call: CallContext): Promise<ResultOf<'proxy_domains_create'>> {
    const name = args.name.toLowerCase();
    await this.checkCertSource(args.cert_source);
    const r = await this.changes.run(
      (c) => {
        if (c.domains.some((d) => d.name === name)) throw conflict(`domain '${name}' already exists`);
        return { ...c, domains: [...c.domains, { name, cert_source: args.cert_source, entries: [] }] };
      },
      (c) => ({ domain: domainView(domainOf(c, name)) }),
    );
    call.note({ summary: `Proxy domain ${name} added (${args.cert_source})`, target: `proxy/domains/${name}`, metadata: { cert_source: args.cert_source } });
    return r;
  }

  async update(args: ArgsOf<'proxy_domains_update'>, call: CallContext): Promise<ResultOf<'proxy_domains_update'>> {
    const newName = args.new_name.toLowerCase();
    await this.checkCertSource(args.cert_source);
    const r = await this.changes.run(
      (c) => {
        const d = domainOf(c, args.domain);
        if (newName !== d.name && c.domains.some((x) => x.name === newName)) throw conflict(`domain '${newName}' already exists`);
        return { ...c, domains: c.domains.map((x) => (x === d ? { ...x, name: newName, cert_source: args.cert_source } : x)) };
      },
      (c) => ({ domain: domainView(domainOf(c, newName)) }),
    );
    call.note({
      summary:
        newName === args.domain ? `Proxy domain ${newName} now uses ${args.cert_source}` : `Proxy domain ${args.domain} renamed to ${newName} (entries follow)`,
      target: `proxy/domains/${newName}`,
      metadata: { previous_name: args.domain, cert_source: args.cert_source },
    });
    return r;
  }

  async delete(args: ArgsOf<'proxy_domains_delete'>, call: CallContext): Promise<ResultOf<'proxy_domains_delete'>> {
    let removed = 0;
    const r = await this.changes.run(
      (c) => {
        const d = domainOf(c, args.domain);
        removed = d.entries.length;
        return { ...c, domains: c.domains.filter((x) => x !== d) };
      },
      () => ({ deleted: args.domain, entries_deleted: removed }),
    );
    call.note({
      summary: `Proxy domain ${args.domain} deleted with its ${removed} entries`,
      target: `proxy/domains/${args.domain}`,
      metadata: { entries_deleted: removed },
    });
    return r;
  }
}
