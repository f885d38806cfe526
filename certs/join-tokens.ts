/**
 * Join tokens: one-time, expiring (15 minutes by default), stored only as a
 * SHA-256 hash in the store sublevel 'join_tokens' of the node that made them.
 *
 * The printed text is `hostd-join.<id>.<secret>.<ca fingerprint>`: the id finds
 * the record, the secret proves possession, and the CA fingerprint (SHA-256 of
 * the CA certificate, hex) lets the joiner pin the cluster CA before it holds
 * any certificate of its own.
 */
import crypto from 'node:crypto';
import type { Store, Sub } from '../daemon/store/store.js';

export const DEFAULT_JOIN_TTL_MS = 15 * 60 * 1000;
const PREFIX = 'hostd-join';

export interface JoinTokenRecord {
  id: string;
  hash: string;
  created_at: string;
  expires_at: string;
}

export interface ParsedJoinToken {
  id: string;
  secret: string;
  caFingerprint: string;
}

export class JoinTokenError extends Error {
  constructor(
    readonly reason: 'malformed' | 'unknown' | 'expired' | 'mismatch',
    message: string,
  ) {
    super(message);
  }
}

export function parseJoinToken(text: string): ParsedJoinToken {
  const parts = text.trim().split('.');
  if (
    parts.length !== 4 ||
    parts[0] !== PREFIX ||
    !/^[0-9a-f]{16}$/.test(parts[1]) ||
    !/^[A-Za-z0-9_-]{43}$/.test(parts[2]) ||
    !/^[0-9a-f]{64}$/.test(parts[3])
  ) {
    throw new JoinTokenError('malformed', 'join token is malformed (expected hostd-join.<id>.<secret>.<ca fingerprint>)');
  }
  return { id: parts[1], secret: parts[2], caFingerprint: parts[3] };
}

const hash = (s: string) => crypto.createHash('sha256').update(s).digest('hex');

export class JoinTokens {
  private readonly sub: Sub<JoinTokenRecord>;
  /** Serialises consume() so that a token cannot be spent twice concurrently. */
  private chain: Promise<unknown> = Promise.resolve();

  constructor(store: Store) {
    this.sub = store.sub<JoinTokenRecord>('join_tokens');
  }

  async create(caFingerprint: string, ttlMs = DEFAULT_JOIN_TTL_MS): Promise<{ token: string; id: string; expires_at: string }> {
    await this.prune();
    const id = crypto.randomBytes(8).toString('hex');
    const secret = crypto.randomBytes(32).toString('base64url');
    const now = Date.now();
    const rec: JoinTokenRecord = { id, hash: hash(secret), created_at: new Date(now).toISOString(), expires_at: new Date(now + ttlMs).toISOString() };
    await this.sub.put(id, rec);
    return { token: `${PREFIX}.${id}.${secret}.${caFingerprint}`, id, expires_at: rec.expires_at };
  }

  /**
   * Spends a token: it must exist, match, and not have expired. It is deleted
   * whether it was valid or expired, so it can never be used again.
   */
  consume(text: string): Promise<ParsedJoinToken> {
    const run = this.chain.then(() => this.consumeNow(text));
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async consumeNow(text: string): Promise<ParsedJoinToken> {
    const t = parseJoinToken(text);
    const rec = await this.sub.get(t.id);
    if (!rec) throw new JoinTokenError('unknown', 'join token is unknown or was already used');
    const given = Buffer.from(hash(t.secret), 'hex');
    if (!crypto.timingSafeEqual(given, Buffer.from(rec.hash, 'hex'))) throw new JoinTokenError('mismatch', 'join token does not match');
    await this.sub.del(t.id);
    if (Date.parse(rec.expires_at) <= Date.now()) throw new JoinTokenError('expired', `join token expired at ${rec.expires_at}`);
    return t;
  }

  /** Drops expired records. */
  async prune(): Promise<void> {
    const now = Date.now();
    const dead: string[] = [];
    for await (const [k, v] of this.sub.iterator()) if (Date.parse(v.expires_at) <= now) dead.push(k);
    if (dead.length) await this.sub.batch(dead.map((key) => ({ type: 'del' as const, key })));
  }

  async clear(): Promise<void> {
    await this.sub.clear();
  }
}
