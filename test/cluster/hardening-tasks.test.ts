/**
 * House item 6: a task started on a member through peer_id lives there and is
 * read through the same peer_id; without it, it is not found. The task is a
 * real one: an LXC image download that member B runs from a simplestreams
 * server on loopback, asked for on member A with peer_id naming B. The
 * server holds the image back until the test has looked at the running task.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { busyboxImage, haveBusybox } from '../helpers/lxc-image.js';
import { lxcMissing } from '../helpers/lxc-env.js';
import { streamArch } from '../../daemon/lxc/lxc-tools/simplestreams.js';
import { pair } from './util.js';
import { requireOrSkip } from '../helpers/runtime-gate.js';

describe('a task started on a member through peer_id is found through its peer_id', function () {
  this.timeout(180_000);
  let a: TestDaemon;
  let b: TestDaemon;
  let server: http.Server;
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));

  before(async function () {
    const why = lxcMissing() ?? (haveBusybox() ? null : 'busybox-static is not installed (it makes the test image)');
    requireOrSkip(this, 'lxc', why);
    const img = busyboxImage();
    const arch = streamArch(process.arch);
    const products = {
      content_id: 'images',
      datatype: 'image-downloads',
      format: 'products:1.0',
      products: {
        [`busybox:1.36:${arch}:default`]: {
          arch,
          os: 'Busybox',
          release: '1.36',
          variant: 'default',
          versions: { '1': { items: { 'root.tar.xz': { ftype: 'root.tar.xz', path: 'images/root.tar.xz', sha256: img.sha256, size: img.size } } } },
        },
      },
    };
    const index = {
      format: 'index:1.0',
      index: { images: { datatype: 'image-downloads', format: 'products:1.0', path: 'streams/v1/images.json', products: Object.keys(products.products) } },
    };
    server = http.createServer((req, res) => {
      if (req.url === '/streams/v1/index.json') return void res.end(JSON.stringify(index));
      if (req.url === '/streams/v1/images.json') return void res.end(JSON.stringify(products));
      if (req.url === '/images/root.tar.xz') {
        void held.then(() => {
          res.setHeader('content-length', String(img.size));
          fs.createReadStream(img.rootfs).pipe(res);
        });
        return;
      }
      res.statusCode = 404;
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const yaml = (pool: string) => `storage_pools:\n  - id: cache\n    path: ${pool}\nlxc:\n  image_server: ${url}\n  image_storage: cache\n`;
    const env = { HOSTD_CLUSTER_PROBE_MS: '500' };
    [a, b] = await Promise.all([
      startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'alpha' }, configYaml: yaml(tempDir('hostd-task-a-')) }),
      startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'bravo' }, configYaml: yaml(tempDir('hostd-task-b-')) }),
    ]);
    await pair([a, b]);
  });

  after(async () => {
    release?.();
    await Promise.all([a, b].map((d) => d?.stop()));
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  });

  it('GET /tasks/{id}, /tasks/{id}/logs and /tasks with peer_id find it on the member; without peer_id, 404 and not listed', async () => {
    const token = await a.token('img-bot', ['lxc.manage', 'lxc.read', 'vm.read']);
    const id = `busybox-1.36-${streamArch(process.arch)}-default`;
    const started = await a.request('POST', `/api/v1/lxc/images/${id}`, { token, body: { peer_id: b.nodeId } });
    expect(started.status, started.text).to.equal(200);
    const taskId: string = started.body.task.task_id;
    expect(started.body.task.node_id).to.equal(b.nodeId);

    const there = await a.request('GET', `/api/v1/tasks/${taskId}?peer_id=${b.nodeId}`, { token });
    expect(there.status, there.text).to.equal(200);
    expect(there.body.task).to.include({ task_id: taskId, node_id: b.nodeId, owner: 'img-bot', kind: 'lxc.image.download' });
    expect(there.body.task.state).to.be.oneOf(['queued', 'running']);

    const listed = await a.request('GET', `/api/v1/tasks?peer_id=${b.nodeId}`, { token });
    expect(listed.status, listed.text).to.equal(200);
    expect(listed.body.tasks.map((t: any) => t.task_id)).to.include(taskId);

    const here = await a.request('GET', `/api/v1/tasks/${taskId}`, { token });
    expect({ status: here.status, body: here.body }).to.deep.equal({ status: 404, body: { error: `task '${taskId}' not found` } });
    expect((await a.request('GET', '/api/v1/tasks', { token })).body.tasks.map((t: any) => t.task_id)).to.not.include(taskId);

    release();
    let done: any;
    for (const end = Date.now() + 60_000; Date.now() < end; await new Promise((r) => setTimeout(r, 200))) {
      done = (await a.request('GET', `/api/v1/tasks/${taskId}?peer_id=${b.nodeId}`, { token })).body.task;
      if (done.state === 'succeeded' || done.state === 'failed') break;
    }
    expect(done.state, done.error).to.equal('succeeded');
    const logs = await a.request('GET', `/api/v1/tasks/${taskId}/logs?peer_id=${b.nodeId}`, { token });
    expect(logs.status, logs.text).to.equal(200);
    expect(logs.body.lines.map((l: any) => l.text)).to.include('checksum verified');
    // The image is on the member that ran the task, not on the one that was asked.
    const onB = await a.request('GET', `/api/v1/lxc/images?peer_id=${b.nodeId}`, { token });
    expect(onB.body.images.map((i: any) => i.image_id)).to.deep.equal([id]);
    expect((await a.request('GET', '/api/v1/lxc/images', { token })).body.images).to.deep.equal([]);
  });
});
