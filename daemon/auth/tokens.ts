/**
 * Agent tokens. The secret is shown once at creation and stored only as a
 * SHA-256 hash; lookups hash the presented secret and compare in constant
 * time. A hash-keyed in-memory index keeps authentication off the disk on the
 * hot path; last-used times are written back lazily so that a read-only call
 * costs no write.
 *
 * Every write of the token table (create, revoke, the last-used flush) runs
 * through one serial queue, in call order, so that no write can overtake
 * another: a flush computed before a revoke is stored before the revoke's
 * delete, and a flush computed after it no longer sees the token. Revocation
 * takes effect in memory before anything is awaited (the secret stops working
 * at once) and its delete is synced to disk before the call answers, so a
 * revoked token never comes back after a restart or a power loss
 * (docs/durability.md).
 */
import { OPERATOR } from '../lib/operator.js';
import crypto from 'node:crypto';
import { LAZY, SYNC, type Store, type Sub } from '../store/store.js';
import { SerialQueue } from '../lib/serial.js';
import { conflict, notFound, badRequest, internal } from '../lib/errors.js';

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
  private readonly byId = new Map<string, TokenRecord>();
  /** Use times not yet stored, by token id (the latest one noted). */
  private readonly lastUsed = new Map<string, number>();
  /** Every write of the token table, one at a time, in call order. */
  private readonly writes = new SerialQueue();
  /** Secrets verified since start, to their records (cleared on revoke of that token). */
  private readonly verified = new Map<string, TokenRecord>();
  private flushTimer: NodeJS.Timeout | null = null;
  private readonly listeners = new Set<(change: TokenChange) => void>();

  constructor(
    store: Store,
    private readonly knownScopes: ReadonlySet<string>,
  ) {
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
    for (const rec of await this.sub.values().all()) this.index(rec);
    this.flushTimer = setInterval(() => void this.flush(), LAST_USED_FLUSH_MS);
    this.flushTimer.unref();
  }

  async create(name: string, scopes: string[]): Promise<{ token: TokenInfo; secret: string }> {
    if (!NAME_RE.test(name))
      throw badRequest(`token name '${name}' must be 1-64 characters of letters, digits, '_', '.', '-', starting with a letter or digit`);
    const unknown = scopes.filter((s) => !this.knownScopes.has(s));
    if (unknown.length) throw badRequest(`unknown scope(s): ${unknown.join(', ')}; known scopes: ${[...this.knownScopes].sort().join(', ')}`);
    // Activity rows and task owners name the local administrator so; a token of that name would pass for it.
    if (name.toLowerCase() === OPERATOR) throw badRequest(`token name '${name}' is reserved for the local administrator`);
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
    // Synced: a token whose secret was shown must exist after a power loss.
    await this.writes.run(() => this.sub.put(rec.id, rec, SYNC));
    this.index(rec);
    this.emit({ type: 'create', token: info(rec) });
    return { token: info(rec), secret };
  }

  /**
   * Every token, with its latest use. Reading leaves the pending use times in
   * place: they are stored by the next flush, whoever listed the tokens since.
   */
  list(): TokenInfo[] {
    return [...this.byHash.values()].map((r) => this.infoWithUse(r)).sort((a, b) => a.name.localeCompare(b.name));
  }

  private infoWithUse(r: TokenRecord): TokenInfo {
    const t = this.lastUsed.get(r.id);
    return info(t === undefined ? r : { ...r, last_used_at: new Date(t).toISOString() });
  }

  async revoke(nameOrId: string): Promise<TokenInfo> {
    const rec = this.findByName(nameOrId) ?? this.byId.get(nameOrId);
    if (!rec) throw notFound(`no token named '${nameOrId}'`);
    // Final at once: from here on the secret authenticates nothing, and a
    // flush that runs later no longer finds the record to write back.
    const shown = this.infoWithUse(rec);
    this.byHash.delete(rec.hash);
    this.byId.delete(rec.id);
    for (const [secret, r] of this.verified) if (r.id === rec.id) this.verified.delete(secret);
    this.lastUsed.delete(rec.id);
    // Listeners (the cluster's token directory) must hear of every revoke.
    this.emit({ type: 'revoke', token: shown });
    try {
      // Behind any flush already queued (which may hold this record), and synced.
      await this.writes.run(() => this.sub.del(rec.id, SYNC));
    } catch (err) {
      // The token stays revoked in this process; say that the disk may still hold it.
      throw internal(
        `token '${rec.name}' is revoked until the daemon restarts, but its deletion could not be stored: ${(err as Error).message}; revoke it again`,
      );
    }
    return shown;
  }

  private index(rec: TokenRecord): void {
    this.byHash.set(rec.hash, rec);
    this.byId.set(rec.id, rec);
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

  /**
   * Stores the noted use times. Runs in the write queue: the records are
   * looked up when it is this flush's turn, so a token revoked before then is
   * not written back. Not synced: after a power loss a token's last use may be
   * a few seconds older than it was.
   */
  flush(): Promise<void> {
    if (!this.lastUsed.size) return Promise.resolve();
    return this.writes.run(async () => {
      const taken = [...this.lastUsed];
      const recs: TokenRecord[] = [];
      for (const [id, t] of taken) {
        const r = this.byId.get(id);
        if (!r) continue;
        r.last_used_at = new Date(t).toISOString();
        recs.push(r);
      }
      if (recs.length) {
        try {
          await this.sub.batch(
            recs.map((r) => ({ type: 'put' as const, key: r.id, value: r })),
            LAZY,
          );
        } catch {
          return; // kept pending: the next flush tries again
        }
      }
      // Uses noted while this batch was written stay pending for the next flush.
      for (const [id, t] of taken) if (this.lastUsed.get(id) === t) this.lastUsed.delete(id);
    });
  }

  async close(): Promise<void> {
    if (this.flushTimer) clearInterval(this.flushTimer);
    await this.flush();
  }
}

function info(r: TokenRecord): TokenInfo {
  return { id: r.id, name: r.name, scopes: r.scopes, created_at: r.created_at, last_used_at: r.last_used_at };
}
