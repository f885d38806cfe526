/**
 * The event stream's settings: the config file's `events:` section, each with
 * an environment variable for tests (docs/events.md, "Limits").
 */
export interface EventSettings {
  /** Events older than this many days are deleted (0: no age limit). Default 90, the activity log's. */
  maxAgeDays: number;
  /** The oldest events beyond this many are deleted. Default 2,000,000 (above the activity log's 1,000,000 rows: tasks add their own). */
  maxEvents: number;
  /** How often the background pruning runs. */
  pruneEveryMs: number;
  /** Seqs reserved durably ahead of use (a restart continues after the reserved mark). */
  reserveBlock: number;
  /** Events one subscriber may have queued in memory before it is served from the store instead. */
  queueEvents: number;
  /** Bytes of those queued events, and of what waits in its connection's buffer, before a reader that stopped reading gets `lagged`. */
  queueBytes: number;
  /** Open streams (and waiting long polls) one token may hold. */
  maxStreamsPerToken: number;
  /** Milliseconds between `bookmark` events. */
  bookmarkMs: number;
  /**
   * A `members=all` stream: the longest an event waits for a member whose
   * backlog is still coming, so that members' events go out in time order
   * (0: every event as it arrives).
   */
  membersAllHoldMs: number;
}

export const DEFAULT_EVENT_SETTINGS: Readonly<EventSettings> = Object.freeze({
  maxAgeDays: 90,
  maxEvents: 2_000_000,
  pruneEveryMs: 60_000,
  reserveBlock: 1000,
  queueEvents: 256,
  queueBytes: 1 << 20,
  maxStreamsPerToken: 16,
  bookmarkMs: 15_000,
  membersAllHoldMs: 2000,
});

const KEYS: Record<keyof EventSettings, { key: string; env: string; min: number; fraction?: boolean }> = {
  maxAgeDays: { key: 'max_age_days', env: 'HOSTD_EVENTS_MAX_AGE_DAYS', min: 0, fraction: true },
  maxEvents: { key: 'max_events', env: 'HOSTD_EVENTS_MAX_EVENTS', min: 10 },
  pruneEveryMs: { key: 'prune_ms', env: 'HOSTD_EVENTS_PRUNE_MS', min: 10 },
  reserveBlock: { key: 'reserve_block', env: 'HOSTD_EVENTS_RESERVE_BLOCK', min: 1 },
  queueEvents: { key: 'queue_events', env: 'HOSTD_EVENTS_QUEUE_EVENTS', min: 1 },
  queueBytes: { key: 'queue_bytes', env: 'HOSTD_EVENTS_QUEUE_BYTES', min: 1024 },
  maxStreamsPerToken: { key: 'max_streams_per_token', env: 'HOSTD_EVENTS_MAX_STREAMS_PER_TOKEN', min: 1 },
  bookmarkMs: { key: 'bookmark_ms', env: 'HOSTD_EVENTS_BOOKMARK_MS', min: 10 },
  membersAllHoldMs: { key: 'members_all_hold_ms', env: 'HOSTD_EVENTS_MEMBERS_ALL_HOLD_MS', min: 0 },
};

/** Reads the `events:` section; an unknown key or a value out of range stops the start, naming it. */
export function parseEventSettings(raw: unknown, env: NodeJS.ProcessEnv): EventSettings {
  const out: EventSettings = { ...DEFAULT_EVENT_SETTINGS };
  if (raw !== undefined && raw !== null && (typeof raw !== 'object' || Array.isArray(raw))) throw new Error('config: events must be a mapping');
  const given = (raw ?? {}) as Record<string, unknown>;
  const known = Object.values(KEYS).map((k) => k.key);
  for (const k of Object.keys(given)) if (!known.includes(k)) throw new Error(`config: events.${k} is not a setting (known: ${known.join(', ')})`);
  for (const [field, f] of Object.entries(KEYS) as Array<[keyof EventSettings, (typeof KEYS)[keyof EventSettings]]>) {
    const fromEnv = env[f.env];
    const v = fromEnv !== undefined && fromEnv !== '' ? Number(fromEnv) : given[f.key];
    if (v === undefined) continue;
    const what = fromEnv !== undefined && fromEnv !== '' ? f.env : `config: events.${f.key}`;
    if (typeof v !== 'number' || !Number.isFinite(v) || (!f.fraction && !Number.isInteger(v)) || v < f.min)
      throw new Error(`${what} must be a ${f.fraction ? '' : 'whole '}number >= ${f.min}`);
    out[field] = v;
  }
  return out;
}
