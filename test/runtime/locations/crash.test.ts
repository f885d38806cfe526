/**
 * Crashes of hostd in the middle of a locations change, against a real smbd:
 * killed while a create has mounted the share but not yet stored the
 * record, and while a delete has unmounted it but not yet removed the rest.
 * After the next start, records, mounts, smbnetfs helpers and stored
 * secrets agree: the create is undone, the delete finished. Each crash
 * stops at a test pause (HOSTD_TEST_PAUSE_AT=locations.<step>). smbd and
 * hostd run in a network namespace this test creates
 * (test/helpers/locations-smb.ts).
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { eventually, startDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { missingForLocations, stopAndRemoveDataDir, SmbLab } from '../../helpers/locations-smb.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';
import { isPauseLine } from '../../../daemon/lib/test-pause.js';
import { MOUNT_ROUTE, SMB_CLIENT } from '../../../daemon/locations/driver.js';
import { SmbDriver } from '../../../daemon/locations/smb/index.js';
import { findProcesses, mountAt } from '../../../daemon/locations/smb/mounts.js';

describe('locations: crash safety on a real smbd (runtime)', function () {
  this.timeout(180_000);
  let lab: SmbLab;
  let d: TestDaemon;
  let dataDir: string;
  let tok: string;
  let guestId: string;
  let privId: string;

  const start = async (env: Record<string, string> = {}) => {
    d = await startDaemon({ dataDir, wrap: lab.wrap, netns: lab.ns, env, configYaml: 'locations:\n  check_interval_seconds: 2\n' });
    tok = await d.token(`loc-${Date.now()}`, ['connections.read', 'connections.manage']);
  };
  const api = (method: string, p: string, body?: unknown) => d.request(method, `/api/v1${p}`, { token: tok, body });
  const mountDir = (id: string) => path.join(dataDir, 'locations', 'mnt', id);

  before(async function () {
    await requireRuntime(this, 'locations', new SmbDriver('auto'), { need: [MOUNT_ROUTE, SMB_CLIENT], also: missingForLocations });
    lab = new SmbLab();
    await lab.setup();
    await lab.start();
    dataDir = fs.mkdtempSync('/tmp/hostd-loc-');
    await start();
    const g = await api('POST', '/locations', { name: 'public', remote: '//127.0.0.1/guest' });
    expect(g.status, g.text).to.equal(201);
    guestId = g.body.location.location_id;
    const p = await api('POST', '/locations', { name: 'private', remote: '//127.0.0.1/private', username: 'smbtest', password: lab.password });
    expect(p.status, p.text).to.equal(201);
    privId = p.body.location.location_id;
  });

  after(async () => {
    await stopAndRemoveDataDir(d, dataDir);
    await lab?.cleanup();
  });

  it('after a crash in the middle of connecting or removing, records, mounts and secrets agree', async () => {
    await d.stop();
    await start({ HOSTD_TEST_PAUSE_AT: 'locations.create.mounted' });
    void api('POST', '/locations', { name: 'crashing', remote: '//127.0.0.1/private', username: 'smbtest', password: lab.password }).catch(() => undefined);
    await eventually(() => d.logs.some((l) => isPauseLine(l, 'locations.create.mounted')), 30_000, 'the create to pause');
    const mnt = fs.readdirSync(path.join(dataDir, 'locations', 'mnt')).filter((n) => n !== guestId && n !== privId);
    expect(mnt.length).to.equal(1);
    expect(await mountAt(mountDir(mnt[0]))).to.not.equal(null);
    expect(fs.readdirSync(path.join(dataDir, 'secrets', 'locations')).sort()).to.deep.equal([privId, mnt[0]].sort());
    await d.kill();
    await start();
    let r = await api('GET', '/locations');
    expect(r.body.locations.map((l: any) => l.name)).to.deep.equal(['private', 'public']);
    expect(fs.existsSync(mountDir(mnt[0]))).to.equal(false);
    expect(await findProcesses('smbnetfs', mountDir(mnt[0]))).to.deep.equal([]);
    expect(fs.readdirSync(path.join(dataDir, 'secrets', 'locations'))).to.deep.equal([privId]);

    await d.stop();
    await start({ HOSTD_TEST_PAUSE_AT: 'locations.delete.unmounted' });
    void api('DELETE', `/locations/${privId}`).catch(() => undefined);
    await eventually(() => d.logs.some((l) => isPauseLine(l, 'locations.delete.unmounted')), 30_000, 'the delete to pause');
    await d.kill();
    await start();
    r = await api('GET', `/locations/${privId}`);
    expect([r.status, r.body]).to.deep.equal([404, { error: `location '${privId}' not found` }]);
    expect(fs.existsSync(mountDir(privId))).to.equal(false);
    expect(fs.readdirSync(path.join(dataDir, 'secrets', 'locations'))).to.deep.equal([]);
    expect(await findProcesses('smbnetfs', mountDir(privId))).to.deep.equal([]);
  });
});
