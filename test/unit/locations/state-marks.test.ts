/**
 * The locations' marks of the state last reported (state-events.ts): stored
 * with each event, they are what a start compares the records with. A
 * record changed without its event (the daemon died in between) is reported
 * once at the next start; a store from before the marks were kept reports
 * nothing for what its records say. On a fake driver (no root, no smbd).
 */
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import type { EventsPort } from '../../../daemon/domain.js';
import { FileSecretStore } from '../../../daemon/lib/secrets.js';
import { startLocations } from '../../../daemon/locations/index.js';
import { LocationRecords, type LocationRecord } from '../../../daemon/locations/records.js';
import { parseSettings } from '../../../daemon/locations/settings.js';
import { Store } from '../../../daemon/store/store.js';
import { FakeLocationsDriver } from '../../helpers/locations-fake-driver.js';

describe('locations: the marks of what was reported', () => {
  let dir: string;
  let store: Store;
  let driver: FakeLocationsDriver;
  let reported: Array<{ resource: string; state: string; actor?: string }>;

  const events: EventsPort = {
    publishState: async (_domain, resource, state, _data, opts = {}) => void reported.push({ resource, state, actor: opts.actor }),
  };
  const open = () =>
    startLocations({
      store,
      driver,
      secrets: new FileSecretStore(dir),
      log: pino({ level: 'silent' }),
      settings: parseSettings(undefined),
      dataDir: dir,
      env: {},
      events,
    });

  const record = (id: string, over: Partial<LocationRecord>): LocationRecord => ({
    location_id: id,
    name: 'media',
    type: 'smb',
    host: 'nas',
    share: 'media',
    user: null,
    domain: null,
    wanted: true,
    mounted: true,
    mount_route: 'fuse',
    mount_dir: path.join(dir, 'locations', 'mnt', id),
    work_dir: path.join(dir, 'locations', 'work', id),
    last_error: null,
    last_error_at: null,
    mounted_at: '2026-01-01T00:00:00.000Z',
    created_at: '2026-01-01T00:00:00.000Z',
    ...over,
  });

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-loc-marks-'));
    store = await Store.open(path.join(dir, 'db'));
    driver = new FakeLocationsDriver();
    reported = [];
  });
  afterEach(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a store from before the marks: its records are taken as reported, nothing is reported, and the marks are kept from then on', async () => {
    const rec = record('l_aaaaaaaaaa', {});
    await new LocationRecords(store).records.put(rec.location_id, rec);
    driver.mounts.add(rec.mount_dir);
    await open();
    expect(reported).to.deep.equal([]);
    expect(await new LocationRecords(store).reported.get(rec.location_id)).to.deep.equal({ state: 'mounted', name: 'media' });
  });

  it('a record changed without its event (a crash in between) is reported once at the next start, and not at the one after', async () => {
    await open(); // a start that keeps the marks (an empty store)
    const records = new LocationRecords(store);
    const rec = record('l_bbbbbbbbbb', { wanted: false, mounted: false, mounted_at: null });
    // What a disconnect leaves when the daemon dies after storing it: the record says disconnected, the mark mounted.
    await records.records.put(rec.location_id, rec);
    await records.reported.put(rec.location_id, { state: 'mounted', name: 'media' });
    await open();
    expect(reported).to.deep.equal([{ resource: 'locations/l_bbbbbbbbbb', state: 'disconnected', actor: 'admin' }]);
    expect(await records.reported.get(rec.location_id)).to.deep.equal({ state: 'disconnected', name: 'media' });
    await open();
    expect(reported).to.have.length(1);
  });
});
