/**
 * `locations.state` events against a real smbd: each requested change once,
 * named by its caller; a share that goes away and comes back with nobody
 * asking (the mount monitor sees it); and at start, what changed while
 * hostd was down, reported once; and hostd killed (SIGKILL) right after a
 * change was stored: its event, named by the caller, is in the log already
 * (the record, its event and the mark of what was reported are one batch),
 * and the restart reports nothing more. Read through `events_list` from a cursor taken before each
 * action. Lab as in lifecycle.test.ts.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { eventually, startDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { isPauseLine } from '../../../daemon/lib/test-pause.js';
import { missingForLocations, stopAndRemoveDataDir, SmbLab } from '../../helpers/locations-smb.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';
import { headCursor, readerOf, stateEventsNow, stateEventsUntil, states, type StateEvent } from '../../helpers/state-events.js';
import { MOUNT_ROUTE, SMB_CLIENT } from '../../../daemon/locations/driver.js';
import { SmbDriver } from '../../../daemon/locations/smb/index.js';
import { findProcesses, mountAt } from '../../../daemon/locations/smb/mounts.js';

const exec = promisify(execFile);

describe('locations: state events on a real smbd (runtime)', function () {
  this.timeout(180_000);
  let lab: SmbLab;
  let d: TestDaemon | undefined;
  let dataDir: string;
  let tok: string;
  let tokName: string;
  let serial = 0;

  const start = async (env: Record<string, string> = {}) => {
    d = await startDaemon({ dataDir, wrap: lab.wrap, netns: lab.ns, env, configYaml: 'locations:\n  check_interval_seconds: 2\n' });
    tokName = `loc-ev-${++serial}`;
    tok = await d.token(tokName, ['connections.read', 'connections.manage']);
  };
  const api = (method: string, p: string, body?: unknown) => d!.request(method, `/api/v1${p}`, { token: tok, body });
  const mountDir = (id: string) => path.join(dataDir, 'locations', 'mnt', id);
  const until = (id: string, cursor: string, want: string[], what: string) =>
    stateEventsUntil(d!, tok, 'locations', `locations/${id}`, cursor, (e) => e.length >= want.length, what).then((r) => {
      expect(states(r.events), what).to.deep.equal(want);
      for (const e of r.events) expect(e.resource).to.equal(`locations/${id}`);
      return r;
    });
  const connect = async (name: string, share: 'guest' | 'private') => {
    const body =
      share === 'guest' ? { name, remote: '//127.0.0.1/guest' } : { name, remote: '//127.0.0.1/private', username: 'smbtest', password: lab.password };
    const r = await api('POST', '/locations', body);
    expect(r.status, r.text).to.equal(201);
    return r.body.location.location_id as string;
  };

  before(async function () {
    await requireRuntime(this, 'locations', new SmbDriver('auto'), { need: [MOUNT_ROUTE, SMB_CLIENT], also: missingForLocations });
    lab = new SmbLab();
    await lab.setup();
    await lab.start();
    dataDir = fs.mkdtempSync('/tmp/hostd-locev-');
    await start();
  });

  after(async () => {
    await stopAndRemoveDataDir(d, dataDir);
    await lab?.cleanup();
  });

  it('reports connect, disconnect, reconnect and delete once each, named by the caller; a repeated call reports nothing', async () => {
    const c0 = await headCursor(d!, tok);
    const id = await connect('evpriv', 'private');
    let r = await until(id, c0, ['mounted'], 'the mounted event');
    const mounted = r.events[0];
    expect(mounted.actor).to.equal(tokName);
    expect(mounted.data).to.deep.include({ state: 'mounted', name: 'evpriv' });
    expect(mounted.data.mount_route).to.be.oneOf(['fuse', 'cifs']);
    expect(JSON.stringify(mounted)).not.to.include(lab.password);

    // Twice each: the second call changes nothing and reports nothing.
    for (let i = 0; i < 2; i++) expect((await api('POST', `/locations/${id}/disconnect`)).status).to.equal(200);
    for (let i = 0; i < 2; i++) expect((await api('POST', `/locations/${id}/reconnect`)).status).to.equal(200);
    expect((await api('DELETE', `/locations/${id}`)).status).to.equal(200);
    r = await until(id, c0, ['mounted', 'disconnected', 'mounted', 'deleted'], 'the events of the calls');
    for (const e of r.events) expect(e.actor, JSON.stringify(e)).to.equal(tokName);
    expect(r.events[3].data).to.deep.equal({ state: 'deleted', name: 'evpriv' });
    // Nothing more after the delete (a long poll that ends empty).
    const more = await d!.request('GET', `/api/v1/events?types=locations.&resource=locations/${id}&cursor=${r.cursor}&timeout_seconds=2`, { token: tok });
    expect(more.body.events).to.deep.equal([]);
  });

  it('reports a share that went away by itself as unavailable with its error, and mounted when the monitor brings it back', async () => {
    const id = await connect('evguest', 'guest');
    const c0 = await headCursor(d!, tok);
    // Behind hostd's back, and no call to the location: only the monitor can see it.
    await lab.stop();
    try {
      const r = await until(id, c0, ['unavailable'], 'the stale mount reported');
      const e: StateEvent = r.events[0];
      expect(e.actor).to.equal('admin');
      expect(e.data.name).to.equal('evguest');
      expect(String(e.data.last_error)).to.match(/^cannot reach SMB host '127\.0\.0\.1'/);
    } finally {
      await lab.start();
    }
    await until(id, c0, ['unavailable', 'mounted'], 'the share mounted again by the monitor');
  });

  it('reports at start, once, a mount lost while hostd was down; a restart that changed nothing reports nothing', async () => {
    const id = [...(await api('GET', '/locations')).body.locations].find((l: any) => l.name === 'evguest').location_id as string;
    const c0 = await headCursor(d!, tok);
    await d!.stop();
    // The host lost the mount meanwhile (its helper killed, the mount gone).
    const helpers = await findProcesses('smbnetfs', mountDir(id));
    for (const pid of helpers) process.kill(pid, 'SIGKILL');
    await exec('umount', ['-l', mountDir(id)]).catch(() => undefined);
    expect(await mountAt(mountDir(id))).to.equal(null);
    await start();
    const r = await until(id, c0, ['unavailable', 'mounted'], 'the lost mount reported at start, then mounted again');
    expect(String(r.events[0].data.last_error)).to.match(/not mounted after a restart/);

    // A restart with the mount in place: the next event is the one a call makes.
    const c1 = r.cursor;
    await d!.stop();
    await start();
    expect((await api('POST', `/locations/${id}/disconnect`)).status).to.equal(200);
    await until(id, c1, ['disconnected'], 'only the disconnect after a quiet restart');
  });

  it('killed right after a disconnect was stored: its event, by the caller, was stored with it; the restart reports nothing more', async () => {
    const id = await connect('evcrash', 'guest');
    const c0 = await headCursor(d!, tok);
    await d!.stop();
    await start({ HOSTD_TEST_PAUSE_AT: 'locations.disconnect.committed' });
    const caller = tokName;
    void api('POST', `/locations/${id}/disconnect`).catch(() => undefined);
    await eventually(() => d!.logs.find((l) => isPauseLine(l, 'locations.disconnect.committed')), 60_000, 'the pause after the disconnect was stored');
    // Stopped right after the record's batch: the event is in it (a record stored first would have none yet).
    const paused = await stateEventsNow(readerOf(d!, tok), 'locations', `locations/${id}`, c0);
    expect(paused.map((e) => [e.data.state, e.actor])).to.deep.equal([['disconnected', caller]]);
    await d!.kill();
    await start();
    const r = await until(id, c0, ['disconnected'], 'the disconnect, once');
    expect(r.events[0].actor).to.equal(caller);
    expect(r.events[0].data).to.deep.equal({ state: 'disconnected', name: 'evcrash' });
    const more = await d!.request('GET', `/api/v1/events?types=locations.&resource=locations/${id}&cursor=${r.cursor}&timeout_seconds=2`, { token: tok });
    expect(more.body.events).to.deep.equal([]);
    expect((await api('DELETE', `/locations/${id}`)).status).to.equal(200);
  });
});
