/**
 * Agent tokens. The secret is shown once at creation and stored only as a
 * SHA-256 hash; lookups hash the presented secret and compare in constant
 * time. A hash-keyed in-memory index keeps authentication off the disk on the
 * hot path; last-used times are written back lazily so that a read-only call
 * costs no write.
 */
import crypto from 'node:crypto';
import type { Store, Sub } from '../store/store.js';
import { conflict, notFound, badRequest } from '../lib/errors.js';

export interface TokenRecord {
  id: string;
  name: string;
  scopes: string[];
  hash: string; // hex sha256 of the secret
  created_at: string;
  last_used_at: string | null;
}

/** What listing shows: never the hash or the secret. */
export interface TokenInfo {
  id: string;
  name: string;
  scopes: string[];
  created_at: string;
  last_used_at: string | null;
}

export interface TokenChange {
  type: 'create' | 'revoke';
  token: TokenInfo;
}

const TOKEN_PREFIX = 'hostd_';
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const LAST_USED_FLUSH_MS = 5000;
const VERIFIED_CACHE_MAX = 4096;

export const hashSecret = (secret: string): string => crypto.createHash('sha256').update(secret).digest('hex');

export class TokenStore {
  private readonly sub: Sub<TokenRecord>;
  private readonly byHash = new Map<string, TokenRecord>();
  private readonly lastUsed = new Map<string, number>();
  /** Secrets verified since start, to their records (cleared on revoke of that token). */
  private readonly verified = new Map<string, TokenRecord>();
  private flushTimer: NodeJS.Timeout | null = null;
  private readonly listeners = new Set<(change: TokenChange) => void>();

  constructor(store: Store, private readonly knownScopes: ReadonlySet<string>) {
    this.sub = store.sub<TokenRecord>('tokens');
  }

  /**
   * Calls `fn` after every create and revoke (the cluster republishes its token
   * directory). Listeners run synchronously and must not throw; returns an
   * unsubscribe function.
   */
  onChange(fn: (change: TokenChange) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private emit(change: TokenChange): void {
    for (const fn of this.listeners) {
      try {
        fn(change);
      } catch {
        /* a listener's failure is its own */
      }
    }
  }

  async init(): Promise<void> {
    for (const rec of await this.sub.values().all()) this.byHash.set(rec.hash, rec);
    this.flushTimer = setInterval(() => void this.flush(), LAST_USED_FLUSH_MS);
    this.flushTimer.unref();
  }

  async create(name: string, scopes: string[]): Promise<{ token: TokenInfo; secret: string }> {
    if (!NAME_RE.test(name)) throw badRequest(`token name '${name}' must be 1-64 characters of letters, digits, '_', '.', '-', starting with a letter or digit`);
    const unknown = scopes.filter((s) => !this.knownScopes.has(s));
    if (unknown.length) throw badRequest(`unknown scope(s): ${unknown.join(', ')}; known scopes: ${[...this.knownScopes].sort().join(', ')}`);
    if (this.findByName(name)) throw conflict(`a token named '${name}' already exists`);
    const secret = TOKEN_PREFIX + crypto.randomBytes(32).toString('base64url');
    const rec: TokenRecord = {
      id: 'tok_' + crypto.randomBytes(8).toString('hex'),
      name,
      scopes: [...new Set(scopes)].sort(),
      hash: hashSecret(secret),
      created_at: new Date().toISOString(),
      last_used_at: null,
    };
    await this.sub.put(rec.id, rec);
    this.byHash.set(rec.hash, rec);
    this.emit({ type: 'create', token: info(rec) });
    return { token: info(rec), secret };
  }

  list(): TokenInfo[] {
    this.applyLastUsed();
    return [...this.byHash.values()].map(info).sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Moves noted use times into the records; returns the ids that changed. */
  private applyLastUsed(): string[] {
    const ids = [...this.lastUsed.keys()];
    for (const r of this.byHash.values()) {
      const t = this.lastUsed.get(r.id);
      if (t !== undefined) r.last_used_at = new Date(t).toISOString();
    }
    this.lastUsed.clear();
    return ids;
  }

  async revoke(nameOrId: string): Promise<TokenInfo> {
    const rec = this.findByName(nameOrId) ?? [...this.byHash.values()].find((r) => r.id === nameOrId);
    if (!rec) throw notFound(`no token named '${nameOrId}'`);
    await this.sub.del(rec.id);
    this.byHash.delete(rec.hash);
    for (const [secret, r] of this.verified) if (r.id === rec.id) this.verified.delete(secret);
    this.lastUsed.delete(rec.id);
    // Listeners (the cluster's token directory) must hear of every revoke.
    this.emit({ type: 'revoke', token: info(rec) });
    return info(rec);
  }

  /** The token a presented secret belongs to, or undefined. Marks it used. */
  authenticate(secret: string): TokenRecord | undefined {
    // Secrets already verified in this process skip the hash (a fifth of a
    // request's cost). Only verified secrets are kept, so a guess never hits;
    // a hit needs the exact secret, and a miss says nothing about other ones.
    let rec = this.verified.get(secret);
    if (!rec) {
      if (!secret.startsWith(TOKEN_PREFIX)) return undefined;
      const h = hashSecret(secret);
      rec = this.byHash.get(h);
      // The map lookup already matched; compare again in constant time so that a
      // future change of index cannot turn this into a timing oracle.
      if (!rec || !crypto.timingSafeEqual(Buffer.from(rec.hash, 'hex'), Buffer.from(h, 'hex'))) return undefined;
      if (this.verified.size >= VERIFIED_CACHE_MAX) this.verified.clear();
      this.verified.set(secret, rec);
    }
    // Only the time is noted here; it is formatted and stored by the lazy flush.
    this.lastUsed.set(rec.id, Date.now());
    return rec;
  }

  private findByName(name: string): TokenRecord | undefined {
    for (const r of this.byHash.values()) if (r.name === name) return r;
    return undefined;
  }

  async flush(): Promise<void> {
    if (!this.lastUsed.size) return;
    const ids = this.applyLastUsed();
    const recs = [...this.byHash.values()].filter((r) => ids.includes(r.id));
    if (recs.length) await this.sub.batch(recs.map((r) => ({ type: 'put' as const, key: r.id, value: r }))).catch(() => undefined);
  }

  async close(): Promise<void> {
    if (this.flushTimer) clearInterval(this.flushTimer);
    await this.flush();
  }
}

function info(r: TokenRecord): TokenInfo {
  return { id: r.id, name: r.name, scopes: r.scopes, created_at: r.created_at, last_used_at: r.last_used_at };
}
