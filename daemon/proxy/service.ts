/**
 * The proxy's rules: domains and entries in the replicated configuration,
 * certificates, ACME settings and credentials, floating addresses, DNS,
 * HTTP/3, host status, diagnostics and incidents.
 *
 * Every change to the configuration goes one way (`change`): the mutator is
 * applied to the current copy and checked; when this node serves the proxy,
 * the result is loaded into Caddy first, so a configuration Caddy refuses is
 * a 400 naming Caddy's reason and is never replicated (Caddy keeps serving
 * the last good one); then it is replicated (version + 1) and every node's
 * data plane follows it.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import type { ArgsOf } from '../../api/registry/index.js';
import type { CallContext } from '../lib/caller.js';
import type { ClusterPorts, NodeIdentity, Ports } from '../domain.js';
import type { SecretStore } from '../lib/secrets.js';
import { ApiError, badRequest, conflict, notFound, unavailable } from '../lib/errors.js';
import { SerialQueue } from '../lib/serial.js';
import {
  HEADER_TOKEN, LABEL, domainNameProblem, effectiveScheme, effectiveSkipVerify, listenPortOf, validateProxyConfig,
  type ProxyConfig, type ProxyDomain, type ProxyEntry, type ProxyVip,
} from './config.js';
import { CaddyRefused } from './caddy/admin.js';
import { redactCaddyConfig } from './caddy/build.js';
import { SECRET_NS, tcpCheck, type DataPlane } from './dataplane.js';
import { dialFor, findTarget, listTargets } from './targets.js';
import { credentialKeysWithBraces, dialRefusal, dnsUpstreamRefusal, headerRefusal, hostFormRefusal, listenPortRefusal, refusalError, resolveHost } from './policy/rules.js';
import { hasBrace } from './policy/placeholders.js';
import { ifaceExists } from './net/vip.js';
import { parseHostPort } from './dns/responder.js';
import type { ProxyRecords } from './records.js';
import type { ProxySettings } from './settings.js';

/** DNS providers of the caddy-dns project that hostd knows how to name; the build decides which work. */
export const KNOWN_PROVIDERS = [
  'azure', 'cloudflare', 'digitalocean', 'dnspod', 'duckdns', 'gandi', 'godaddy', 'googleclouddns', 'hetzner', 'ionos',
  'linode', 'namecheap', 'netcup', 'ovh', 'porkbun', 'rfc2136', 'route53', 'vultr',
] as const;

const PROVIDER_NAME = /^[a-z0-9_]{1,64}$/;

export interface ServiceDeps {
  node: NodeIdentity;
  cluster: ClusterPorts;
  ports: Ports;
  secrets: SecretStore;
  records: ProxyRecords;
  settings: ProxySettings;
  plane: DataPlane;
}

const clone = <T>(v: T): T => structuredClone(v);

