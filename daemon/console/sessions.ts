/**
 * The console's sign-in links and administrator sessions.
 *
 * A sign-in link is made over the admin socket (`hostctl console`): whoever
 * can open the socket is the administrator, and the link hands that to one
 * browser once. Its secret is kept only as a SHA-256 hash, works once, and
 * dies after LINK_TTL_MS. Redeeming it starts a session whose secret goes
 * into an HttpOnly cookie; the session is kept as a hash too and ends at its
 * expiry or at sign-out.
 *
 * Both live in this process's memory only: a restart signs every browser out
 * and kills every unused link. No session secret ever reaches the disk, and
 * there is no session table to leak or to restore after a revoke-everything
 * restart. Both maps are bounded; beyond the bound the oldest entry goes.
 */
import crypto from 'node:crypto';

export const LINK_TTL_MS = 10 * 60_000;
export const SESSION_TTL_MS = 8 * 3600_000;
const MAX_LINKS = 64;
const MAX_SESSIONS = 256;
const LINK_PREFIX = 'hsi_';
const SESSION_PREFIX = 'hss_';

const hash = (secret: string): string => crypto.createHash('sha256').update(secret).digest('hex');

/** Why a link or a session was not accepted (said to the browser; never the secret). */
export type Refusal = 'unknown' | 'expired';

export class ConsoleSessions {
  /** Unused sign-in links: hash of the secret -> expiry (ms). */
  private readonly links = new Map<string, number>();
  /** Open sessions: hash of the secret -> expiry (ms). */
  private readonly sessions = new Map<string, number>();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly ttl = { linkMs: LINK_TTL_MS, sessionMs: SESSION_TTL_MS },
  ) {}

  /** A new sign-in link's secret (the only time it exists in clear) and its expiry. */
  createLink(): { secret: string; expiresAt: number } {
    this.prune();
    const secret = LINK_PREFIX + crypto.randomBytes(32).toString('base64url');
    const expiresAt = this.now() + this.ttl.linkMs;
    bounded(this.links, MAX_LINKS);
    this.links.set(hash(secret), expiresAt);
    return { secret, expiresAt };
  }

  /**
   * Exchanges a link's secret for a session's: the link is spent whatever the
   * outcome, so a second use (or a guess) never succeeds.
   */
  redeem(linkSecret: string): { secret: string; expiresAt: number } | Refusal {
    const h = hash(linkSecret);
    const expiry = this.links.get(h);
    this.links.delete(h);
    if (expiry === undefined) return 'unknown';
    if (expiry <= this.now()) return 'expired';
    const secret = SESSION_PREFIX + crypto.randomBytes(32).toString('base64url');
    const expiresAt = this.now() + this.ttl.sessionMs;
    bounded(this.sessions, MAX_SESSIONS);
    this.sessions.set(hash(secret), expiresAt);
    return { secret, expiresAt };
  }

  /** The session's expiry when it is open, else why not. */
  check(sessionSecret: string): number | Refusal {
    if (!sessionSecret.startsWith(SESSION_PREFIX)) return 'unknown';
    const h = hash(sessionSecret);
    const expiry = this.sessions.get(h);
    if (expiry === undefined) return 'unknown';
    if (expiry <= this.now()) {
      this.sessions.delete(h);
      return 'expired';
    }
    return expiry;
  }

  /** Ends a session (sign-out); true when it was open. */
  end(sessionSecret: string): boolean {
    return this.sessions.delete(hash(sessionSecret));
  }

  private prune(): void {
    const t = this.now();
    for (const m of [this.links, this.sessions]) for (const [k, exp] of m) if (exp <= t) m.delete(k);
  }
}

/** Makes room for one more entry: Maps iterate in insertion order, so the first is the oldest. */
function bounded(m: Map<string, number>, max: number): void {
  while (m.size >= max) m.delete(m.keys().next().value as string);
}
