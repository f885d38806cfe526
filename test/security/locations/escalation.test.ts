/**
 * The escalation suite, locations domain: one token per scope
 * (connections.read, connections.manage), each known escalation attempt
 * against a real smbd in a network namespace this test makes (as the
 * locations runtime tests do), with the exact status, and afterwards proof
 * that nothing outside was touched: sentinels outside every root and in the
 * pool's internal directories unchanged, kernel.core_pattern as it was, no
 * new host mount outside the locations' own mount directory, no process of an
 * attempt left running as host root, and the SMB password in no process
 * argument list, log line, activity row or response.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { eventually, startDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { HostGuard } from '../../helpers/host-guard.js';
import { findInFiles, missingForLocations, stopAndRemoveDataDir, SMB_USER, SmbLab } from '../../helpers/locations-smb.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';
import { MOUNT_ROUTE, SMB_CLIENT } from '../../../daemon/locations/driver.js';
import { SmbDriver } from '../../../daemon/locations/smb/index.js';
import { mountAt } from '../../../daemon/locations/smb/mounts.js';
import { Store } from '../../../daemon/store/store.js';

const exec = promisify(execFile);
/** The share, user and domain name rule as hostd states it (daemon/locations/smb/remote.ts). */
const nameRule = (max: number) =>
  `1-${max} characters without \\ / : * ? " < > | [ ] + ; = , % @ or control characters, not starting with '-' and without a space at either end`;

/**
 * Mount points other test runs on this shared machine make meanwhile (their
 * own temporary directories and network namespaces): every other new host
 * mount, anywhere else or under this suite's own directories, fails the check.
 */
function othersMounts(mine: string[]): string[] {
  const tmp = os.tmpdir();
  const dirs = fs
    .readdirSync(tmp)
    .map((n) => path.join(tmp, n))
    .filter((p) => !mine.some((m) => m === p || m.startsWith(`${p}/`) || p.startsWith(`${m}/`)));
  return [...dirs, '/run/netns'];
}