function entryView(domain: string, e: ProxyEntry) {
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

export class ProxyService {
  private readonly changes = new SerialQueue();

  constructor(private readonly d: ServiceDeps) {}

  private get plane(): DataPlane {
    return this.d.plane;
  }

  private current(): ProxyConfig {
    return clone((this.d.cluster.proxyConfig.get() as { config: ProxyConfig }).config);
  }

  // ------------------------------------------------------------------ the one way to change

  /** `check` runs on the candidate before anything is applied (the proxy's rules on what changed). */
  private async change<T>(mutate: (c: ProxyConfig) => ProxyConfig, result: (c: ProxyConfig) => T, check?: () => Promise<void>): Promise<T & { version: number }> {
    return this.changes.run(async () => {
      const candidate = validateProxyConfig(mutate(this.current()));
      await check?.();
      let snap;
      try {
        snap = await this.plane.applyChange(candidate, () => this.d.cluster.proxyConfig.update((cur) => validateProxyConfig(mutate(clone(cur as ProxyConfig)))));
      } catch (err) {
        if (err instanceof CaddyRefused) {
          await this.plane.capture('config_refused', `Caddy refused a change: ${err.reason}`, { reason: err.reason, refused_config: await this.plane.build(candidate).then(redactCaddyConfig).catch(() => null) });
          throw badRequest(`Caddy refused the configuration: ${err.reason}`);
        }
        if (err instanceof ApiError) throw err;
        throw unavailable(`the proxy could not apply the change: ${(err as Error).message}`);
      }
      void this.plane.kick();
      return { ...result(snap.config as ProxyConfig), version: snap.version };
    });
  }

  private domainOf(c: ProxyConfig, name: string): ProxyDomain {
    const d = c.domains.find((x) => x.name === name);
    if (!d) throw notFound(`domain '${name}' not found`);
    return d;
  }

  // ------------------------------------------------------------------ enable, HTTP/3

  async setEnabled(args: ArgsOf<'proxy_update'>, ctx: CallContext) {
    if (args.enabled && this.plane.holdsProxy() && !this.plane.caddyProbe.caddy.available) {
      throw unavailable(`caddy is not available: ${this.plane.caddyProbe.caddy.reason}`);
    }
    const r = await this.change((c) => ({ ...c, enabled: args.enabled }), (c) => ({ enabled: c.enabled }));
    ctx.note({ summary: `Proxy ${args.enabled ? 'enabled' : 'disabled'}`, target: 'proxy', metadata: { enabled: args.enabled, version: r.version } });
    return { ...r, serving: this.plane.serving(), holder: this.plane.lease().holder ?? (this.plane.holdsProxy() ? this.d.node.id : null) };
  }

  async setHttp3(args: ArgsOf<'proxy_http3_update'>, ctx: CallContext) {
    const r = await this.change((c) => ({ ...c, http3: args.enabled }), (c) => ({ http3: c.http3, protocols: c.http3 ? ['h1', 'h2', 'h3'] : ['h1', 'h2'] }));
    ctx.note({ summary: `Proxy HTTP/3 ${args.enabled ? 'on' : 'off'}`, target: 'proxy/http3', metadata: { http3: args.enabled, version: r.version } });
    return r;
  }

  // ------------------------------------------------------------------ domains

  private checkCertSource(source: string): void {
    if (source === 'internal') return;
    if (!PROVIDER_NAME.test(source)) throw badRequest(`cert_source '${source}' must be 'internal' or a DNS provider name (GET /proxy/providers)`);
    const p = this.providerStatus(source);
    if (!p.available) throw badRequest(`cert_source '${source}': ${p.reason}`);
    if (!this.plane.hasCredentials(source)) throw badRequest(`cert_source '${source}': no credentials stored for it; PUT /proxy/acme/credentials first`);
  }

  private checkDomainName(name: string, arg: string): string {
    const n = name.trim().toLowerCase().replace(/\.$/, '');
    const problem = domainNameProblem(n);
    if (problem) throw badRequest(`${arg} '${name}' ${problem}`);
    return n;
  }

  async domainsCreate(args: ArgsOf<'proxy_domains_create'>, ctx: CallContext) {
    const name = this.checkDomainName(args.name, 'name');
    this.checkCertSource(args.cert_source);
    const r = await this.change(
      (c) => {
        if (c.domains.some((d) => d.name === name)) throw conflict(`domain '${name}' already exists`);
        return { ...c, domains: [...c.domains, { name, cert_source: args.cert_source, entries: [] }] };
      },
      (c) => ({ domain: this.domainView(this.domainOf(c, name)) }),
    );
    ctx.note({ summary: `Proxy domain ${name} added (${args.cert_source})`, target: `proxy/domains/${name}`, metadata: { cert_source: args.cert_source } });
    return r;
  }

  async domainsUpdate(args: ArgsOf<'proxy_domains_update'>, ctx: CallContext) {
    const newName = this.checkDomainName(args.new_name, 'new_name');
    this.checkCertSource(args.cert_source);
    const r = await this.change(
      (c) => {
        const d = this.domainOf(c, args.domain);
        if (newName !== d.name && c.domains.some((x) => x.name === newName)) throw conflict(`domain '${newName}' already exists`);
        return { ...c, domains: c.domains.map((x) => (x === d ? { ...x, name: newName, cert_source: args.cert_source } : x)) };
      },
      (c) => ({ domain: this.domainView(this.domainOf(c, newName)) }),
    );
    ctx.note({ summary: newName === args.domain ? `Proxy domain ${newName} now uses ${args.cert_source}` : `Proxy domain ${args.domain} renamed to ${newName} (entries follow)`, target: `proxy/domains/${newName}`, metadata: { previous_name: args.domain, cert_source: args.cert_source } });
    return r;
  }

  async domainsDelete(args: ArgsOf<'proxy_domains_delete'>, ctx: CallContext) {
    let removed = 0;
    const r = await this.change(
      (c) => {
        const d = this.domainOf(c, args.domain);
        removed = d.entries.length;
        return { ...c, domains: c.domains.filter((x) => x !== d) };
      },
      () => ({ deleted: args.domain, entries_deleted: removed }),
    );
    ctx.note({ summary: `Proxy domain ${args.domain} deleted with its ${removed} entries`, target: `proxy/domains/${args.domain}`, metadata: { entries_deleted: removed } });
    return r;
  }

  private domainView(d: ProxyDomain) {
    return { name: d.name, cert_source: d.cert_source, entries: d.entries.map((e) => entryView(d.name, e)) };
  }

  // ------------------------------------------------------------------ entries

  private checkSubdomain(s: string, arg: string): string {
    const v = s.trim().toLowerCase();
    if (!LABEL.test(v)) throw badRequest(`${arg} '${s}' must be one DNS label (lowercase letters, digits and inner hyphens, 1-63 characters)`);
    return v;
  }

  private checkHeaders(h: Record<string, string> | undefined): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(h ?? {})) {
      if (!HEADER_TOKEN.test(k)) throw badRequest(`header_up: '${k}' is not an HTTP header name (RFC 7230 token)`);
      if (/[\r\n\0]/.test(v)) throw badRequest(`header_up.${k}: the value must not contain CR, LF or NUL`);
      out[k] = v;
    }
    return out;
  }

  private checkHost(h: string): string {
    const v = h.trim();
    const r = hostFormRefusal(v);
    if (r) throw refusalError(r);
    return v;
  }

  private async checkTarget(id: string): Promise<string> {
    const { targets } = await listTargets(this.d.ports.all('guests'));
    return findTarget(targets, id).target_id;
  }

  /**
   * The proxy's rules (policy/rules.ts) on an entry as a call leaves it:
   * 400 for what nothing allows, 403 naming the setting that would. A host
   * name must resolve now, so that what it reaches is checked (400 when it
   * has no address, 503 when the resolver does not answer within 10 s), as
   * nginx refuses an upstream it cannot resolve; the serving node checks it
   * again at every build. A target is checked on its address now, if it has
   * one, and again at every build.
   */
  private async checkEntryRules(e: ProxyEntry): Promise<void> {
    const rules = this.plane.rules;
    const r = listenPortRefusal(e.listen_port, rules) ?? headerRefusal(e.header_up);
    if (r) throw refusalError(r);
    if (e.host !== null) {
      const h = await resolveHost(e.host, e.port, rules, 10_000);
      if ('refusal' in h) throw refusalError(h.refusal);
      if ('error' in h) throw h.kind === 'missing' ? badRequest(`${h.error}: the proxy dials only host names it can resolve and check`) : unavailable(`cannot check the upstream now: ${h.error}`);
      return;
    }
    const { targets } = await listTargets(this.d.ports.all('guests'));
    const t = findTarget(targets, e.target_id!);
    const dial = dialFor(t, e.port);
    if ('error' in dial) return;
    const bad = dialRefusal(dial.ip, e.port, { target: t.target_id, kind: t.kind }, rules);
    if (bad) throw refusalError(bad);
  }

  async entriesCreate(args: ArgsOf<'proxy_entries_create'>, ctx: CallContext) {
    const subdomain = this.checkSubdomain(args.subdomain, 'subdomain');
    const listen = listenPortOf(args.listen_port);
    if (args.host !== undefined && args.target_id !== undefined) throw badRequest('give host or target_id, not both');
    if (args.host === undefined && args.target_id === undefined) throw badRequest('host is required when no target_id is given');
    const host = args.host !== undefined ? this.checkHost(args.host) : null;
    const target = args.target_id !== undefined ? await this.checkTarget(args.target_id) : null;
    const entry: ProxyEntry = {
      subdomain,
      listen_port: listen,
      port: args.port,
      host,
      target_id: target,
      upstream_scheme: args.upstream_scheme ?? '',
      tls_skip_verify: args.tls_skip_verify ?? null,
      header_up: this.checkHeaders(args.header_up),
    };
    this.domainOf(this.current(), args.domain);
    const r = await this.change(
      (c) => {
        const d = this.domainOf(c, args.domain);
        if (d.entries.some((e) => e.subdomain === subdomain && e.listen_port === listen)) {
          throw conflict(`entry ${subdomain}.${d.name} on listen port ${listen} already exists; two entries may share a subdomain only on different listen ports`);
        }
        return { ...c, domains: c.domains.map((x) => (x === d ? { ...x, entries: [...x.entries, entry] } : x)) };
      },
      () => ({ entry: entryView(args.domain, entry) }),
      () => this.checkEntryRules(entry),
    );
    ctx.note({ summary: `Proxy entry ${subdomain}.${args.domain}:${listen} -> ${host ? `${host}:${args.port}` : `${target} port ${args.port}`}`, target: `proxy/domains/${args.domain}/entries/${subdomain}`, metadata: { listen_port: listen, port: args.port, host, target_id: target } });
    return r;
  }

  async entriesUpdate(args: ArgsOf<'proxy_entries_update'>, ctx: CallContext) {
    const listen = listenPortOf(args.listen_port);
    if (args.host !== undefined && args.target_id !== undefined) throw badRequest('give host or target_id, not both');
    const host = args.host !== undefined ? this.checkHost(args.host) : undefined;
    const target = args.target_id !== undefined ? await this.checkTarget(args.target_id) : undefined;
    const newSub = args.new_subdomain !== undefined ? this.checkSubdomain(args.new_subdomain, 'new_subdomain') : undefined;
    const headers = args.header_up !== undefined ? this.checkHeaders(args.header_up) : undefined;
    let moved: { domain: string; entry: ProxyEntry } | null = null;
    const r = await this.change(
      (c) => {
        const from = this.domainOf(c, args.domain);
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
        const clash = to.entries.find((x) => x !== old && x.subdomain === e.subdomain && x.listen_port === e.listen_port);
        if (clash) throw conflict(`entry ${e.subdomain}.${to.name} on listen port ${e.listen_port} already exists; two entries may share a subdomain only on different listen ports`);
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
      () => this.checkEntryRules(moved!.entry),
    );
    const m = moved as { domain: string; entry: ProxyEntry } | null;
    ctx.note({
      summary: `Proxy entry ${args.subdomain}.${args.domain}:${listen} updated${m && (m.domain !== args.domain || m.entry.subdomain !== args.subdomain || m.entry.listen_port !== listen) ? ` (now ${m.entry.subdomain}.${m.domain}:${m.entry.listen_port})` : ''}`,
      target: `proxy/domains/${args.domain}/entries/${args.subdomain}`,
      metadata: { listen_port: listen, new_domain: m?.domain, new_subdomain: m?.entry.subdomain, new_listen_port: m?.entry.listen_port },
    });
    return r;
  }

  async entriesDelete(args: ArgsOf<'proxy_entries_delete'>, ctx: CallContext) {
    const listen = listenPortOf(args.listen_port);
    const r = await this.change(
      (c) => {
        const d = this.domainOf(c, args.domain);
        const old = d.entries.find((e) => e.subdomain === args.subdomain && e.listen_port === listen);
        if (!old) throw notFound(`entry '${args.subdomain}.${args.domain}' on listen port ${listen} not found`);
        return { ...c, domains: c.domains.map((x) => (x === d ? { ...x, entries: x.entries.filter((y) => y !== old) } : x)) };
      },
      () => ({ deleted: `${args.subdomain}.${args.domain}`, listen_port: listen }),
    );
    ctx.note({ summary: `Proxy entry ${args.subdomain}.${args.domain}:${listen} deleted`, target: `proxy/domains/${args.domain}/entries/${args.subdomain}`, metadata: { listen_port: listen } });
    return r;
  }

  async upstreams() {
    const { targets, errors } = await listTargets(this.d.ports.all('guests'));
    return { upstreams: targets, ...(errors.length ? { errors } : {}) };
  }

  // ------------------------------------------------------------------ providers, ACME

  providerStatus(name: string): { name: string; module: string; available: boolean; reason: string | null } {
    const module = `dns.providers.${name}`;
    const caddy = this.plane.caddyProbe.caddy;
    if (!caddy.available) return { name, module, available: false, reason: `caddy is not available: ${caddy.reason}` };
    if (this.plane.caddyProbe.modules.has(module)) return { name, module, available: true, reason: null };
    return {
      name,
      module,
      available: false,
      reason: `this Caddy build (${caddy.version}) has no module ${module}; ACME DNS-01 with ${name} needs a Caddy built with it (xcaddy build --with github.com/caddy-dns/${name})`,
    };
  }

  async providers() {
    const inBuild = [...this.plane.caddyProbe.modules].filter((m) => m.startsWith('dns.providers.')).map((m) => m.slice('dns.providers.'.length));
    const names = [...new Set([...KNOWN_PROVIDERS, ...inBuild])].sort();
    const stored = new Set(await this.d.secrets.list(SECRET_NS));
    return {
      caddy_version: this.plane.caddyProbe.caddy.version,
      internal: { available: this.plane.caddyProbe.caddy.available, reason: this.plane.caddyProbe.caddy.reason },
      providers: names.map((n) => ({ ...this.providerStatus(n), credentials_stored: stored.has(n) })),
    };
  }

  async acmeCredentialsSet(args: ArgsOf<'proxy_acme_credentials_set'>, ctx: CallContext) {
    if (!PROVIDER_NAME.test(args.provider)) throw badRequest(`provider '${args.provider}' must be 1-64 of [a-z0-9_]`);
    const keys = Object.keys(args.credentials);
    if (keys.length === 0) throw badRequest('credentials must have at least one key');
    for (const k of keys) if (!/^[a-z0-9_]{1,64}$/.test(k)) throw badRequest(`credentials: key '${k}' must be 1-64 of [a-z0-9_] (the provider module's field name)`);
    if (keys.includes('name')) throw badRequest("credentials: 'name' is reserved (it names the provider)");
    // DNS provider modules expand placeholders in their fields; the value is a secret, so only its key is named.
    const braces = credentialKeysWithBraces(args.credentials);
    if (braces.length) throw badRequest(`credentials: the value of ${braces.join(', ')} contains { or }, which Caddy's provider module would expand as a placeholder`);
    await this.d.secrets.put(SECRET_NS, args.provider, JSON.stringify(args.credentials));
    this.plane.setCredentials(args.provider, { ...args.credentials });
    void this.plane.kick();
    ctx.note({ summary: `ACME credentials stored for ${args.provider}`, target: `proxy/acme/credentials/${args.provider}`, metadata: { provider: args.provider, keys } });
    return { provider: args.provider, keys: keys.sort(), stored: true, available: this.providerStatus(args.provider).available };
  }

  async acmeConfigSet(args: ArgsOf<'proxy_acme_config_set'>, ctx: CallContext) {
    if (args.email !== '' && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(args.email)) throw badRequest(`email '${args.email}' is not an email address`);
    // Caddy expands placeholders in the ACME issuer's email and directory URL.
    if (hasBrace(args.email)) throw badRequest(`email '${args.email}' must not contain { or }: Caddy would expand it as a placeholder`);
    if (hasBrace(args.dir_url ?? '')) throw badRequest(`dir_url '${args.dir_url}' must not contain { or }: Caddy would expand it as a placeholder (percent-encode a literal brace as %7B, %7D)`);
    const dir = args.dir_url ?? '';
    if (dir !== '') {
      let u: URL;
      try {
        u = new URL(dir);
      } catch {
        throw badRequest(`dir_url '${dir}' is not a URL`);
      }
      if (u.protocol !== 'https:') throw badRequest(`dir_url '${dir}' must be an https URL`);
    }
    const resolvers = args.dns_resolvers ?? null;
    for (const r of resolvers ?? []) if (!parseHostPort(r)) throw badRequest(`dns_resolvers: '${r}' is not an IP address (optionally with :port)`);
    const r = await this.change((c) => ({ ...c, acme: { email: args.email, dir_url: dir, dns_resolvers: resolvers } }), (c) => ({ acme: c.acme }));
    ctx.note({ summary: `ACME account ${args.email || '(no email)'} at ${dir || 'the public production directory'}`, target: 'proxy/acme/config', metadata: { email: args.email, dir_url: dir } });
    return r;
  }

  // ------------------------------------------------------------------ floating addresses, DNS

  async vipSet(args: ArgsOf<'proxy_vip_set'>, ctx: CallContext) {
    let vip: ProxyVip | null = null;
    if (args.vip !== undefined && args.vip !== '') {
      if (!net.isIPv4(args.vip)) throw badRequest(`vip '${args.vip}' is not an IPv4 address`);
      if (!args.vip_iface) throw badRequest('vip_iface is required when a vip is set');
      if (!/^[A-Za-z0-9_.:@-]{1,15}$/.test(args.vip_iface)) throw badRequest(`vip_iface '${args.vip_iface}' is not an interface name`);
      if (args.vip6 !== undefined && args.vip6 !== '' && !net.isIPv6(args.vip6)) throw badRequest(`vip6 '${args.vip6}' is not an IPv6 address`);
      const pv = this.plane.vipProbe;
      if (!pv.ip.available) throw unavailable(`ip is not available: ${pv.ip.reason}`);
      if (!pv.arping.available) throw unavailable(`arping is not available: ${pv.arping.reason}`);
      if (!(await ifaceExists(args.vip_iface))) throw badRequest(`vip_iface '${args.vip_iface}': no such interface on this node`);
      const v6 = args.vip6 ? args.vip6 : null;
      vip = { vip: args.vip, vip_iface: args.vip_iface, vip_prefix: args.vip_prefix ?? 32, vip6: v6, vip6_prefix: v6 ? args.vip6_prefix ?? 128 : null };
    } else if (args.vip6) {
      throw badRequest('vip6 needs a vip (IPv4) as well');
    }
    const r = await this.change((c) => ({ ...c, vip }), (c) => ({ vip: c.vip }));
    ctx.note({ summary: vip ? `Floating address ${vip.vip}/${vip.vip_prefix}${vip.vip6 ? ` and ${vip.vip6}/${vip.vip6_prefix}` : ''} on ${vip.vip_iface}` : 'Floating addresses cleared', target: 'proxy/vip', metadata: { vip } });
    return r;
  }

  async dnsSet(args: ArgsOf<'proxy_dns_set'>, ctx: CallContext) {
    const ups = args.dns_upstreams ?? [];
    for (const u of ups) {
      const hp = parseHostPort(u);
      if (!hp) throw badRequest(`dns_upstreams: '${u}' is not an IP address (optionally with :port)`);
      const r = dnsUpstreamRefusal(u, hp, this.plane.rules);
      if (r) throw refusalError(r);
    }
    const r = await this.change((c) => ({ ...c, dns_upstreams: [...ups] }), (c) => ({ dns_upstreams: c.dns_upstreams, responder: this.dnsStatus() }));
    ctx.note({ summary: ups.length ? `Proxy DNS forwards to ${ups.join(', ')}` : 'Proxy DNS upstreams cleared', target: 'proxy/dns', metadata: { dns_upstreams: ups } });
    return r;
  }

  private dnsStatus() {
    const l = this.d.settings.dnsListen;
    return { listen: l ? `${l.host}:${l.port}` : null, running: !!this.plane.dns?.running, error: l ? this.plane.dnsError : 'not configured: set proxy.dns_listen in the config file' };
  }

  // ------------------------------------------------------------------ status

  async hostStatus() {
    const l = this.plane.lease();
    const snap = this.d.cluster.proxyConfig.get() as { version: number; config: ProxyConfig };
    const runtimes = this.plane.runtimes();
    const missing: string[] = [];
    for (const r of runtimes) if (!r.available) missing.push(`${r.name}: ${r.reason}`);
    for (const d of snap.config.domains) {
      if (d.cert_source === 'internal') continue;
      const p = this.providerStatus(d.cert_source);
      if (!p.available) missing.push(`domain ${d.name}: ${p.reason}`);
    }
    const dns = this.dnsStatus();
    if (!this.d.settings.dnsListen) missing.push(`dns responder: ${dns.error}`);
    return {
      node_id: this.d.node.id,
      runtimes,
      caddy_version: this.plane.caddyProbe.caddy.version,
      holding: this.plane.holdsProxy(),
      holder: l.holder ?? (this.plane.holdsProxy() ? this.d.node.id : null),
      epoch: l.epoch,
      enabled: snap.config.enabled,
      serving: this.plane.serving(),
      caddy_running: this.plane.caddy.running,
      config_version: snap.version,
      applied_version: this.plane.appliedVersion,
      last_apply_error: this.plane.lastApplyError,
      listen_host: this.d.settings.listenHost,
      rules: { allow_loopback_upstreams: this.d.settings.allowLoopbackUpstreams, allow_privileged_listen_ports: this.d.settings.allowPrivilegedListenPorts },
      refused: await this.plane.refusals(snap.config),
      vip: this.plane.vipState(),
      dns,
      missing,
    };
  }

  // ------------------------------------------------------------------ on the holder

  /**
   * Runs `local` when this node serves the proxy; otherwise hands the call to
   * the holder (which records it); a call that already came over the cluster
   * to a node that no longer holds gets 409 naming the holder.
   */
  private async onHolder<T>(ctx: CallContext, local: () => Promise<T>): Promise<T | unknown> {
    if (this.plane.holdsProxy()) return local();
    const holder = this.plane.lease().holder;
    if (!holder) throw conflict('no node holds the proxy yet');
    if (ctx.forwardTo && ctx.caller.transport !== 'cluster') return ctx.forwardTo(holder);
    throw conflict(`this node does not hold the proxy; ask the holder ${holder} (call again with peer_id=${holder})`);
  }

  async certs(ctx: CallContext) {
    return this.onHolder(ctx, async () => {
      const cfg = this.current();
      const root = await this.plane.caRoot();
      // The internal CA's root is the same on every member: trusting it once covers moves and takeovers.
      return { node_id: this.d.node.id, internal_ca: { root_pem: root.certPem, sha256: root.fingerprint }, certs: cfg.domains.map((d) => this.certOf(d)) };
    });
  }

  private certFiles(domain: string): string[] {
    const root = this.plane.certDir();
    const name = `wildcard_.${domain}`;
    let issuers: string[] = [];
    try {
      issuers = fs.readdirSync(root);
    } catch {
      return [];
    }
    return issuers.map((i) => path.join(root, i, name)).filter((p) => fs.existsSync(path.join(p, `${name}.crt`)));
  }

  private certOf(d: ProxyDomain) {
    const subject = `*.${d.name}`;
    const errLine = [...this.plane.caddy.recent(400)].reverse().find((l) => (l.level === 'error' || l.level === 'warn') && l.logger.startsWith('tls') && (l.fields.identifier === subject || (Array.isArray(l.fields.identifiers) && l.fields.identifiers.includes(subject))) && l.msg !== 'stapling OCSP');
    let last_error: string | null = errLine ? `${errLine.ts} ${errLine.msg}${errLine.fields.error ? `: ${String(errLine.fields.error)}` : ''}` : null;
    if (d.cert_source !== 'internal' && !this.providerStatus(d.cert_source).available) last_error = this.providerStatus(d.cert_source).reason;
    const base = { domain: d.name, cert_source: d.cert_source, subject, issuer: null as string | null, issuer_kind: d.cert_source === 'internal' ? 'internal' : 'acme', serial: null as string | null, not_before: null as string | null, not_after: null as string | null, managed: false, last_error };
    const dir = this.certFiles(d.name)[0];
    if (!dir) return base;
    try {
      const pem = fs.readFileSync(path.join(dir, `wildcard_.${d.name}.crt`), 'utf8');
      const first = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(pem)?.[0] ?? pem;
      const x = new crypto.X509Certificate(first);
      return {
        ...base,
        issuer: x.issuer.replace(/\n/g, ', '),
        serial: x.serialNumber,
        not_before: new Date(x.validFrom).toISOString(),
        not_after: new Date(x.validTo).toISOString(),
        managed: true,
        storage_issuer: path.basename(path.dirname(dir)),
      };
    } catch (err) {
      return { ...base, last_error: `cannot read the stored certificate: ${(err as Error).message}` };
    }
  }

  /** The serial of the certificate Caddy serves for `name` on `port` (null when it does not answer). */
  private servedSerial(name: string, port: number): Promise<string | null> {
    const lh = this.d.settings.listenHost;
    const host = lh === '' || lh === '0.0.0.0' ? '127.0.0.1' : lh === '::' ? '::1' : lh;
    return new Promise((resolve) => {
      const s = tls.connect({ host, port, servername: name, rejectUnauthorized: false, timeout: 2000 }, () => {
        const serial = s.getPeerCertificate()?.serialNumber ?? null;
        s.destroy();
        resolve(serial ? serial.toUpperCase() : null);
      });
      s.on('error', () => resolve(null));
      s.on('timeout', () => {
        s.destroy();
        resolve(null);
      });
    });
  }

  async renew(args: ArgsOf<'proxy_certs_renew'>, ctx: CallContext) {
    this.domainOf(this.current(), args.domain);
    return this.onHolder(ctx, async () => {
      const d = this.domainOf(this.current(), args.domain);
      if (!this.plane.serving()) throw conflict('the proxy is disabled: enable it (PATCH /proxy) before renewing certificates');
      if (d.cert_source !== 'internal' && !this.providerStatus(d.cert_source).available) throw badRequest(`domain '${d.name}' uses cert_source '${d.cert_source}': ${this.providerStatus(d.cert_source).reason}`);
      const before = this.certOf(d);
      await this.plane.renew(d.name, this.certFiles(d.name));
      const deadline = Date.now() + 60_000;
      let after = this.certOf(d);
      while (!(after.managed && after.serial !== before.serial)) {
        if (Date.now() > deadline) throw unavailable(`no new certificate for *.${d.name} within 60 s: ${after.last_error ?? 'Caddy reported no error yet'}`);
        await new Promise((r) => setTimeout(r, 50));
        after = this.certOf(d);
      }
      // Caddy swaps the certificate it serves just after storing it: wait for that too.
      if (d.entries.length) {
        const e = d.entries[0];
        while ((await this.servedSerial(`${e.subdomain}.${d.name}`, e.listen_port)) !== after.serial) {
          if (Date.now() > deadline) throw unavailable(`Caddy stored a new certificate for *.${d.name} but does not serve it within 60 s`);
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      ctx.note({ summary: `Certificate for *.${d.name} renewed (serial ${after.serial})`, target: `proxy/domains/${d.name}/certs`, metadata: { previous_serial: before.serial, serial: after.serial } });
      return { renewed: true, previous_serial: before.serial, cert: after };
    });
  }

  async diagnostics(ctx: CallContext) {
    return this.onHolder(ctx, async () => {
      const snap = this.d.cluster.proxyConfig.get() as { version: number; config: ProxyConfig };
      const cfg = snap.config;
      const serving = this.plane.serving();
      const adminOk = this.plane.caddy.running ? await this.plane.caddy.admin.ping() : false;
      let caddyUpstreams: Array<{ address: string; num_requests: number; fails: number }> = [];
      if (adminOk) caddyUpstreams = await this.plane.caddy.admin.getJson<typeof caddyUpstreams>('/reverse_proxy/upstreams').catch(() => []);
      const ports = [...new Set(cfg.domains.flatMap((d) => d.entries.map((e) => e.listen_port)))].sort((a, b) => a - b);
      const lh = this.d.settings.listenHost;
      const checkHost = lh === '' ? '127.0.0.1' : lh === '::' ? '::1' : lh === '0.0.0.0' ? '127.0.0.1' : lh;
      const listeners = serving
        ? await Promise.all(ports.map(async (p) => {
          const r = await tcpCheck(net.isIPv6(checkHost) ? `[${checkHost}]:${p}` : `${checkHost}:${p}`, 1000);
          return { port: p, address: `${checkHost}:${p}`, listening: r.ok, error: r.error, http3: cfg.http3 };
        }))
        : [];
      const checks = serving ? await this.plane.checkUpstreams(false) : [];
      const l = this.plane.lease();
      return {
        node_id: this.d.node.id,
        collected_at: new Date().toISOString(),
        lease: { holder: l.holder ?? this.d.node.id, epoch: l.epoch, holding: this.plane.holdsProxy() },
        enabled: cfg.enabled,
        serving,
        caddy: { running: this.plane.caddy.running, pid: this.plane.caddy.pid, version: this.plane.caddyProbe.caddy.version, admin_ok: adminOk },
        config: { replicated_version: snap.version, applied_version: this.plane.appliedVersion, last_apply_error: this.plane.lastApplyError, domains: cfg.domains.length, entries: cfg.domains.reduce((n, d) => n + d.entries.length, 0) },
        listeners,
        upstreams: checks.map((c) => ({ ...c, caddy: caddyUpstreams.find((u) => u.address === c.dial) ?? null })),
        vip: { configured: cfg.vip, ...this.plane.vipState() },
        dns: { ...this.dnsStatus(), upstreams: cfg.dns_upstreams, stats: this.plane.dns?.stats ?? null },
        recent_errors: this.plane.caddy.recent(400).filter((x) => x.level === 'error' || x.level === 'warn' || x.level === 'fatal').slice(-50),
        incidents: (await this.d.records.listIncidents()).slice(0, 10).map((i) => ({ incident_id: i.incident_id, kind: i.kind, at: i.at, summary: i.summary })),
      };
    });
  }

  async incidents() {
    const all = await this.d.records.listIncidents();
    return { incidents: all.map((i) => ({ incident_id: i.incident_id, kind: i.kind, at: i.at, node_id: i.node_id, summary: i.summary })) };
  }

  async incident(id: string) {
    const i = await this.d.records.getIncident(id);
    if (!i) throw notFound(`incident '${id}' not found`);
    return i;
  }
}
