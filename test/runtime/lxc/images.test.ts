/**
 * Image downloads from a simplestreams index served by a loopback HTTP server
 * the test runs (the format public LXC image servers use), with the test
 * image as the rootfs: catalog, download task with progress and checksum
 * verification, a corrupted entry, and a container from the download.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { streamArch } from '../../../daemon/lxc/lxc-tools/simplestreams.js';
import { cleanupLxc, lxcEnv, requireLxc, waitTask, type LxcEnv } from '../../helpers/lxc-env.js';
import { busyboxImage } from '../../helpers/lxc-image.js';

describe('lxc runtime: image catalog and downloads (simplestreams)', function () {
  this.timeout(120_000);
  let env: LxcEnv;
  let server: http.Server;
  const requests: string[] = [];

  before(async function () {
    await requireLxc(this);
    const img = busyboxImage();
    const arch = streamArch(process.arch);
    const file = (sha256: string) => ({ 'root.tar.xz': { ftype: 'root.tar.xz', path: 'images/busybox/root.tar.xz', sha256, size: img.size } });
    const products = {
      content_id: 'images',
      datatype: 'image-downloads',
      format: 'products:1.0',
      products: {
        [`busybox:1.36:${arch}:default`]: {
          aliases: 'busybox/1.36,busybox',
          arch,
          os: 'Busybox',
          release: '1.36',
          release_title: '1.36',
          variant: 'default',
          versions: {
            '20260101_00:00': { items: file('0'.repeat(64)) },
            '20261101_00:00': {
              items: { ...file(img.sha256), 'lxd.tar.xz': { ftype: 'lxd.tar.xz', path: 'images/busybox/lxd.tar.xz', sha256: '1'.repeat(64), size: 10 } },
            },
          },
        },
        [`broken:1:${arch}:default`]: { arch, os: 'Broken', release: '1', versions: { '20261101_00:00': { items: file('f'.repeat(64)) } } },
        'other:1:s390x:default': { arch: 's390x', os: 'Other', release: '1', versions: { '1': { items: file(img.sha256) } } },
        [`escape:1:${arch}:default`]: {
          arch,
          os: 'Escape',
          release: '1',
          versions: { '1': { items: { 'root.tar.xz': { ftype: 'root.tar.xz', path: '../../etc/passwd', sha256: img.sha256, size: img.size } } } },
        },
      },
    };
    const index = {
      format: 'index:1.0',
      index: { images: { datatype: 'image-downloads', format: 'products:1.0', path: 'streams/v1/images.json', products: Object.keys(products.products) } },
    };
    server = http.createServer((req, res) => {
      requests.push(req.url ?? '');
      if (req.url === '/streams/v1/index.json') return void res.end(JSON.stringify(index));
      if (req.url === '/streams/v1/images.json') return void res.end(JSON.stringify(products));
      if (req.url === '/images/busybox/root.tar.xz') {
        res.setHeader('content-length', String(img.size));
        fs.createReadStream(img.rootfs).pipe(res);
        return;
      }
      res.statusCode = 404;
      res.end('not found');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as AddressInfo).port;
    env = await lxcEnv({ pools: ['p1', 'cache'], imageId: null, lxcYaml: `  image_server: http://127.0.0.1:${port}/\n  image_storage: cache` });
  });
  after(async () => {
    await cleanupLxc();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  });

  it('lists downloadable images of this architecture from the index', async () => {
    const r = await env.req('GET', '/lxc/images/catalog');
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    const arch = streamArch(process.arch);
    expect(r.body.server).to.match(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(r.body.images.map((i: any) => i.image_id)).to.deep.equal([`broken-1-${arch}-default`, `busybox-1.36-${arch}-default`, `escape-1-${arch}-default`]);
    const bb = r.body.images.find((i: any) => i.image_id.startsWith('busybox'));
    expect(bb).to.deep.equal({
      image_id: `busybox-1.36-${arch}-default`,
      product: `busybox:1.36:${arch}:default`,
      os: 'Busybox',
      release: '1.36',
      arch,
      variant: 'default',
      version: '20261101_00:00',
      aliases: ['busybox/1.36', 'busybox'],
      size_bytes: busyboxImage().size,
      sha256: busyboxImage().sha256,
      cached_on: [],
    });
  });

  it('downloads one into the default cache pool as a task, verifying the checksum', async () => {
    const id = `busybox-1.36-${streamArch(process.arch)}-default`;
    const r = await env.req('POST', `/lxc/images/${id}`, {});
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.task).to.include({ kind: 'lxc.image.download', resource: `lxc/images/${id}` });
    const t = await waitTask(env, r.body.task.task_id);
    expect(t.state, t.error).to.equal('succeeded');
    expect(t.progress).to.equal(100);
    const logs = await env.req('GET', `/tasks/${t.task_id}/logs`);
    expect(logs.body.lines.map((l: any) => l.text)).to.include('checksum verified');
    expect(requests).to.include('/images/busybox/root.tar.xz');
    const imgs = (await env.req('GET', '/lxc/images')).body.images;
    expect(imgs).to.have.length(1);
    expect(imgs[0]).to.include({
      image_id: id,
      storage_id: 'cache',
      source: 'download',
      sha256: busyboxImage().sha256,
      os: 'Busybox',
      release: '1.36',
      version: '20261101_00:00',
    });
    const again = await env.req('POST', `/lxc/images/${id}`, {});
    expect(again.status).to.equal(409);
    expect(again.body).to.deep.equal({ error: `image '${id}' is on storage 'cache' already` });
    const cat = await env.req('GET', '/lxc/images/catalog');
    expect(cat.body.images.find((i: any) => i.image_id === id).cached_on).to.deep.equal(['cache']);
  });

  it('a checksum mismatch fails the task and leaves nothing behind', async () => {
    const id = `broken-1-${streamArch(process.arch)}-default`;
    const r = await env.req('POST', `/lxc/images/${id}`, { storage_id: 'p1' });
    expect(r.status).to.equal(200);
    const t = await waitTask(env, r.body.task.task_id);
    expect(t.state).to.equal('failed');
    expect(t.error).to.equal(`checksum mismatch: SHA-256 ${busyboxImage().sha256} differs from the index's ${'f'.repeat(64)}`);
    expect(fs.readdirSync(path.join(env.pools.p1, '.hostd-lxc/images'))).to.deep.equal([]);
    expect(fs.readdirSync(path.join(env.pools.p1, '.hostd-lxc/tmp'))).to.deep.equal([]);
  });

  it('an index entry pointing outside the server is refused', async () => {
    const r = await env.req('POST', `/lxc/images/escape-1-${streamArch(process.arch)}-default`, {});
    expect(r.status).to.equal(503);
    expect(r.body).to.deep.equal({ error: "the image server's index is not usable: the index names a file outside the server: '../../etc/passwd'" });
  });

  it('404 for an id the catalog does not have', async () => {
    const r = await env.req('POST', '/lxc/images/nope', {});
    expect(r.status).to.equal(404);
    expect(r.body.error).to.match(/^image 'nope' is not in the catalog of http:\/\/127\.0\.0\.1:\d+\/$/);
  });

  it('a container from the downloaded image runs', async () => {
    const id = `busybox-1.36-${streamArch(process.arch)}-default`;
    const c = await env.req('POST', '/lxc', { name: 'dl', template: id });
    expect(c.status, JSON.stringify(c.body)).to.equal(201);
    expect(c.body.container).to.include({ template: id, template_storage_id: 'cache', storage_id: 'p1' });
    const lxcid = c.body.container.lxcid;
    expect((await env.req('POST', `/lxc/${lxcid}/start`)).status).to.equal(200);
    const e = await env.req('POST', `/lxc/${lxcid}/exec`, { command: 'hostname' });
    expect(e.body.stdout).to.equal('dl\n');
    expect((await env.req('POST', `/lxc/${lxcid}/stop`)).status).to.equal(200);
    expect((await env.req('DELETE', `/lxc/${lxcid}`)).status).to.equal(200);
  });
});
