/**
 * Host names of upstreams, resolved by hostd rather than by Caddy, so that
 * the address checked is the address dialled: Caddy is given the IP address
 * (and the name as the TLS server name). A name whose DNS answer changes to
 * a loopback address after the check (DNS rebinding) is therefore caught at
 * the next build (every `tick_ms` on the holder), never dialled unchecked.
 *
 * The system resolver (getaddrinfo) is used, as Caddy's would be: /etc/hosts
 * counts. Answers are kept for `ttlMs`; a lookup is bounded by `timeoutMs`,
 * so a slow DNS server holds the proxy's reconcile up no longer than that.
 */
import dns from 'node:dns';

export type LookupAll = (name: string) => Promise<string[]>;

const systemLookup: LookupAll = async (name) => (await dns.promises.lookup(name, { all: true, verbatim: true })).map((a) => a.address);

/** `missing`: the name has no address (NXDOMAIN, no record); `unavailable`: the resolver did not say (timeout, SERVFAIL). */
export type Resolved = { addresses: string[] } | { error: string; kind: 'missing' | 'unavailable' };

const MISSING = new Set(['ENOTFOUND', 'ENODATA', 'EAI_NONAME', 'EAI_NODATA']);

export class NameResolver {
  private readonly cache = new Map<string, { at: number; r: Resolved }>();

  constructor(
    private readonly lookup: LookupAll = systemLookup,
    private readonly ttlMs = 5000,
    private readonly timeoutMs = 3000,
  ) {}

  /** `timeoutMs` overrides the default bound (a call can wait longer than a build). */
  async resolve(name: string, timeoutMs = this.timeoutMs): Promise<Resolved> {
    const hit = this.cache.get(name);
    if (hit && Date.now() - hit.at < this.ttlMs) return hit.r;
    let timer: NodeJS.Timeout | undefined;
    const r: Resolved = await Promise.race([
      this.lookup(name).then(
        (addresses): Resolved => (addresses.length ? { addresses } : { error: `'${name}' has no address`, kind: 'missing' }),
        (err: NodeJS.ErrnoException): Resolved => ({
          error: `'${name}' does not resolve (${err.code ?? err.message})`,
          kind: err.code && MISSING.has(err.code) ? 'missing' : 'unavailable',
        }),
      ),
      new Promise<Resolved>((resolve) => {
        timer = setTimeout(() => resolve({ error: `'${name}' did not resolve within ${timeoutMs} ms`, kind: 'unavailable' }), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    // Only answers are kept: a resolver that did not answer is asked again next time.
    if ('addresses' in r || r.kind === 'missing') this.cache.set(name, { at: Date.now(), r });
    if (this.cache.size > 1000) this.cache.delete(this.cache.keys().next().value as string);
    return r;
  }
}
