/**
 * What the event unit tests share: one member's event log and service on a
 * store in a temporary directory, and a reader's connection that records
 * what it was sent and can report a full buffer.
 */
import fs from 'node:fs';
import path from 'node:path';
import { EventLog } from '../../../daemon/events/log.js';
import { EventService } from '../../../daemon/events/service.js';
import { DEFAULT_EVENT_SETTINGS, type EventSettings } from '../../../daemon/events/settings.js';
import type { Sink } from '../../../daemon/events/subscription.js';
import type { PublicEvent } from '../../../daemon/events/types.js';
import { Store } from '../../../daemon/store/store.js';
import { tempDir } from '../../helpers/daemon.js';

export interface EventsFixture {
  store: Store;
  log: EventLog;
  svc: EventService;
  /** Closes the service and the store and removes the directory. */
  close(): Promise<void>;
}

/** Member `n1`'s event log and service with `settings` over the defaults. */
export async function eventsFixture(settings: Partial<EventSettings> = {}): Promise<EventsFixture> {
  const dir = tempDir('hostd-events-');
  const store = await Store.open(path.join(dir, 'db'));
  const s = { ...DEFAULT_EVENT_SETTINGS, ...settings };
  const log = new EventLog(store, 'n1', s);
  await log.init();
  const svc = new EventService(log, s);
  return {
    store,
    log,
    svc,
    close: async () => {
      svc.close();
      await store.close().catch(() => undefined);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A reader's connection that records what it got; `blocked` makes it report a full buffer until `release()`. */
export class RecordingSink implements Sink {
  readonly got: PublicEvent[] = [];
  ended = false;
  blocked = false;
  private waiters: Array<() => void> = [];
  send(text: string): boolean {
    this.got.push(JSON.parse(text));
    return !this.blocked;
  }
  drained(): Promise<void> {
    return this.blocked ? new Promise((r) => this.waiters.push(r)) : Promise.resolve();
  }
  release(): void {
    this.blocked = false;
    for (const w of this.waiters.splice(0)) w();
  }
  end(): void {
    this.ended = true;
  }
}
