/**
 * ACME DNS providers on this node: whether this Caddy build has the
 * provider's module, and the credentials stored for it. Credentials live in
 * the secret store (one secret per provider, namespace `proxy-acme`), never
 * in the replicated configuration; they reach Caddy only in the load over
 * its admin socket, and every value is cut out of incident bundles.
 */
import type { ProxyContext } from './context.js';

/** DNS providers of the caddy-dns project that hostd knows how to name; the build decides which work. */
export const KNOWN_PROVIDERS = [
  'azure',
  'cloudflare',
  'digitalocean',
  'dnspod',
  'duckdns',
  'gandi',
  'godaddy',
  'googleclouddns',
  'hetzner',
  'ionos',
  'linode',
  'namecheap',
  'netcup',
  'ovh',
  'porkbun',
  'rfc2136',
  'route53',
  'vultr',
] as const;

/** A provider name (and a credential key): what a Caddy module's name part and field names are. */
export const PROVIDER_NAME = /^[a-z0-9_]{1,64}$/;

export const SECRET_NS = 'proxy-acme';

export interface ProviderStatus {
  name: string;
  module: string;
  available: boolean;
  reason: string | null;
}

export class Providers {
  private readonly credentials = new Map<string, Record<string, string>>();

  constructor(private readonly ctx: ProxyContext) {}

  /** Reads the stored credentials (at open). */
  async load(): Promise<void> {
    const { secrets } = this.ctx;
    for (const name of await secrets.list(SECRET_NS)) {
      const v = await secrets.get(SECRET_NS, name).catch(() => null);
      if (v) this.credentials.set(name, JSON.parse(v) as Record<string, string>);
    }
  }

  async store(provider: string, creds: Record<string, string>): Promise<void> {
    await this.ctx.secrets.put(SECRET_NS, provider, JSON.stringify(creds));
    this.credentials.set(provider, { ...creds });
  }

  has(provider: string): boolean {
    return this.credentials.has(provider);
  }

  /** Every stored provider's credentials (for what Caddy loads). */
  all(): Map<string, Record<string, string>> {
    return this.credentials;
  }

  /** Providers with credentials in the secret store. */
  async stored(): Promise<Set<string>> {
    return new Set(await this.ctx.secrets.list(SECRET_NS));
  }

  /** `text` with every stored credential value cut out. */
  redact(text: string): string {
    let out = text;
    for (const creds of this.credentials.values()) for (const v of Object.values(creds)) if (v.length >= 4) out = out.split(v).join('[redacted]');
    return out;
  }

  /** Whether ACME DNS-01 with `name` works with this node's Caddy, and why not. */
  async status(name: string): Promise<ProviderStatus> {
    const module = `dns.providers.${name}`;
    const caddy = (await this.ctx.drivers.caddy.availability()).find((a) => a.name === 'caddy');
    if (!caddy?.available) return { name, module, available: false, reason: `caddy is not available: ${caddy?.reason ?? 'not reported'}` };
    if ((await this.ctx.drivers.caddy.modules()).has(module)) return { name, module, available: true, reason: null };
    return {
      name,
      module,
      available: false,
      reason: `this Caddy build (${caddy.version}) has no module ${module}; ACME DNS-01 with ${name} needs a Caddy built with it (xcaddy build --with github.com/caddy-dns/${name})`,
    };
  }

  /** Every provider hostd knows or this build has. */
  async names(): Promise<string[]> {
    const inBuild = [...(await this.ctx.drivers.caddy.modules())].filter((m) => m.startsWith('dns.providers.')).map((m) => m.slice('dns.providers.'.length));
    return [...new Set([...KNOWN_PROVIDERS, ...inBuild])].sort();
  }
}
