/**
 * The locations sublevels: one record per location, and the intent journal
 * of changes that touch mounts, the secret store and the records together.
 * The password is never here: it lives in the secret store under
 * `locations/<location_id>`.
 */
import type { Store, Sub } from '../store/store.js';
import { IntentJournal, type JournalDb } from '../lib/journal.js';
import type { MountRoute } from './driver.js';

export interface LocationRecord {
  location_id: string;
  name: string;
  type: 'smb';
  host: string;
  share: string;
  /** User name without domain; null for guest access. */
  user: string | null;
  domain: string | null;
  /** Whether the user wants it connected (false after disconnect). */
  wanted: boolean;
  /** Whether it is mounted now, as hostd last saw it. */
  mounted: boolean;
  /** The route of the current (or last) mount. */
  mount_route: MountRoute | null;
  /** Where it is mounted (the FUSE tree's root, or the share itself for cifs). */
  mount_dir: string;
  /** The helper's private directory (smbnetfs's $HOME, transient credential files). */
  work_dir: string;
  last_error: string | null;
  last_error_at: string | null;
  mounted_at: string | null;
  created_at: string;
}

/**
 * - create: the secret, directories and mount are being made; recovery undoes
 *   them (the caller never got an answer, so no location exists).
 * - delete: recovery finishes it (unmount, secret, directories, record).
 * - sync: a mount or unmount of an existing location (disconnect, reconnect,
 *   a lost share, a remount); recovery sets the record to what the mount
 *   table shows, with `wanted` as the intent says.
 */
export type Intent = { op: 'create'; rec: LocationRecord } | { op: 'delete'; rec: LocationRecord } | { op: 'sync'; id: string; wanted: boolean };

/** The state last reported per location, written in its event's batch (state-events.ts). */
export interface ReportedMark {
  state: string;
  name: string;
}

export class LocationRecords {
  readonly records: Sub<LocationRecord>;
  readonly intents: Sub<Intent>;
  readonly journal: IntentJournal<Intent>;
  /** Keyed by location id, plus `MARKS_SINCE` once the marks were first taken. */
  readonly reported: Sub<ReportedMark | true>;

  constructor(readonly store: Store) {
    this.records = store.sub<LocationRecord>('locations');
    this.intents = store.sub<Intent>('location_intents');
    this.reported = store.sub<ReportedMark | true>('locations_state_events');
    this.journal = new IntentJournal<Intent>(store, this.intents);
  }

  /** The same journal, its commits written by `db` (each with its state event: state-events.ts `committing`). */
  journalVia(db: JournalDb): IntentJournal<Intent> {
    return new IntentJournal<Intent>(db, this.intents);
  }

  all(): Promise<LocationRecord[]> {
    return this.records.values().all();
  }

  markOp(id: string, mark: ReportedMark | null) {
    return mark ? { type: 'put' as const, sub: this.reported, key: id, value: mark } : { type: 'del' as const, sub: this.reported, key: id };
  }

  put(rec: LocationRecord) {
    return { type: 'put' as const, sub: this.records, key: rec.location_id, value: rec };
  }

  del(id: string) {
    return { type: 'del' as const, sub: this.records, key: id };
  }
}
