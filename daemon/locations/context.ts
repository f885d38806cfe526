/**
 * What the locations' files share: the records (in the store, and in memory
 * for every call), one lock key per location, the driver, the settings and
 * the domain's hooks. index.ts builds it once; each operation's file takes
 * it as its first argument.
 */
import path from 'node:path';
import type { Logger } from 'pino';
import { notFound } from '../lib/errors.js';
import { KeyedLock, lockLabels } from '../lib/lock.js';
import type { EventsPort } from '../domain.js';
import type { IntentRecovery } from '../lib/recovery.js';
import type { SecretStore } from '../lib/secrets.js';
import type { PauseHook } from '../lib/test-pause.js';
import type { LocationsDriver } from './driver.js';
import type { Intent, LocationRecord, LocationRecords } from './records.js';
import type { LocationsSettings } from './settings.js';

/** The secret store's namespace of the passwords (`locations/<location_id>`). */
export const SECRET_NS = 'locations';

/**
 * What holds a location's key while its mount is checked (the monitor, a
 * GET): a user's call waits for it rather than getting a 409.
 */
export const HEALTH = 'health check';

export const now = (): string => new Date().toISOString();

export interface ContextDeps {
  records: LocationRecords;
  driver: LocationsDriver;
  secrets: SecretStore;
  log: Logger;
  settings: LocationsSettings;
  /** `<data dir>/locations`. */
  root: string;
  pause: PauseHook;
  recovery: Pick<IntentRecovery<Intent>, 'requireSettled' | 'retry'>;
  /** Where `locations.state` events go (state-events.ts). */
  events: EventsPort;
}

export class LocationsContext {
  readonly records: LocationRecords;
  readonly driver: LocationsDriver;
  readonly secrets: SecretStore;
  readonly log: Logger;
  readonly settings: LocationsSettings;
  /** Mount points are `mnt/<id>`, the helpers' private directories `work/<id>`. */
  readonly root: string;
  /** Awaited at each step a crash test stops at (`HOSTD_TEST_PAUSE_AT=locations.<step>`). */
  readonly pause: PauseHook;
  readonly recovery: ContextDeps['recovery'];
  readonly events: EventsPort;
  /** The state last reported per location (state-events.ts). */
  readonly published = new Map<string, string>();
  /** Names of the reported locations, for the `deleted` event of one whose record is gone. */
  readonly names = new Map<string, string>();
  /** Every location's record as stored (the store is written first: state-events.ts `storeChange`). */
  readonly cache = new Map<string, LocationRecord>();
  /** When each location's mount was last checked (ms since the epoch). */
  readonly lastCheck = new Map<string, number>();
  /** Names being created: unique before their record exists. */
  readonly creating = new Set<string>();
  /** Keys `loc:<location_id>`, and `names` while a create checks its name. */
  readonly lock = new KeyedLock(lockLabels({ loc: (id) => `location '${this.cache.get(id)?.name ?? id}'` }));
  /** Set at close: background passes stop. */
  closed = false;

  constructor(d: ContextDeps) {
    this.records = d.records;
    this.driver = d.driver;
    this.secrets = d.secrets;
    this.log = d.log;
    this.settings = d.settings;
    this.root = d.root;
    this.pause = d.pause;
    this.recovery = d.recovery;
    this.events = d.events;
  }

  /** The record, or 404. */
  find(id: string): LocationRecord {
    const r = typeof id === 'string' ? this.cache.get(id) : undefined;
    if (!r) throw notFound(`location '${id}' not found`);
    return r;
  }

  key(id: string): string {
    return `loc:${id}`;
  }

  /** A new location's directories. */
  dirsOf(id: string): { mount_dir: string; work_dir: string } {
    return { mount_dir: path.join(this.root, 'mnt', id), work_dir: path.join(this.root, 'work', id) };
  }

  /** The share's directory inside the location's mount (the mount itself for cifs). */
  shareRoot(rec: LocationRecord): string {
    return rec.mount_route ? this.driver.shareRoot(rec.mount_route, rec.mount_dir, { host: rec.host, share: rec.share }) : rec.mount_dir;
  }

  /** Resolves unless a change of this location that a restart interrupted is still open (503 naming it). */
  settled(id: string): Promise<void> {
    return this.recovery.requireSettled(id, `location '${this.cache.get(id)?.name ?? id}'`);
  }

  /**
   * A user's change of one location: 404 when unknown, 503 while a change a
   * restart interrupted is still open, 409 when another call changes it; a
   * health check in progress is waited for. `fn` gets the record as it is
   * under the lock.
   */
  async change<T>(id: string, what: string, fn: (rec: LocationRecord) => Promise<T>): Promise<T> {
    this.find(id);
    await this.settled(id);
    const key = this.key(id);
    if (this.lock.busy(key) === HEALTH) return this.lock.run([key], () => fn(this.find(id)), what);
    return this.lock.exclusiveOn(() => this.find(id), [key], what, fn);
  }
}
