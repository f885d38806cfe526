/**
 * Rate-limited tracing of refusals: whoever causes them (a token making
 * calls that fail, an anonymous client knocking on the cluster port), the
 * trace they leave in the activity log and the log file grows at a bounded
 * rate, not at the rate they can send.
 *
 * Each key (a token id, a remote address, or one shared key) has a bucket of
 * `burst` refusals that are recorded one by one; it refills by one every
 * `everyMs`. A refusal that finds the bucket empty is only counted; once per
 * `windowMs` the counts of every key that had any are handed to `onSummary`,
 * which writes one summary row (and log line) per key. At most `maxKeys` keys
 * are tracked; refusals of further keys share the key '*'.
 */

export interface TraceLimits {
  /** Refusals recorded one by one at once, before the rate applies. */
  burst: number;
  /** Then one more every this many milliseconds. */
  everyMs: number;
  /** How often the refusals that were only counted are summarized. */
  windowMs: number;
  /** Keys tracked at once; refusals of further keys share the key '*'. */
  maxKeys: number;
}

/** Refusals of one key that were counted instead of recorded, over one window. */
export interface Suppressed<C> {
  key: string;
  /** What the caller passed with the first refusal of the window (e.g. the token's name and transport). */
  context: C;
  count: number;
  since: string;
  until: string;
  /** Counts by detail (e.g. `403 folders_create`); at most MAX_DETAILS kinds, the rest under 'other'. */
  details: Record<string, number>;
}

const MAX_DETAILS = 20;
export const SHARED_KEY = '*';

interface Entry<C> {
  tokens: number;
  refilledAt: number;
  pending: Suppressed<C> | null;
}

export class RefusalThrottle<C> {
  private readonly entries = new Map<string, Entry<C>>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    readonly limits: TraceLimits,
    private readonly onSummary: (s: Suppressed<C>) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * A refusal happened. True: record it one by one. False: it was counted
   * and will be part of the next summary of its key.
   */
  admit(key: string, detail: string, context: C): boolean {
    const t = this.now();
    let entry = this.entries.get(key);
    if (!entry) {
      if (this.entries.size >= this.limits.maxKeys) this.evictIdle(t);
      if (this.entries.size >= this.limits.maxKeys && key !== SHARED_KEY) return this.admit(SHARED_KEY, detail, context);
      entry = { tokens: this.limits.burst, refilledAt: t, pending: null };
      this.entries.set(key, entry);
    }
    this.refill(entry, t);
    if (entry.tokens >= 1) {
      entry.tokens -= 1;
      return true;
    }
    const at = new Date(t).toISOString();
    const p = (entry.pending ??= { key, context, count: 0, since: at, until: at, details: {} });
    p.count++;
    p.until = at;
    const kinds = Object.keys(p.details).length;
    const k = p.details[detail] !== undefined || kinds < MAX_DETAILS ? detail : 'other';
    p.details[k] = (p.details[k] ?? 0) + 1;
    this.schedule();
    return false;
  }

  /** Hands every pending summary over now (at shutdown, or when a window ends). */
  flush(): void {
    for (const entry of this.entries.values()) {
      const p = entry.pending;
      if (!p) continue;
      entry.pending = null;
      try {
        this.onSummary(p);
      } catch {
        /* the summary writer reports its own failures */
      }
    }
    this.evictIdle(this.now());
  }

  /** Stops the window timer (pending summaries are dropped unless flushed first). */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flush();
    }, this.limits.windowMs);
    this.timer.unref();
  }

  private refill(entry: Entry<C>, t: number): void {
    const gained = Math.floor((t - entry.refilledAt) / this.limits.everyMs);
    if (gained <= 0) return;
    entry.tokens = Math.min(this.limits.burst, entry.tokens + gained);
    entry.refilledAt = entry.tokens === this.limits.burst ? t : entry.refilledAt + gained * this.limits.everyMs;
  }

  /** Forgets keys whose bucket is full again and that have nothing pending. */
  private evictIdle(t: number): void {
    for (const [key, entry] of this.entries) {
      this.refill(entry, t);
      if (!entry.pending && entry.tokens >= this.limits.burst) this.entries.delete(key);
    }
  }
}

/** `3 × 403 folders_create, 1 × 400 folders_create`: a summary's details, largest first. */
export function describeDetails(details: Record<string, number>, max = 5): string {
  const list = Object.entries(details).sort((a, b) => b[1] - a[1]);
  const shown = list.slice(0, max).map(([k, n]) => `${n} × ${k}`);
  if (list.length > max) shown.push(`${list.length - max} more kinds`);
  return shown.join(', ');
}
