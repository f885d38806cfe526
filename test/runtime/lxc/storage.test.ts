/**
 * Disk limits enforced for real, clones, rootfs moves between pools as tasks,
 * template capture, image moves and deletes.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { cleanupLxc, lxcEnv, requireLxc, waitTask, type LxcEnv } from '../../helpers/lxc-env.js';

const MiB = 1024 * 1024;

describe('lxc runtime: disk limits, clones, moves, templates, images', function () {
  this.timeout(180_000);
  let env: LxcEnv;

  before(async function () {
    await requireLxc(this);
    env = await lxcEnv({ pools: ['p1', 'p2'] });
  });
  after(cleanupLxc);

  const exec = async (id: number, command: string) => {
    const r = await env.req('POST', `/lxc/${id}/exec`, { command });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body as { exit_code: number; stdout: string; stderr: string };
  };
  const created = async (body: Record<string, unknown>) => {
    const r = await env.req('POST', '/lxc', { template: 'bb', ...body });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return r.body.container;
  };
  const ok = async (method: string, p: string, body?: unknown) => {
    const r = await env.req(method, p, body);
    expect(r.status, `${method} ${p}: ${JSON.stringify(r.body)}`).to.equal(200);
    return r.body;
  };

  describe('disk_size_bytes', () => {
    let id: number;

    it('create with a limit: a write past it fails inside the container', async () => {
      const c = await created({ name: 'small', disk_size_bytes: 48 * MiB });
      id = c.lxcid;
      expect(c.disk_size_bytes).to.equal(48 * MiB);
      expect(c.rootfs.kind).to.equal('loop');
      expect(fs.statSync(c.rootfs.path).size).to.equal(48 * MiB);
      await ok('POST', `/lxc/${id}/start`);
      const w = await exec(id, 'dd if=/dev/zero of=/fill bs=1M count=80 2>&1; echo rc=$?');
      expect(w.stdout).to.match(/No space left on device/);
      expect(w.stdout).to.not.match(/rc=0/);
      const st = await ok('GET', `/lxc/${id}/stats`);
      expect(st.stats.disk.limit_bytes).to.equal(48 * MiB);
      expect(st.stats.disk.total_bytes).to.be.at.most(48 * MiB);
      await exec(id, 'rm -f /fill');
    });

    it('PATCH /disk while running is 409', async () => {
      const r = await env.req('PATCH', `/lxc/${id}/disk`, { disk_size_bytes: 96 * MiB });
      expect(r.status).to.equal(409);
      expect(r.body).to.deep.equal({ error: `container ${id} is running; stop it to change its disk limit` });
    });

    it('grows the limit; a write that failed before fits now', async () => {
      await ok('POST', `/lxc/${id}/stop`);
      const r = await ok('PATCH', `/lxc/${id}/disk`, { disk_size_bytes: 128 * MiB });
      expect(r.container.disk_size_bytes).to.equal(128 * MiB);
      await ok('POST', `/lxc/${id}/start`);
      const w = await exec(id, 'dd if=/dev/zero of=/fill bs=1M count=80 2>/dev/null; echo rc=$?; echo kept > /kept');
      expect(w.stdout).to.equal('rc=0\n');
    });

    it('a limit below what the rootfs uses is 409; too small is 400', async () => {
      await ok('POST', `/lxc/${id}/stop`);
      const r = await env.req('PATCH', `/lxc/${id}/disk`, { disk_size_bytes: 40 * MiB });
      expect(r.status).to.equal(409);
      expect(r.body.error).to.match(new RegExp(`^the rootfs of container ${id} uses \\d+ bytes; a limit of ${40 * MiB} bytes cannot hold it`));
      const tiny = await env.req('PATCH', `/lxc/${id}/disk`, { disk_size_bytes: 1024 });
      expect(tiny.status).to.equal(400);
      expect(tiny.body).to.deep.equal({ error: "argument 'disk_size_bytes' must be 0 (no limit) or at least 33554432 (32 MiB)" });
    });

    it('0 removes the limit and keeps the data; a limit can be set again', async () => {
      const r = await ok('PATCH', `/lxc/${id}/disk`, { disk_size_bytes: 0 });
      expect(r.container).to.include({ disk_size_bytes: 0 });
      expect(r.container.rootfs.kind).to.equal('dir');
      const dir = path.join(env.pools.p1, '.hostd-lxc/containers', String(id));
      expect(fs.readdirSync(dir).sort()).to.deep.equal(['rootfs']);
      await ok('POST', `/lxc/${id}/start`);
      expect((await exec(id, 'cat /kept; rm /fill')).stdout).to.equal('kept\n');
      await ok('POST', `/lxc/${id}/stop`);
      const again = await ok('PATCH', `/lxc/${id}/disk`, { disk_size_bytes: 64 * MiB });
      expect(again.container.rootfs.kind).to.equal('loop');
      expect(fs.readdirSync(dir).sort()).to.deep.equal(['disk.img']);
      await ok('POST', `/lxc/${id}/start`);
      expect((await exec(id, 'cat /kept')).stdout).to.equal('kept\n');
      await ok('POST', `/lxc/${id}/stop`);
    });
  });

  describe('clone, move, template', () => {
    let src: number;
    let clone: number;

    it('clone needs the source stopped, a free id in the path and a free name', async () => {
      const c = await created({ name: 'origin', environment: { ROLE: 'origin' } });
      src = c.lxcid;
      await ok('POST', `/lxc/${src}/start`);
      await exec(src, 'echo made-in-origin > /root/marker');
      const running = await env.req('POST', `/lxc/${src + 100}/clone`, { source_lxcid: src, name: 'copy' });
      expect(running.status).to.equal(409);
      expect(running.body).to.deep.equal({ error: `container ${src} is running; a clone needs the source stopped` });
      await ok('POST', `/lxc/${src}/stop`);
      const idTaken = await env.req('POST', `/lxc/${src}/clone`, { source_lxcid: src, name: 'copy' });
      expect({ status: idTaken.status, body: idTaken.body }).to.deep.equal({
        status: 409,
        body: { error: `lxcid ${src} is taken (by the source container itself); the path id names the new container` },
      });
      const noSource = await env.req('POST', `/lxc/${src + 100}/clone`, { source_lxcid: src + 99, name: 'copy' });
      expect(noSource.status).to.equal(404);
      const taken = await env.req('POST', `/lxc/${src + 100}/clone`, { source_lxcid: src, name: 'ORIGIN' });
      expect(taken.status).to.equal(409);
    });

    it('clones to a new name and the id in the path: same files and settings, new hostname and MAC', async () => {
      const r = await ok('POST', `/lxc/${src + 100}/clone`, { source_lxcid: src, name: 'copy' });
      const c = r.container;
      clone = c.lxcid;
      expect(clone).to.equal(src + 100);
      const s = (await ok('GET', `/lxc/${src}`)).container;
      expect(c).to.include({ name: 'copy', hostname: 'copy', state: 'stopped', storage_id: 'p1', template: 'bb' });
      expect(c.environment).to.deep.equal({ ROLE: 'origin' });
      expect(c.network.hwaddr).to.not.equal(s.network.hwaddr);
      await ok('POST', `/lxc/${clone}/start`);
      expect((await exec(clone, 'cat /root/marker; hostname')).stdout).to.equal('made-in-origin\ncopy\n');
      await ok('POST', `/lxc/${clone}/stop`);
    });

    it('moves the rootfs to another pool as a task', async () => {
      const running = await ok('POST', `/lxc/${clone}/start`);
      expect(running.container.state).to.equal('running');
      const busy = await env.req('POST', `/lxc/${clone}/move`, { storage_id: 'p2' });
      expect(busy.status).to.equal(409);
      expect(busy.body).to.deep.equal({ error: `container ${clone} is running; stop it before moving its rootfs` });
      await ok('POST', `/lxc/${clone}/stop`);
      const same = await env.req('POST', `/lxc/${clone}/move`, { storage_id: 'p1' });
      expect(same.status).to.equal(409);
      expect(same.body).to.deep.equal({ error: `container ${clone} is on storage 'p1' already` });
      const r = await env.req('POST', `/lxc/${clone}/move`, { storage_id: 'p2' });
      expect(r.status).to.equal(200);
      expect(r.body.task).to.include({ kind: 'lxc.container.move', resource: `lxc/${clone}` });
      const t = await waitTask(env, r.body.task.task_id);
      expect(t.state, t.error).to.equal('succeeded');
      expect(t.progress).to.equal(100);
      expect(fs.existsSync(path.join(env.pools.p1, '.hostd-lxc/containers', String(clone)))).to.equal(false);
      expect(fs.existsSync(path.join(env.pools.p2, '.hostd-lxc/containers', String(clone), 'rootfs/root/marker'))).to.equal(true);
      const c = (await ok('GET', `/lxc/${clone}`)).container;
      expect(c.storage_id).to.equal('p2');
      await ok('POST', `/lxc/${clone}/start`);
      expect((await exec(clone, 'cat /root/marker')).stdout).to.equal('made-in-origin\n');
      await ok('POST', `/lxc/${clone}/stop`);
    });

    it('captures a stopped container as a template image; 409 when the id exists on that pool', async () => {
      const running = await ok('POST', `/lxc/${src}/start`);
      expect(running.container.state).to.equal('running');
      const r0 = await env.req('POST', `/lxc/${src}/template`, { image_id: 'origin-tpl' });
      expect(r0.status).to.equal(409);
      expect(r0.body).to.deep.equal({ error: `container ${src} is running; stop it to capture a consistent template` });
      await ok('POST', `/lxc/${src}/stop`);
      const r = await env.req('POST', `/lxc/${src}/template`, {});
      expect(r.status).to.equal(201);
      expect(r.body.task.resource).to.equal('lxc/images/origin');
      const t = await waitTask(env, r.body.task.task_id);
      expect(t.state, t.error).to.equal('succeeded');
      const imgs = (await ok('GET', '/lxc/images')).images;
      const tpl = imgs.find((i: any) => i.image_id === 'origin');
      expect(tpl).to.include({ storage_id: 'p1', source: 'template', from_lxcid: src });
      expect(tpl.sha256).to.match(/^[0-9a-f]{64}$/);
      const dup = await env.req('POST', `/lxc/${src}/template`, { image_id: 'origin' });
      expect(dup.status).to.equal(409);
      expect(dup.body).to.deep.equal({ error: "image 'origin' exists on storage 'p1' already" });
      // A container made from the template has the captured files.
      const c = await created({ name: 'from template', template: 'origin' });
      await ok('POST', `/lxc/${c.lxcid}/start`);
      expect((await exec(c.lxcid, 'cat /root/marker; hostname')).stdout).to.equal('made-in-origin\nfrom-template\n');
      await ok('POST', `/lxc/${c.lxcid}/stop`);
      await ok('DELETE', `/lxc/${c.lxcid}`);
    });

    it('moves an image between pools as a task, then deletes it', async () => {
      const same = await env.req('POST', '/lxc/images/origin/move', { source_storage_id: 'p1', target_storage_id: 'p1' });
      expect(same.status).to.equal(400);
      const missing = await env.req('POST', '/lxc/images/nope/move', { source_storage_id: 'p1', target_storage_id: 'p2' });
      expect(missing.status).to.equal(404);
      expect(missing.body).to.deep.equal({ error: "image 'nope' not found on storage 'p1'" });
      const r = await env.req('POST', '/lxc/images/origin/move', { source_storage_id: 'p1', target_storage_id: 'p2' });
      expect(r.status).to.equal(200);
      const t = await waitTask(env, r.body.task.task_id);
      expect(t.state, t.error).to.equal('succeeded');
      const imgs = (await ok('GET', '/lxc/images')).images.filter((i: any) => i.image_id === 'origin');
      expect(imgs.map((i: any) => i.storage_id)).to.deep.equal(['p2']);
      expect(fs.existsSync(path.join(env.pools.p1, '.hostd-lxc/images/origin'))).to.equal(false);
      const wrongPool = await env.req('DELETE', '/lxc/images/origin?storage_id=p1');
      expect(wrongPool.status).to.equal(404);
      const d = await env.req('DELETE', '/lxc/images/origin?storage_id=p2');
      expect(d.status).to.equal(200);
      expect(d.body).to.deep.equal({ deleted: { image_id: 'origin', storage_id: 'p2' } });
      expect((await ok('GET', '/lxc/images')).images.map((i: any) => i.image_id)).to.deep.equal(['bb']);
    });

    it('cleans up: delete the containers', async () => {
      for (const id of [src, clone]) await ok('DELETE', `/lxc/${id}`);
      expect(fs.readdirSync(path.join(env.pools.p2, '.hostd-lxc/containers'))).to.deep.equal([]);
    });
  });
});
