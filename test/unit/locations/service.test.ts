/**
 * The locations service's rules on a fake driver (no root, no smbd): a
 * change a restart interrupted is settled before any call is served, or,
 * when it cannot be yet, leaves that location answering 503 until the
 * monitor settles it; a host without a mount route is a 503 from the
 * driver's availability that makes nothing; calls on one location are
 * 404 before 409.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { FileSecretStore } from '../../../daemon/lib/secrets.js';
import { disconnect, reconnect } from '../../../daemon/locations/connection.js';
import { SECRET_NS, type LocationsContext } from '../../../daemon/locations/context.js';
import { startLocations } from '../../../daemon/locations/index.js';
import { monitorPass } from '../../../daemon/locations/monitor.js';
import { LocationRecords, type LocationRecord } from '../../../daemon/locations/records.js';
import { create, get, list, remove } from '../../../daemon/locations/service.js';
import { parseSettings } from '../../../daemon/locations/settings.js';
import { Store } from '../../../daemon/store/store.js';
import { FakeLocationsDriver } from '../../helpers/locations-fake-driver.js';
import { rejectsApi } from '../../helpers/expect.js';

describe('locations service rules (fake driver)', () => {
  let dir: string;
  let store: Store;
  let secrets: FileSecretStore;
  let driver: FakeLocationsDriver;

  const open = (): Promise<LocationsContext> =>
    startLocations({ store, driver, secrets, log: pino({ level: 'silent' }), settings: parseSettings(undefined), dataDir: dir, env: {} });

  const record = (id: string, name: string): LocationRecord => ({
    location_id: id,
    name,
    type: 'smb',
    host: 'nas',
    share: 'media',
    user: 'bob',
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
  });

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-loc-svc-'));
    store = await Store.open(path.join(dir, 'db'));
    secrets = new FileSecretStore(dir);
    driver = new FakeLocationsDriver();
  });
  afterEach(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a delete a crash interrupted is finished before any call is served', async () => {
    const rec = record('l_aaaaaaaaaa', 'media');
    const records = new LocationRecords(store);
    await records.records.put(rec.location_id, rec);
    await secrets.put(SECRET_NS, rec.location_id, 'pw');
    driver.mounts.add(rec.mount_dir);
    await records.journal.begin(rec.location_id, { op: 'delete', rec });

    const c = await open();
    await rejectsApi(get(c, rec.location_id), 404, `location '${rec.location_id}' not found`);
    expect(driver.mounts.has(rec.mount_dir)).to.equal(false);
    expect(await secrets.has(SECRET_NS, rec.location_id)).to.equal(false);
    expect(await records.journal.open()).to.deep.equal([]);
  });

  it('one that cannot be settled yet leaves the domain open, that location answering 503, until the monitor settles it', async () => {
    const rec = record('l_bbbbbbbbbb', 'media');
    const other = record('l_cccccccccc', 'other');
    const records = new LocationRecords(store);
    await records.records.put(rec.location_id, rec);
    await records.records.put(other.location_id, other);
    await secrets.put(SECRET_NS, rec.location_id, 'pw');
    driver.mounts.add(rec.mount_dir).add(other.mount_dir);
    await records.journal.begin(rec.location_id, { op: 'delete', rec });
    driver.releaseFails.set(rec.mount_dir, 'target is busy');

    const c = await open();
    const pending = `location 'media' has a change interrupted by a restart that cannot be settled yet: target is busy`;
    await rejectsApi(disconnect(c, rec.location_id), 503, pending);
    await rejectsApi(reconnect(c, rec.location_id), 503, pending);
    await rejectsApi(remove(c, rec.location_id), 503, pending);
    // The other location is served as usual.
    expect((await disconnect(c, other.location_id)).location).to.include({ status: 'disconnected', mounted: false });
    expect(await records.journal.open()).to.have.length(1);

    driver.releaseFails.clear();
    await monitorPass(c);
    await rejectsApi(get(c, rec.location_id), 404, `location '${rec.location_id}' not found`);
    expect(await secrets.has(SECRET_NS, rec.location_id)).to.equal(false);
    expect(await records.journal.open()).to.deep.equal([]);
    expect((await list(c)).locations.map((l) => l.name)).to.deep.equal(['other']);
  });

  it("without a mount route, create answers 503 from the driver's availability and makes nothing", async () => {
    driver.route = null;
    const c = await open();
    await rejectsApi(create(c, { name: 'media', remote: '//nas/media' }), 503, 'mount route is not available: neither route works (fake)');
    expect(driver.calls).to.deep.equal([]);
    expect((await list(c)).locations).to.deep.equal([]);
    expect((await list(c)).host.runtimes).to.deep.include({ name: 'mount route', version: null, available: false, reason: 'neither route works (fake)' });
  });

  it('an unknown location is 404 before it could be 409', async () => {
    const c = await open();
    const made = await create(c, { name: 'media', remote: '//nas/media', username: 'bob', password: 'pw' });
    const id = made.location.location_id;
    expect(made.location).to.include({ status: 'mounted', mount_route: 'fuse', username: 'bob' });
    // A change holds the location's key: a second one is 409, an unknown id 404.
    const held = c.lock.hold([c.key(id)], 'reconnect');
    try {
      await rejectsApi(disconnect(c, id), 409, `location 'media' is busy: reconnect in progress`);
      await rejectsApi(disconnect(c, 'l_nosuchone0'), 404, `location 'l_nosuchone0' not found`);
    } finally {
      held();
    }
    expect((await remove(c, id)).deleted).to.equal(true);
    expect(driver.mounts.size).to.equal(0);
  });
});