describe('escalation: locations (connections.read, connections.manage) on a real smbd', function () {
  this.timeout(300_000);
  const MARKER = `hostd-esc-${crypto.randomBytes(4).toString('hex')}`;
  let lab: SmbLab;
  let d: TestDaemon;
  let dataDir: string;
  let outside: string;
  let admin: string;
  let reader: string;
  let manager: string;
  let guard: HostGuard;
  let privId: string;

  const start = async () => {
    d = await startDaemon({ dataDir, wrap: lab.wrap, netns: lab.ns, configYaml: 'locations:\n  check_interval_seconds: 2\n' });
    // Tokens are stored: after a restart the same ones work.
    if (admin) return;
    admin = await d.token('esc-admin', ['connections.read', 'connections.manage', 'system.read']);
    reader = await d.token('esc-conn-read', ['connections.read']);
    manager = await d.token('esc-conn-manage', ['connections.manage']);
  };
  const call = (token: string, method: string, p: string, body?: unknown) => d.request(method, `/api/v1${p}`, { token, body });
  const mnt = () => path.join(dataDir, 'locations', 'mnt');

  before(async function () {
    await requireRuntime(this, 'locations', new SmbDriver('auto'), { need: [MOUNT_ROUTE, SMB_CLIENT], also: missingForLocations });
    lab = new SmbLab();
    await lab.setup();
    await lab.start();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-esc-loc-'));
    outside = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-esc-outside-'));
    await start();
    const pool = path.join(dataDir, 'pools', 'default');
    guard = new HostGuard();
    guard.plant(outside, path.join(pool, '.vms'), path.join(pool, '.hostd-apps', 'someapp'), path.join(pool, '.hostd-lxc'), path.join(dataDir, 'secrets'));
    guard.snapshot();
  });

  after(async () => {
    await stopAndRemoveDataDir(d, dataDir);
    guard?.remove();
    if (outside) fs.rmSync(outside, { recursive: true, force: true });
    await lab?.cleanup();
  });

  afterEach(function () {
    if (!guard) return;
    guard.assertIntact();
    // The locations' own mounts are hostd's to make; nothing anywhere else.
    guard.assertHostUnchanged([mnt(), ...othersMounts([dataDir, outside, lab.dir])]);
    guard.assertNoRootProcess(MARKER);
  });

  describe('connections.manage: share addresses and credentials that would become mount options', () => {
    const share = (why: string) => `argument 'remote' has an invalid share name (${why}; share names are ${nameRule(80)})`;
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['kernel mount options after a comma (the issue)', { remote: `//127.0.0.1/guest,uid=0,noperm,${MARKER}` }, share("it holds ','")],
      ['a second address and port', { remote: '//127.0.0.1/guest,ip=127.0.0.2,port=139' }, share("it holds ','")],
      ['an option-like share', { remote: `//127.0.0.1/guest=${MARKER}` }, share("it holds '='")],
      ['a %-escape that smbnetfs would decode', { remote: '//127.0.0.1/guest%2f..%2fprivate' }, share("it holds '%'")],
      ["smbnetfs's user:password@computer path form", { remote: '//127.0.0.1/root:x@private' }, share("it holds ':'")],
      ['a leading -', { remote: '//127.0.0.1/-o' }, share("it starts with '-'")],
      [
        'options in the host',
        { remote: '//127.0.0.1,port=139/guest' },
        "argument 'remote' has an invalid host name '127.0.0.1,port=139' (a DNS or NetBIOS name, or an IPv4 address)",
      ],
      [
        'options in the user name',
        { remote: '//127.0.0.1/private', username: `${SMB_USER},uid=0`, password: 'x' },
        `argument 'username' has an invalid user name (it holds ','; user names are ${nameRule(256)})`,
      ],
      [
        'a password smuggled in the user name',
        { remote: '//127.0.0.1/private', username: `${SMB_USER}%${MARKER}` },
        `argument 'username' has an invalid user name (it holds '%'; user names are ${nameRule(256)})`,
      ],
      [
        'options in the domain',
        { remote: '//127.0.0.1/private', username: `WG,sec=none\\${SMB_USER}`, password: 'x' },
        `argument 'username' has an invalid domain (it holds ','; domains are ${nameRule(256)})`,
      ],
      [
        "a line into smbnetfs's config through the user",
        { remote: '//127.0.0.1/private', username: 'x"\nauth "127.0.0.1/private" "root" "', password: 'x' },
        "argument 'username' must be at most 256 characters without control characters",
      ],
      [
        "a line into smbnetfs's config through the password",
        { remote: '//127.0.0.1/private', username: SMB_USER, password: `x"\nauth "127.0.0.1" "root" "${MARKER}` },
        "argument 'password' must be at most 1024 characters without control characters",
      ],
    ];
    for (const [what, body, error] of cases) {
      it(`refuses ${what} with 400, making nothing`, async () => {
        const r = await call(manager, 'POST', '/locations', { name: `atk-${crypto.randomBytes(3).toString('hex')}`, ...body });
        expect([r.status, r.body], r.text).to.deep.equal([400, { error }]);
        if (typeof body.password === 'string') expect(r.text).to.not.include(body.password);
        expect((await call(admin, 'GET', '/locations')).body.locations).to.deep.equal([]);
        expect(fs.readdirSync(mnt())).to.deep.equal([]);
        expect(fs.readdirSync(path.join(dataDir, 'locations', 'work'))).to.deep.equal([]);
      });
    }
  });

  describe('connections.manage: the password of a share it connects', () => {
    it('is in no response, process argument list, log line, activity row or file but the encrypted secret', async () => {
      const r = await call(manager, 'POST', '/locations', { name: 'private', remote: '//127.0.0.1/private', username: SMB_USER, password: lab.password });
      expect(r.status, r.text).to.equal(201);
      privId = r.body.location.location_id;
      expect(r.text).to.not.include(lab.password);
      // A wrong password is refused without being echoed.
      const wrong = `${MARKER}-wrong`;
      const w = await call(manager, 'POST', '/locations', { name: 'wrong', remote: '//127.0.0.1/private', username: SMB_USER, password: wrong });
      expect([w.status, w.body]).to.deep.equal([400, { error: "SMB host '127.0.0.1' rejected the 'username' and 'password' (NT_STATUS_LOGON_FAILURE)" }]);
      const ps = (await exec('ps', ['-eo', 'args'])).stdout;
      expect(ps).to.include(path.join(mnt(), privId));
      expect(ps).to.not.include(lab.password);
      expect(ps).to.not.include(wrong);
      expect(JSON.stringify(d.logs)).to.not.include(lab.password);
      expect(JSON.stringify(d.logs)).to.not.include(wrong);
      const act = await call(admin, 'GET', '/activity?limit=200');
      expect(act.status).to.equal(200);
      expect(act.text).to.not.include(lab.password);
      expect(act.text).to.not.include(wrong);
      expect(findInFiles(dataDir, lab.password, (p) => p.startsWith(mnt()))).to.deep.equal([]);
      const read = await call(reader, 'GET', '/locations');
      expect(read.status).to.equal(200);
      expect(read.text).to.not.include(lab.password);
      guard.assertNotLeaked(read.text);
    });
  });

  describe('connections.read: lists and probes, changes nothing', () => {
    it('every change is 403, and a probe with option-like input is 400', async () => {
      const tries: Array<[string, string, unknown]> = [
        ['POST', '/locations', { name: 'x', remote: '//127.0.0.1/guest' }],
        ['POST', `/locations/${privId}/disconnect`, undefined],
        ['POST', `/locations/${privId}/reconnect`, undefined],
        ['DELETE', `/locations/${privId}`, undefined],
      ];
      for (const [m, p, body] of tries) {
        const r = await call(reader, m, p, body);
        expect(r.status, `${m} ${p}`).to.equal(403);
        expect(r.body.error).to.match(/^token 'esc-conn-read' lacks scope 'connections\.manage' needed by locations_/);
      }
      const probe = await call(reader, 'POST', '/locations/discover', { host: '127.0.0.1,port=139' });
      expect([probe.status, probe.body]).to.deep.equal([400, { error: "argument 'host' must be a DNS or NetBIOS host name or an IPv4 address" }]);
      const probeUser = await call(reader, 'POST', '/locations/discover', { host: '127.0.0.1', username: `${SMB_USER},uid=0`, password: 'x' });
      expect([probeUser.status, probeUser.body]).to.deep.equal([
        400,
        { error: `argument 'username' has an invalid user name (it holds ','; user names are ${nameRule(256)})` },
      ]);
      expect((await call(admin, 'GET', `/locations/${privId}`)).body.location.status).to.equal('mounted');
    });

    it('connections.manage alone reads nothing', async () => {
      for (const [m, p] of [
        ['GET', '/locations'],
        ['GET', `/locations/${privId}`],
        ['POST', '/locations/discover'],
      ]) {
        const r = await call(manager, m, p, m === 'POST' ? { host: '127.0.0.1' } : undefined);
        expect(r.status, `${m} ${p}`).to.equal(403);
        expect(r.body.error).to.match(/^token 'esc-conn-manage' lacks scope 'connections\.read' needed by locations_/);
      }
    });
  });

  describe('a location stored before the rule (as an upgrade finds it)', () => {
    it('is kept and listed in the host status, never mounted again, and refused with 409 at reconnect', async () => {
      await d.stop();
      const id = 'l_legacy0001';
      const at = new Date().toISOString();
      const store = await Store.open(path.join(dataDir, 'db'));
      try {
        await store.sub<any>('locations').put(id, {
          location_id: id,
          name: 'legacy',
          type: 'smb',
          host: '127.0.0.1',
          share: `guest,uid=0,noperm,${MARKER}`,
          user: null,
          domain: null,
          wanted: true,
          mounted: false,
          mount_route: 'fuse',
          mount_dir: path.join(mnt(), id),
          work_dir: path.join(dataDir, 'locations', 'work', id),
          last_error: null,
          last_error_at: null,
          mounted_at: null,
          created_at: at,
        });
      } finally {
        await store.close();
      }
      await start();
      const reason = `location 'legacy' is refused: its stored address breaks a rule added since it was created (share name 'guest,uid=0,noperm,${MARKER}' is refused (it holds ','; share names are ${nameRule(80)})); it is not mounted again, and nothing was removed: delete it and add the share again`;
      const listed = await eventually(
        async () => {
          const r = await call(reader, 'GET', '/locations');
          const loc = r.body.locations.find((l: any) => l.location_id === id);
          return loc?.last_error === reason ? r.body : undefined;
        },
        60_000,
        'the restore pass to mark the legacy location',
      );
      expect(listed.host.refused).to.deep.equal([{ location_id: id, name: 'legacy', reason }]);
      expect(listed.locations.find((l: any) => l.location_id === id)).to.deep.include({ status: 'unavailable', mounted: false, mount_path: null });
      const r = await call(manager, 'POST', `/locations/${id}/reconnect`);
      expect([r.status, r.body]).to.deep.equal([409, { error: reason }]);
      expect(await mountAt(path.join(mnt(), id))).to.equal(null);
      // The location of before the restart is still mounted and working.
      expect((await call(reader, 'GET', `/locations/${privId}`)).body.location.status).to.equal('mounted');
      // Nothing is removed by hostd; the operator deletes it.
      const del = await call(manager, 'DELETE', `/locations/${id}`);
      expect(del.status, del.text).to.equal(200);
      expect((await call(reader, 'GET', '/locations')).body.host.refused).to.deep.equal([]);
    });
  });

  describe('cleanup', () => {
    it('removes the connected location with its mount and secret', async () => {
      const r = await call(manager, 'DELETE', `/locations/${privId}`);
      expect(r.status, r.text).to.equal(200);
      privId = '';
      expect(fs.readdirSync(mnt())).to.deep.equal([]);
    });
  });
});
