/**
 * A location's life against a real smbd, through the real daemon API:
 * connect, use through the folder operations, disconnect and reconnect, a
 * lost share, restarts of hostd and of the host, delete; the password stays
 * out of everything but the secret store. smbd and hostd
 * run in a network namespace this test creates (smbnetfs needs port 445; see
 * test/helpers/locations-smb.ts); hostd's mounts are in the host's mount
 * namespace, where the test looks at them.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { eventually, hostctl, startDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { findInFiles, missingForLocations, stopAndRemoveDataDir, SmbLab } from '../../helpers/locations-smb.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';
import { MOUNT_ROUTE, SMB_CLIENT } from '../../../daemon/locations/driver.js';
import { SmbDriver } from '../../../daemon/locations/smb/index.js';
import { kernelHasCifs } from '../../../daemon/locations/smb/cifs.js';
import { findProcesses, mountAt } from '../../../daemon/locations/smb/mounts.js';

const exec = promisify(execFile);
const SCOPES = ['connections.read', 'connections.manage', 'files.read', 'files.manage', 'system.read'];
const conn = (id: string, p?: string) => (p === undefined ? { kind: 'connection', id } : { kind: 'connection', id, path: p });
const q = (o: unknown) => encodeURIComponent(JSON.stringify(o));

describe('locations: SMB shares on a real smbd (runtime)', function () {
  this.timeout(120_000);
  let lab: SmbLab;
  let d: TestDaemon;
  let dataDir: string;
  let tok: string;
  let guestId: string;
  let privId: string;
  let folderId: string;
  let folderDir: string;

  const start = async (env: Record<string, string> = {}) => {
    d = await startDaemon({ dataDir, wrap: lab.wrap, netns: lab.ns, env, configYaml: 'locations:\n  check_interval_seconds: 2\n' });
    tok = await d.token(`loc-${Date.now()}`, SCOPES);
  };
  const api = (method: string, p: string, body?: unknown) => d.request(method, `/api/v1${p}`, { token: tok, body });
  const mountDir = (id: string) => path.join(dataDir, 'locations', 'mnt', id);
  const expectedRoute = async () => ((await kernelHasCifs()).ok ? 'cifs' : 'fuse');

  before(async function () {
    await requireRuntime(this, 'locations', new SmbDriver('auto'), { need: [MOUNT_ROUTE, SMB_CLIENT], also: missingForLocations });
    lab = new SmbLab();
    await lab.setup();
    await lab.start();
    dataDir = fs.mkdtempSync('/tmp/hostd-loc-');
    await start();
  });

  after(async () => {
    await stopAndRemoveDataDir(d, dataDir);
    await lab?.cleanup();
  });

  it('names the mount route it chose in the host status', async () => {
    const r = await api('GET', '/locations');
    expect(r.status).to.equal(200);
    expect(r.body.locations).to.deep.equal([]);
    expect(r.body.host.mount_route).to.equal(await expectedRoute());
    const names = r.body.host.runtimes.map((x: any) => x.name);
    expect(names).to.include.members(['kernel cifs', 'mount.cifs', 'smbnetfs', '/dev/fuse', 'smbclient']);
    const smbnetfs = r.body.host.runtimes.find((x: any) => x.name === 'smbnetfs');
    expect(smbnetfs.available).to.equal(true);
    expect(smbnetfs.version).to.match(/^\d+\.\d+/);
    const cli = await hostctl(dataDir, ['locations', 'host-status']);
    expect(cli.code, cli.stderr).to.equal(0);
    expect(cli.stdout.split('\n')[0]).to.equal(`mount route: ${r.body.host.mount_route} (${r.body.host.route_reason})`);
  });

  it('connects a guest share and a password share', async () => {
    const g = await api('POST', '/locations', { name: 'public', remote: '//127.0.0.1/guest' });
    expect(g.status, g.text).to.equal(201);
    const route = await expectedRoute();
    expect(g.body.location).to.include({
      name: 'public',
      type: 'smb',
      remote: '//127.0.0.1/guest',
      host: '127.0.0.1',
      share: 'guest',
      username: null,
      guest: true,
      status: 'mounted',
      mounted: true,
      mount_route: route,
      last_error: null,
    });
    guestId = g.body.location.location_id;
    expect(guestId).to.match(/^l_[A-Za-z0-9]{10}$/);

    const p = await api('POST', '/locations', { name: 'private', remote: '127.0.0.1/private', username: 'smbtest', password: lab.password });
    expect(p.status, p.text).to.equal(201);
    expect(p.body.location).to.include({ remote: '//127.0.0.1/private', username: 'smbtest', guest: false, status: 'mounted', mounted: true });
    expect(p.text).not.to.include(lab.password);
    expect(p.text).not.to.include('password');
    privId = p.body.location.location_id;
    expect(await mountAt(mountDir(privId))).to.not.equal(null);

    // A file the server has is seen through the mount, and one written through the API reaches the server.
    fs.writeFileSync(path.join(lab.privateDir, 'hello.txt'), 'hi');
    const list = await api('GET', `/folders/_/contents?target=${q(conn(privId))}`);
    expect(list.status, list.text).to.equal(200);
    expect(list.body.entries.map((e: any) => [e.name, e.type, e.size])).to.deep.equal([['hello.txt', 'file', 2]]);
    const got = await api('GET', `/locations/${privId}`);
    expect(got.status).to.equal(200);
    expect(got.body.location.mount_path).to.equal(p.body.location.mount_path);
  });

  it('refuses what cannot be mounted with the reason, leaving no record, mount point or secret', async () => {
    const cases: Array<[Record<string, unknown>, number, string]> = [
      [
        { name: 'x', remote: '//127.0.0.1/private', username: 'smbtest', password: 'wrong-password' },
        400,
        "SMB host '127.0.0.1' rejected the 'username' and 'password' (NT_STATUS_LOGON_FAILURE)",
      ],
      [{ name: 'x', remote: '//127.0.0.1/nosuch' }, 404, "share 'nosuch' does not exist on SMB host '127.0.0.1' (NT_STATUS_BAD_NETWORK_NAME)"],
      [{ name: 'x', remote: '//127.0.0.2/guest' }, 502, "cannot reach SMB host '127.0.0.2' (NT_STATUS_CONNECTION_REFUSED)"],
      [
        { name: 'x', remote: '//127.0.0.1/private' },
        400,
        "SMB host '127.0.0.1' refused guest access to //127.0.0.1/private (NT_STATUS_ACCESS_DENIED); give 'username' and 'password'",
      ],
      [{ name: 'x', remote: '/srv/share' }, 400, "argument 'remote' must be //<host>/<share> or <host>/<share>, not a local path"],
      [{ name: 'x', remote: '//127.0.0.1/a/b' }, 400, "argument 'remote' must be //<host>/<share> or <host>/<share> (exactly one host and one share name)"],
      [{ name: 'x', remote: '//127.0.0.1/guest', type: 'nfs' }, 400, "argument 'type' must be 'smb' (the only type mounted), not 'nfs'"],
      [{ name: 'x', remote: '//127.0.0.1/guest', password: 'p' }, 400, "argument 'password' needs 'username' (omit both for guest access)"],
      [{ name: 'public', remote: '//127.0.0.1/guest' }, 409, "a location named 'public' already exists"],
    ];
    for (const [body, status, error] of cases) {
      const r = await api('POST', '/locations', body);
      expect([r.status, r.body], JSON.stringify(body)).to.deep.equal([status, { error }]);
    }
    const all = await api('GET', '/locations');
    expect(all.body.locations.map((l: any) => l.name)).to.deep.equal(['private', 'public']);
    expect(fs.readdirSync(path.join(dataDir, 'locations', 'mnt')).sort()).to.deep.equal([guestId, privId].sort());
    expect(fs.readdirSync(path.join(dataDir, 'locations', 'work')).sort()).to.deep.equal([guestId, privId].sort());
    expect(fs.readdirSync(path.join(dataDir, 'secrets', 'locations'))).to.deep.equal([privId]);
  });

  it('serves every folder operation on a mounted location, confined to the share', async () => {
    const f = await api('POST', '/folders', { storage_id: 'default', name: 'local' });
    expect(f.status, f.text).to.equal(201);
    folderId = f.body.folder.folder_id;
    folderDir = f.body.folder.path;
    const share = lab.privateDir;

    let r = await api('POST', '/folders/_/subfolders', { name: 'docs', target: conn(privId) });
    expect(r.status, r.text).to.equal(201);
    r = await api('POST', '/folders/_/subfolders/batch', { names: ['a', 'b'], target: conn(privId, 'docs') });
    expect(r.status, r.text).to.equal(201);
    expect(fs.readdirSync(path.join(share, 'docs')).sort()).to.deep.equal(['a', 'b']);
    fs.writeFileSync(path.join(share, 'docs', 'a', 'report.txt'), 'quarterly');

    r = await api('GET', `/folders/_/contents?target=${q(conn(privId, 'docs/a'))}`);
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.deep.include({ at: { kind: 'connection', id: privId, path: 'docs/a' } });
    expect(r.body.entries.map((e: any) => e.path)).to.deep.equal(['docs/a/report.txt']);

    // Move inside the share.
    r = await api('PATCH', `/folders/_/entries/x`, { src_target: conn(privId, 'docs/a/report.txt'), dst_target: conn(privId, 'docs/b/report.txt') });
    expect(r.status, r.text).to.equal(200);
    expect(fs.readFileSync(path.join(share, 'docs', 'b', 'report.txt'), 'utf8')).to.equal('quarterly');
    expect(fs.existsSync(path.join(share, 'docs', 'a', 'report.txt'))).to.equal(false);

    // Copy from the share to a managed folder.
    r = await api('POST', `/folders/_/entries/docs/copy`, {
      src_target: conn(privId, 'docs'),
      dst_target: { kind: 'folder', id: folderId, path: 'docs-copy' },
    });
    expect(r.status, r.text).to.equal(200);
    expect(fs.readFileSync(path.join(folderDir, 'docs-copy', 'b', 'report.txt'), 'utf8')).to.equal('quarterly');
    // (Copying onto the share has its own test below.)
    fs.writeFileSync(path.join(share, 'docs', 'up.txt'), 'uploaded');

    // Search.
    r = await api('GET', `/folders/_/search?pattern=REPORT&target=${q(conn(privId))}`);
    expect(r.status, r.text).to.equal(200);
    expect(r.body.matches.map((m: any) => m.path)).to.deep.equal(['docs/b/report.txt']);

    // Batch move.
    r = await api('POST', '/folders/_/entries/batch', {
      moves: [
        { src_sub_path: 'docs/b/report.txt', dst_sub_path: 'docs/a/r2.txt' },
        { src_sub_path: 'docs/up.txt', dst_sub_path: 'docs/b/up2.txt' },
      ],
      target: conn(privId),
    });
    expect(r.status, r.text).to.equal(200);
    expect(fs.readdirSync(path.join(share, 'docs', 'a'))).to.deep.equal(['r2.txt']);
    expect(fs.readdirSync(path.join(share, 'docs', 'b'))).to.deep.equal(['up2.txt']);

    // Delete a folder with its contents.
    r = await api('DELETE', `/folders/_/entries/x?target=${q(conn(privId, 'docs/b'))}`);
    expect(r.status, r.text).to.equal(200);
    expect(fs.existsSync(path.join(share, 'docs', 'b'))).to.equal(false);

    // No path leaves the share.
    r = await api('GET', `/folders/_/contents?target=${q(conn(privId, '../..'))}`);
    expect([r.status, r.body]).to.deep.equal([400, { error: "argument 'target.path' must stay inside the location" }]);
    r = await api('POST', '/folders/_/entries/batch', { moves: [{ src_sub_path: 'docs/a/r2.txt', dst_sub_path: '../r2.txt' }], target: conn(privId) });
    expect([r.status, r.body]).to.deep.equal([400, { error: "argument 'moves[0].dst_sub_path' must stay inside the location" }]);

    // A symlink on the server that points out of the share is not followed.
    const outside = path.join(lab.dir, 'outside');
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, 'secret.txt'), 'top secret');
    fs.symlinkSync(outside, path.join(share, 'out'));
    r = await api('POST', `/folders/_/entries/x/copy`, {
      src_target: conn(privId, 'out/secret.txt'),
      dst_target: { kind: 'folder', id: folderId, path: 'stolen.txt' },
    });
    expect([r.status, r.body]).to.deep.equal([404, { error: "no such file or folder 'out/secret.txt'" }]);
    expect(fs.existsSync(path.join(folderDir, 'stolen.txt'))).to.equal(false);

    // A symlink copied from a managed folder onto the share: the share cannot hold it and nothing is left behind.
    fs.mkdirSync(path.join(folderDir, 'linked'));
    fs.writeFileSync(path.join(folderDir, 'linked', 'x.txt'), 'x');
    fs.symlinkSync('x.txt', path.join(folderDir, 'linked', 'y'));
    r = await api('POST', `/folders/${folderId}/entries/linked/copy`, { dst_target: conn(privId, 'linked') });
    expect(r.status, r.text).to.be.at.least(400);
    expect(fs.existsSync(path.join(share, 'linked'))).to.equal(false);

    // Unknown location.
    r = await api('GET', `/folders/_/contents?target=${q(conn('l_nosuchthing'))}`);
    expect([r.status, r.body]).to.deep.equal([404, { error: "location 'l_nosuchthing' not found" }]);
  });

  it('copies from a managed folder onto a location', async () => {
    fs.writeFileSync(path.join(folderDir, 'upload.txt'), 'uploaded');
    const r = await api('POST', `/folders/${folderId}/entries/upload.txt/copy`, { dst_target: conn(privId, 'upload.txt') });
    expect(r.status, r.text).to.equal(200);
    expect(fs.readFileSync(path.join(lab.privateDir, 'upload.txt'), 'utf8')).to.equal('uploaded');
  });

  it('disconnects and reconnects idempotently; an unmounted location answers 409', async () => {
    for (let i = 0; i < 2; i++) {
      const r = await api('POST', `/locations/${guestId}/disconnect`);
      expect(r.status, r.text).to.equal(200);
      expect(r.body.location).to.include({ status: 'disconnected', mounted: false, mount_path: null, last_error: null });
    }
    expect(await mountAt(mountDir(guestId))).to.equal(null);
    expect(await findProcesses('smbnetfs', mountDir(guestId))).to.deep.equal([]);
    let r = await api('GET', `/folders/_/contents?target=${q(conn(guestId))}`);
    expect([r.status, r.body]).to.deep.equal([409, { error: "location 'public' is not mounted: it is disconnected (reconnect it first)" }]);
    r = await api('POST', '/folders/_/subfolders', { name: 'nope', target: conn(guestId) });
    expect(r.status).to.equal(409);
    for (let i = 0; i < 2; i++) {
      r = await api('POST', `/locations/${guestId}/reconnect`);
      expect(r.status, r.text).to.equal(200);
      expect(r.body.location).to.include({ status: 'mounted', mounted: true, last_error: null });
    }
    expect((await findProcesses('smbnetfs', mountDir(guestId))).length).to.equal(1);
    fs.writeFileSync(path.join(lab.guestDir, 'g.txt'), 'g');
    r = await api('GET', `/folders/_/contents?target=${q(conn(guestId))}`);
    expect(r.status, r.text).to.equal(200);
    expect(r.body.entries.map((e: any) => e.name)).to.deep.equal(['g.txt']);
  });

  it('keeps the password out of the data dir, the logs, the activity log and the process list', async () => {
    const ps = (await exec('ps', ['-eo', 'args'])).stdout;
    expect(ps).to.include(mountDir(privId)); // its smbnetfs is running...
    expect(ps).not.to.include(lab.password); // ...without the password in its arguments
    expect(findInFiles(dataDir, lab.password, (p) => p.startsWith(path.join(dataDir, 'locations', 'mnt')))).to.deep.equal([]);
    expect(JSON.stringify(d.logs)).not.to.include(lab.password);
    const act = await api('GET', '/activity?limit=200');
    expect(act.status).to.equal(200);
    expect(act.text).not.to.include(lab.password);
    expect(act.body.events.some((e: any) => /Connected location private/.test(e.summary))).to.equal(true);
    // Encrypted at rest under a key only hostd reads.
    const secret = path.join(dataDir, 'secrets', 'locations', privId);
    expect(fs.statSync(secret).mode & 0o777).to.equal(0o600);
    expect(fs.statSync(path.join(dataDir, 'secrets.key')).mode & 0o777).to.equal(0o600);
    // No credential file or config FIFO is left in the helper's directory.
    expect(fs.readdirSync(path.join(dataDir, 'locations', 'work', privId)).filter((n) => /^(config|credentials)-/.test(n))).to.deep.equal([]);
  });

  it('reports a share that went away as unmounted with its error, and reconnect mounts it again once it is back', async () => {
    await lab.stop();
    const lost = await eventually(
      async () => {
        const r = await api('GET', `/locations/${privId}`);
        return r.body.location.mounted === false ? r : undefined;
      },
      30_000,
      'the lost share to be reported',
    );
    expect(lost.body.location.status).to.equal('unavailable');
    expect(lost.body.location.last_error).to.match(/^cannot reach SMB host '127\.0\.0\.1' \(NT_STATUS_CONNECTION_REFUSED\)/);
    expect(await mountAt(mountDir(privId))).to.equal(null);
    let r = await api('GET', `/folders/_/contents?target=${q(conn(privId))}`);
    expect(r.status).to.equal(409);
    expect(r.body.error).to.match(/^location 'private' is not mounted: cannot reach SMB host '127\.0\.0\.1'/);
    r = await api('POST', `/locations/${privId}/reconnect`);
    expect([r.status, r.body]).to.deep.equal([502, { error: "cannot reach SMB host '127.0.0.1' (NT_STATUS_CONNECTION_REFUSED)" }]);

    await lab.start();
    r = await api('POST', `/locations/${privId}/reconnect`);
    expect(r.status, r.text).to.equal(200);
    expect(r.body.location).to.include({ status: 'mounted', mounted: true, last_error: null });
    r = await api('GET', `/folders/_/contents?target=${q(conn(privId))}`);
    expect(r.status, r.text).to.equal(200);
    expect(r.body.entries.map((e: any) => e.name)).to.include('hello.txt');
    // The guest mount was lost too; the monitor (every 2 s here) mounts it again by itself.
    await eventually(async () => (await api('GET', `/locations/${guestId}`)).body.location.mounted === true, 30_000, 'the guest share to come back');
  });

  it('keeps mounts across a hostd restart and mounts them again after a host restart', async () => {
    let r = await api('POST', `/locations/${guestId}/disconnect`);
    expect(r.status).to.equal(200);
    const before = await findProcesses('smbnetfs', mountDir(privId));
    expect(before.length).to.equal(1);

    // hostd restarts: the mount and its helper stay and are adopted.
    await d.stop();
    expect(await mountAt(mountDir(privId))).to.not.equal(null);
    await start();
    r = await api('GET', `/locations/${privId}`);
    expect(r.body.location).to.include({ status: 'mounted', mounted: true });
    expect(await findProcesses('smbnetfs', mountDir(privId))).to.deep.equal(before);

    // The host restarts: hostd, the helpers and the mounts are all gone.
    await d.kill();
    for (const pid of before) process.kill(pid, 'SIGKILL');
    await exec('umount', ['-l', mountDir(privId)]).catch(() => undefined);
    expect(await mountAt(mountDir(privId))).to.equal(null);
    await start();
    await eventually(async () => (await api('GET', `/locations/${privId}`)).body.location.mounted === true, 30_000, 'the share to be mounted again');
    r = await api('GET', `/folders/_/contents?target=${q(conn(privId))}`);
    expect(r.status, r.text).to.equal(200);
    // The disconnected one stays disconnected.
    r = await api('GET', `/locations/${guestId}`);
    expect(r.body.location).to.include({ status: 'disconnected', mounted: false });
    expect(await mountAt(mountDir(guestId))).to.equal(null);
  });

  it('removes a location with its mount and stored credentials', async () => {
    const p = await api('POST', '/locations', { name: 'private2', remote: '//127.0.0.1/private', username: 'smbtest', password: lab.password });
    expect(p.status, p.text).to.equal(201);
    const id = p.body.location.location_id;
    expect(fs.existsSync(path.join(dataDir, 'secrets', 'locations', id))).to.equal(true);
    const r = await api('DELETE', `/locations/${id}`);
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.deep.include({ deleted: true });
    expect(r.body.location).to.include({ location_id: id, name: 'private2', mounted: false });
    expect(fs.existsSync(path.join(dataDir, 'secrets', 'locations', id))).to.equal(false);
    expect(fs.existsSync(mountDir(id))).to.equal(false);
    expect(await findProcesses('smbnetfs', mountDir(id))).to.deep.equal([]);
    const again = await api('DELETE', `/locations/${id}`);
    expect([again.status, again.body]).to.deep.equal([404, { error: `location '${id}' not found` }]);
    const g = await api('DELETE', `/locations/${guestId}`);
    expect(g.status).to.equal(200);
    const pr = await api('DELETE', `/locations/${privId}`);
    expect(pr.status, pr.text).to.equal(200);
    expect((await api('GET', '/locations')).body.locations).to.deep.equal([]);
    // A last look for the password after everything above.
    expect(findInFiles(dataDir, lab.password)).to.deep.equal([]);
    expect(JSON.stringify(d.logs)).not.to.include(lab.password);
  });
});
