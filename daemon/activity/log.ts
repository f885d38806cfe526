/**
 * The activity log. Rows are keyed by time (zero-padded epoch milliseconds, a
 * per-process sequence and a random tail for uniqueness across restarts), so
 * since/until/cursor are bounds of one reverse range scan, newest first.
 */
import crypto from 'node:crypto';
import type { Store, Sub } from '../store/store.js';
import type { ActivityCategory, Severity } from '../../api/registry/types.js';
import { badRequest } from '../lib/errors.js';

export interface ActivityRow {
  id: string;
  timestamp: string;
  category: ActivityCategory;
  severity: Severity;
  summary: string;
  target: string;
  actor: string;
  metadata: Record<string, unknown> & { transport: string };
}

export type NewActivity = Omit<ActivityRow, 'id' | 'timestamp'> & { timestamp?: string };

export interface ActivityQuery {
  category?: string;
  severity?: string;
  search?: string;
  since?: string;
  until?: string;
  limit?: number;
  cursor?: string;
}

export interface ActivityPage {
  events: ActivityRow[];
  next_cursor: string | null;
}

const pad = (n: number, w: number) => String(n).padStart(w, '0');
const keyPrefix = (ms: number) => pad(ms, 15);

export class ActivityLog {
  private readonly sub: Sub<ActivityRow>;
  private lastMs = 0;
  private seq = 0;

  constructor(store: Store) {
    this.sub = store.sub<ActivityRow>('activity');
  }

  private nextKey(ms: number): string {
    if (ms === this.lastMs) this.seq++;
    else {
      this.lastMs = ms;
      this.seq = 0;
    }
    return `${keyPrefix(ms)}.${pad(this.seq, 6)}.${crypto.randomBytes(3).toString('hex')}`;
  }

  async record(row: NewActivity): Promise<ActivityRow> {
    const ts = row.timestamp ? new Date(row.timestamp) : new Date();
    const id = this.nextKey(ts.getTime());
    const full: ActivityRow = { ...row, id, timestamp: ts.toISOString() };
    await this.sub.put(id, full);
    return full;
  }

  async query(q: ActivityQuery): Promise<ActivityPage> {
    const limit = q.limit ?? 50;
    const range: { lt?: string; gte?: string; reverse: true } = { reverse: true };
    if (q.until) range.lt = keyPrefix(parseTime(q.until, 'until') + 1);
    if (q.since) range.gte = keyPrefix(parseTime(q.since, 'since'));
    if (q.cursor) {
      const c = decodeCursor(q.cursor);
      if (range.lt === undefined || c < range.lt) range.lt = c;
    }
    const needle = q.search?.toLowerCase();
    const events: ActivityRow[] = [];
    let next: string | null = null;
    for await (const [key, row] of this.sub.iterator(range)) {
      if (q.category && row.category !== q.category) continue;
      if (q.severity && row.severity !== q.severity) continue;
      if (needle && !row.summary.toLowerCase().includes(needle) && !row.target.toLowerCase().includes(needle)) continue;
      if (events.length === limit) {
        // One more match exists beyond this page: the cursor resumes after the page's last row.
        next = encodeCursor(events[events.length - 1].id);
        break;
      }
      events.push(row);
      void key;
    }
    return { events, next_cursor: next };
  }
}

function parseTime(v: string, name: string): number {
  const ms = Date.parse(v);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(v) || Number.isNaN(ms)) throw badRequest(`argument '${name}' must be an RFC 3339 date-time`);
  return ms;
}

const encodeCursor = (key: string) => Buffer.from(key, 'utf8').toString('base64url');
function decodeCursor(c: string): string {
  const key = Buffer.from(c, 'base64url').toString('utf8');
  if (!/^\d{15}\.\d{6}\.[0-9a-f]{6}$/.test(key)) throw badRequest("argument 'cursor' is not a cursor this server issued");
  return key;
}
