/**
 * VM images without booting anything: the download catalog replaced by
 * config and served from a loopback HTTP server (resume, checksum, raw to
 * qcow2), hostctl import and fetch, moves and deletes between pools, ISOs.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { expect } from 'chai';
import { run } from '../../../daemon/lib/run.js';
import { eventually, hostctl, tempDir } from '../../helpers/daemon.js';
import { fails, FileServer, killGuests, requireVmsRuntime, ok, settle, sha256, startVmsDaemon, succeeded, type VmsEnv } from '../../helpers/vms-fixture.js';

/**
 * Serves one file, and cuts its first answer where the test says: it sends
 * the first `cutAt` bytes, holds the connection until `cut()`, then closes it.
 * The test calls `cut()` once the client has all those bytes (its partial
 * file has them), so where the download stops does not depend on how fast
 * either side runs. Later requests get the rest (Range honoured).
 */
class CuttingServer {
  private srv!: http.Server;
  private port = 0;
  private release!: () => void;
  private readonly held = new Promise<void>((r) => (this.release = r));
  private cutDone = false;
  readonly ranges: Array<string | undefined> = [];

  constructor(
    private readonly data: Buffer,
    private readonly cutAt: number,
  ) {}

  async start(): Promise<void> {
    this.srv = http.createServer((req, res) => {
      this.ranges.push(req.headers.range);
      const size = this.data.length;
      const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
      const start = m ? Number(m[1]) : 0;
      if (m) res.writeHead(206, { 'content-length': size - start, 'content-range': `bytes ${start}-${size - 1}/${size}` });
      else res.writeHead(200, { 'content-length': size });
      if (this.cutDone) {
        res.end(this.data.subarray(start));
        return;
      }
      this.cutDone = true;
      res.write(this.data.subarray(start, this.cutAt));
      void this.held.then(() => res.destroy());
    });
    await new Promise<void>((r) => this.srv.listen(0, '127.0.0.1', () => r()));
    this.port = (this.srv.address() as { port: number }).port;
  }

  url(p: string): string {
    return `http://127.0.0.1:${this.port}${p}`;
  }

  cut(): void {
    this.release();
  }

  async stop(): Promise<void> {
    this.release();
    this.srv.closeAllConnections();
    await new Promise<void>((r) => this.srv.close(() => r()));
  }
}

describe('vms images, catalog and ISOs (QEMU tools)', function () {
  this.timeout(10 * 60_000);
  let e: VmsEnv;
  const srv = new FileServer();
  // A raw image with data in it, so that a cut download has something to resume.
  const rawData = Buffer.alloc(3 * 1024 * 1024, 7);
  const cutting = new CuttingServer(rawData, 1024 * 1024);
  let dir: string;
  let catalogFile: string;

  before(async function () {
    await requireVmsRuntime(this);
    dir = tempDir('hostd-vms-img-');
    await srv.start();
    await cutting.start();
    const tiny = path.join(dir, 'tiny.qcow2');
    await run('qemu-img', ['create', '-q', '-f', 'qcow2', tiny, '64M']);
    const raw = path.join(dir, 'tiny.raw');
    fs.writeFileSync(raw, rawData);
    fs.writeFileSync(path.join(dir, 'SHA256SUMS'), `${await sha256(tiny)}  tiny.qcow2\n${'0'.repeat(64)}  other.img\n`);
    srv.files.set('/img/tiny.qcow2', tiny);
    srv.files.set('/img/tiny.raw', raw);
    srv.files.set('/img/SHA256SUMS', path.join(dir, 'SHA256SUMS'));
    catalogFile = path.join(dir, 'catalog.json');
    fs.writeFileSync(
      catalogFile,
      JSON.stringify([
        {
          id: 'tiny',
          name: 'Tiny',
          url: srv.url('/img/tiny.qcow2'),
          checksum_url: srv.url('/img/SHA256SUMS'),
          min_memory_mb: 256,
          min_disk_gb: 1,
          default_user: 'tiny',
          labels: { os: 'none' },
        },
        { id: 'tiny-raw', url: cutting.url('/img/tiny.raw'), checksum: `sha256:${await sha256(raw)}`, format: 'raw' },
        { id: 'bad-sum', url: srv.url('/img/tiny.raw'), checksum: `sha256:${'f'.repeat(64)}` },
      ]),
    );
    e = await startVmsDaemon({ extraYaml: `  catalog_file: ${catalogFile}` });
  });

  after(async function () {
    if (e) await killGuests(e.root);
    await srv.stop().catch(() => undefined);
    await cutting.stop().catch(() => undefined);
  });

  it('lists the catalog from the configured file', async function () {
    const c = await ok(e, 'GET', '/vms/images/catalog');
    expect(c.source).to.equal(catalogFile);
    expect(c.images.map((i: any) => [i.image_id, i.downloaded])).to.deep.equal([
      ['tiny', false],
      ['tiny-raw', false],
      ['bad-sum', false],
    ]);
    expect(c.images[0]).to.include({ name: 'Tiny', min_memory_mb: 256, min_disk_gb: 1, default_user: 'tiny', storage_id: null });
  });

  it('fetches a catalog image with hostctl, verified against the checksum list', async function () {
    await fails(
      e,
      'POST',
      '/vms',
      { name: 'x', image_id: 'tiny' },
      404,
      "image 'tiny' is in the download catalog but not on this host; download it first (POST /templates with base_image_id 'tiny', or hostctl vm image fetch tiny)",
    );
    const r = await hostctl(e.d.dataDir, ['vm', 'image', 'fetch', 'tiny', '--storage', 'p2']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/verifying the sha256 checksum/);
    const img = (await ok(e, 'GET', '/vms/images')).images[0];
    expect(img).to.include({ image_id: 'tiny', storage_id: 'p2', kind: 'image', min_memory_mb: 256, default_user: 'tiny', virtual_size_bytes: 64 * 1024 ** 2 });
    expect(img.labels).to.deep.equal({ os: 'none' });
    expect(img.source).to.deep.include({ type: 'catalog', catalog_id: 'tiny' });
    expect(fs.existsSync(path.join(e.pools.p2, '.vms/images/tiny.qcow2'))).to.equal(true);
    expect(fs.readdirSync(path.join(e.pools.p2, '.vms/images/.partial'))).to.deep.equal([]);
    expect((await ok(e, 'GET', '/vms/images/catalog')).images[0]).to.include({ downloaded: true, storage_id: 'p2' });
    const again = await hostctl(e.d.dataDir, ['vm', 'image', 'fetch', 'tiny']);
    expect(again.stderr).to.equal("hostctl: image 'tiny' already exists\n");
    const nope = await hostctl(e.d.dataDir, ['vm', 'image', 'fetch', 'nope']);
    expect(nope.stderr).to.equal("hostctl: image 'nope' is not in the download catalog\n");
  });

  it('resumes a cut download where it stopped, and converts raw to qcow2', async function () {
    const part = path.join(e.pools.p1, '.vms/images/.partial/tiny-raw.part');
    const r1 = await e.d.admin.request('POST', '/admin/vms/images/fetch', { image_id: 'tiny-raw' });
    expect(r1.status).to.equal(201);
    // The connection is cut once the first MiB is on disk: nothing is on its way then.
    await eventually(() => fs.existsSync(part) && fs.statSync(part).size === 1024 * 1024, 120_000, 'the first MiB in the partial file');
    cutting.cut();
    const t1 = await settle(e, r1.body.task.task_id);
    expect(t1.state).to.equal('failed');
    expect(t1.error).to.match(/ended after 1048576 of 3145728 bytes \(run the fetch again to resume\)|terminated|aborted|socket/);
    expect(fs.statSync(part).size).to.equal(1024 * 1024);
    const r2 = await e.d.admin.request('POST', '/admin/vms/images/fetch', { image_id: 'tiny-raw' });
    await succeeded(e, r2.body.task.task_id);
    expect(cutting.ranges).to.deep.equal([undefined, 'bytes=1048576-']);
    const info = JSON.parse((await run('qemu-img', ['info', '--output=json', path.join(e.pools.p1, '.vms/images/tiny-raw.qcow2')])).stdout);
    expect(info.format).to.equal('qcow2');
    expect(info['virtual-size']).to.equal(3 * 1024 * 1024);
  });

  it('fails a download whose checksum does not match, and drops the partial file', async function () {
    const r = await e.d.admin.request('POST', '/admin/vms/images/fetch', { image_id: 'bad-sum' });
    const t = await settle(e, r.body.task.task_id);
    expect(t.state).to.equal('failed');
    expect(t.error).to.match(/^checksum mismatch for bad-sum: expected sha256 ffffffffffffffff…, got [0-9a-f]{16}… \(the partial file was removed\)$/);
    expect(fs.existsSync(path.join(e.pools.p1, '.vms/images/.partial/bad-sum.part'))).to.equal(false);
    expect((await ok(e, 'GET', '/vms/images')).images.map((i: any) => i.image_id)).to.not.include('bad-sum');
  });

  it('imports qcow2 or raw files and refuses other formats', async function () {
    const vmdk = path.join(dir, 'disk.vmdk');
    await run('qemu-img', ['create', '-q', '-f', 'vmdk', vmdk, '16M']);
    const bad = await hostctl(e.d.dataDir, ['vm', 'image', 'import', vmdk, '--id', 'v1']);
    expect(bad.stderr).to.equal(`hostctl: '${vmdk}' is vmdk: only qcow2 and raw images are imported\n`);
    const missing = await hostctl(e.d.dataDir, ['vm', 'image', 'import', path.join(dir, 'none.img'), '--id', 'v1']);
    expect(missing.stderr).to.equal(`hostctl: file '${path.join(dir, 'none.img')}' not found\n`);
    const badId = await hostctl(e.d.dataDir, ['vm', 'image', 'import', vmdk, '--id', '../x']);
    expect(badId.stderr).to.equal("hostctl: argument 'image_id' must be 1-64 of [A-Za-z0-9_.-], starting with a letter or digit, without '..'\n");
    const raw = await hostctl(e.d.dataDir, ['vm', 'image', 'import', path.join(dir, 'tiny.raw'), '--id', 'imported-raw', '--storage', 'p2']);
    expect(raw.code, raw.stderr).to.equal(0);
    const img = (await ok(e, 'GET', '/vms/images')).images.find((i: any) => i.image_id === 'imported-raw');
    expect(img).to.include({ storage_id: 'p2', kind: 'image', virtual_size_bytes: 3 * 1024 * 1024 });
    expect(img.source).to.deep.equal({ type: 'import', file: path.join(dir, 'tiny.raw') });
  });

  it('moves images between pools and deletes them, naming pool mismatches', async function () {
    await fails(
      e,
      'POST',
      '/vms/images/tiny/move',
      { source_storage_id: 'p1', target_storage_id: 'p2' },
      404,
      "image 'tiny' is not in pool 'p1' (it is in 'p2'; argument 'source_storage_id')",
    );
    await fails(
      e,
      'POST',
      '/vms/images/tiny/move',
      { source_storage_id: 'p2', target_storage_id: 'p9' },
      404,
      "storage pool 'p9' not found (argument 'target_storage_id')",
    );
    await fails(e, 'POST', '/vms/images/tiny/move', { source_storage_id: 'p2', target_storage_id: 'p2' }, 400, "image 'tiny' is already in pool 'p2'");
    await fails(e, 'POST', '/vms/images/nope/move', { source_storage_id: 'p2', target_storage_id: 'p1' }, 404, "image 'nope' not found");
    const m = await ok(e, 'POST', '/vms/images/tiny/move', { source_storage_id: 'p2', target_storage_id: 'p1' });
    expect(m).to.include({ image_id: 'tiny', source_storage_id: 'p2', target_storage_id: 'p1' });
    await succeeded(e, m.task.task_id);
    expect(fs.existsSync(path.join(e.pools.p1, '.vms/images/tiny.qcow2'))).to.equal(true);
    expect(fs.existsSync(path.join(e.pools.p2, '.vms/images/tiny.qcow2'))).to.equal(false);
    // A VM made from the moved image uses the new place.
    const v = await ok(e, 'POST', '/vms', { name: 'on tiny', image_id: 'tiny', linked_clone: true }, 201);
    const backing = JSON.parse((await run('qemu-img', ['info', '--output=json', path.join(e.pools.p1, `.vms/vm-${v.vm.vmid}/root.qcow2`)])).stdout)[
      'backing-filename'
    ];
    expect(backing).to.equal(path.join(e.pools.p1, '.vms/images/tiny.qcow2'));
    await fails(e, 'DELETE', '/vms/images/tiny', undefined, 409, `image 'tiny' cannot be deleted: linked clones VM ${v.vm.vmid} depend on it`);
    await ok(e, 'DELETE', `/vms/${v.vm.vmid}`);
    const d = await ok(e, 'DELETE', '/vms/images/tiny?storage_id=p1');
    expect(d.deleted.image_id).to.equal('tiny');
    expect(fs.existsSync(path.join(e.pools.p1, '.vms/images/tiny.qcow2'))).to.equal(false);
    await fails(e, 'DELETE', '/vms/images/tiny', undefined, 404, "image 'tiny' not found");
  });

  it('lists ISOs per pool and moves them', async function () {
    expect((await ok(e, 'GET', '/vms/isos')).isos).to.deep.equal([]);
    fs.mkdirSync(path.join(e.pools.p1, '.vms/isos'), { recursive: true });
    fs.writeFileSync(path.join(e.pools.p1, '.vms/isos/installer.iso'), Buffer.alloc(200_000, 1));
    fs.writeFileSync(path.join(e.pools.p1, '.vms/isos/readme.txt'), 'not an iso');
    const l = (await ok(e, 'GET', '/vms/isos')).isos;
    expect(l.map((i: any) => [i.iso_id, i.storage_id, i.size_bytes])).to.deep.equal([['installer.iso', 'p1', 200_000]]);
    await fails(e, 'POST', '/vms/isos/nope.iso/move', { source_storage_id: 'p1', target_storage_id: 'p2' }, 404, "ISO 'nope.iso' not found in pool 'p1'");
    await fails(
      e,
      'POST',
      '/vms/isos/..%2Fx.iso/move',
      { source_storage_id: 'p1', target_storage_id: 'p2' },
      400,
      "argument 'iso_id' must be 1-128 of [A-Za-z0-9_.+-], starting with a letter or digit, without '..'",
    );
    const m = await ok(e, 'POST', '/vms/isos/installer.iso/move', { source_storage_id: 'p1', target_storage_id: 'p2' });
    await succeeded(e, m.task.task_id);
    expect((await ok(e, 'GET', '/vms/isos')).isos.map((i: any) => [i.iso_id, i.storage_id])).to.deep.equal([['installer.iso', 'p2']]);
    fs.writeFileSync(path.join(e.pools.p1, '.vms/isos/installer.iso'), 'again');
    await fails(
      e,
      'POST',
      '/vms/isos/installer.iso/move',
      { source_storage_id: 'p1', target_storage_id: 'p2' },
      409,
      "pool 'p2' already has an ISO 'installer.iso'",
    );
  });
});
