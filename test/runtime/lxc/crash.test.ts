/**
 * Crash safety: hostd is killed (SIGKILL) at named steps of create, clone,
 * move (before and after its commit), disk change, template capture and image
 * import; after a restart, records, rootfs directories, LXC configs and image
 * dirs agree. Also: a daemon restart leaves containers running, and
 * autostart containers start once per host boot.
 *
 * Pool p2 is a small ext4 filesystem the test mounts, so a move from p1 is a
 * real copy (not a rename).
 */
import { expect } from 'chai';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { cleanupLxc, initPid, killContainers, removeCgroupGroup, lxcEnv, lxcState, requireLxc, type LxcEnv } from '../../helpers/lxc-env.js';
import { eventually, hostctl, tempDir } from '../../helpers/daemon.js';
import { isPauseLine } from '../../../daemon/lib/test-pause.js';
import { AUTOSTART_DONE } from '../../../daemon/lxc/autostart.js';

describe('lxc runtime: crash safety and restarts', function () {
  this.timeout(240_000);
  let dataDir: string;
  let pools: Record<string, string>;
  let p2mnt: string | null = null;
  let env: LxcEnv;

  before(async function () {
    await requireLxc(this);
    dataDir = tempDir('hostd-lxc-crash-');
    const p2img = path.join(tempDir('hostd-lxc-p2img-'), 'p2.img');
    fs.closeSync(fs.openSync(p2img, 'w'));
    fs.truncateSync(p2img, 256 * 1024 * 1024);
    execFileSync('mkfs.ext4', ['-q', '-F', p2img]);
    p2mnt = tempDir('hostd-lxc-p2-');
    execFileSync('mount', ['-o', 'loop', p2img, p2mnt]);
    pools = { p1: tempDir('hostd-lxc-p1-'), p2: p2mnt };
  });
  after(async () => {
    await cleanupLxc();
    if (dataDir) {
      killContainers(dataDir);
      removeCgroupGroup(dataDir);
    }
    if (p2mnt) spawnSync('umount', ['-l', p2mnt]);
  });

  /** A daemon on the same data dir and pools; with `pause`, it stops at that step. */
  const boot = async (extra: Record<string, string> = {}) => {
    env = await lxcEnv({ dataDir, poolDirs: pools, env: { HOSTD_TEST_LXC_BOOT_ID: 'boot-A', ...extra } });
    return env;
  };
  const pausedAt = (step: string) => eventually(() => env.d.logs.find((l) => isPauseLine(l, `lxc.${step}`)), 60_000, `the pause at ${step}`);

  /** Records, container dirs, configs, work dirs and image dirs agree. */
  const consistent = async () => {
    const list = (await env.req('GET', '/lxc')).body.containers as Array<{ lxcid: number; storage_id: string; rootfs: { path: string } }>;
    const ls = (d: string) => (fs.existsSync(d) ? fs.readdirSync(d) : []);
    for (const [id, p] of Object.entries(pools)) {
      const dirs = ls(path.join(p, '.hostd-lxc/containers')).sort();
      expect(dirs, `containers on ${id}`).to.deep.equal(
        list
          .filter((c) => c.storage_id === id)
          .map((c) => String(c.lxcid))
          .sort(),
      );
      expect(ls(path.join(p, '.hostd-lxc/tmp')), `work dirs on ${id}`).to.deep.equal([]);
      const imgDir = path.join(p, '.hostd-lxc/images');
      for (const i of fs.existsSync(imgDir) ? fs.readdirSync(imgDir) : [])
        expect(fs.existsSync(path.join(imgDir, i, 'image.json')), `image ${i}`).to.equal(true);
    }
    for (const c of list) expect(fs.existsSync(c.rootfs.path), `rootfs of ${c.lxcid}`).to.equal(true);
    const confs = fs
      .readdirSync(path.join(dataDir, 'lxc'))
      .filter((n) => n.startsWith('svc-lxc-'))
      .sort();
    expect(confs).to.deep.equal(list.map((c) => `svc-lxc-${c.lxcid}`).sort());
    return list;
  };

  let base: number;

  it('sets up a stopped container', async () => {
    await boot();
    const r = await env.req('POST', '/lxc', { name: 'base', template: 'bb' });
    expect(r.status).to.equal(201);
    base = r.body.container.lxcid;
    await consistent();
  });

  it('killed during create: the half-made container is gone after restart', async () => {
    await env.d.stop();
    await boot({ HOSTD_TEST_PAUSE_AT: 'lxc.create.before_commit' });
    void env.req('POST', '/lxc', { name: 'doomed', template: 'bb', lxcid: 500 }).catch(() => undefined);
    await pausedAt('create.before_commit');
    expect(fs.existsSync(path.join(pools.p1, '.hostd-lxc/containers/500/rootfs/bin/busybox'))).to.equal(true);
    // While a create reads the image, it cannot be deleted or moved.
    const del = await env.req('DELETE', '/lxc/images/bb?storage_id=p1');
    expect(del.status).to.equal(409);
    expect(del.body).to.deep.equal({ error: "image 'bb' on storage 'p1' is in use by a container create in progress" });
    const mv = await env.req('POST', '/lxc/images/bb/move', { source_storage_id: 'p1', target_storage_id: 'p2' });
    expect(mv.status).to.equal(409);
    // The id is taken while its create runs.
    const dup = await env.req('POST', '/lxc', { name: 'other', template: 'bb', lxcid: 500 });
    expect(dup.status).to.equal(409);
    expect(dup.body).to.deep.equal({ error: 'lxcid 500 is taken' });
    await env.d.kill();
    await boot();
    const list = await consistent();
    expect(list.map((c) => c.lxcid)).to.deep.equal([base]);
    expect((await env.req('GET', '/lxc/500')).status).to.equal(404);
  });

  it('killed during clone: the source is intact, the clone is gone', async () => {
    await env.d.stop();
    await boot({ HOSTD_TEST_PAUSE_AT: 'lxc.clone.before_commit' });
    void env.req('POST', `/lxc/${base + 1}/clone`, { source_lxcid: base, name: 'doomed clone' }).catch(() => undefined);
    await pausedAt('clone.before_commit');
    await env.d.kill();
    await boot();
    const list = await consistent();
    expect(list.map((c) => c.lxcid)).to.deep.equal([base]);
  });

  it('killed during a move before its commit: the container stays where it was', async () => {
    await env.d.stop();
    await boot({ HOSTD_TEST_PAUSE_AT: 'lxc.move.copied' });
    const r = await env.req('POST', `/lxc/${base}/move`, { storage_id: 'p2' });
    expect(r.status).to.equal(200);
    await pausedAt('move.copied');
    expect(fs.existsSync(path.join(pools.p2, '.hostd-lxc/containers', String(base), 'rootfs/bin/busybox'))).to.equal(true);
    await env.d.kill();
    await boot();
    const list = await consistent();
    expect(list.find((c) => c.lxcid === base)!.storage_id).to.equal('p1');
    const t = await env.req('GET', `/tasks/${r.body.task.task_id}`);
    expect(t.body.task).to.include({ state: 'failed', error: 'interrupted by a daemon restart' });
  });

  it('killed during a move after its commit: the move is finished, the old copy removed', async () => {
    await env.d.stop();
    await boot({ HOSTD_TEST_PAUSE_AT: 'lxc.move.committed' });
    const r = await env.req('POST', `/lxc/${base}/move`, { storage_id: 'p2' });
    expect(r.status).to.equal(200);
    await pausedAt('move.committed');
    expect(fs.existsSync(path.join(pools.p1, '.hostd-lxc/containers', String(base)))).to.equal(true);
    await env.d.kill();
    await boot();
    const list = await consistent();
    expect(list.find((c) => c.lxcid === base)!.storage_id).to.equal('p2');
    expect((await env.req('POST', `/lxc/${base}/start`)).status).to.equal(200);
    expect((await env.req('POST', `/lxc/${base}/exec`, { command: 'echo moved' })).body.stdout).to.equal('moved\n');
    expect((await env.req('POST', `/lxc/${base}/stop`)).status).to.equal(200);
  });

  it('killed during a disk limit change: the old rootfs is kept', async () => {
    await env.d.stop();
    await boot({ HOSTD_TEST_PAUSE_AT: 'lxc.disk.copied' });
    void env.req('PATCH', `/lxc/${base}/disk`, { disk_size_bytes: 64 * 1024 * 1024 }).catch(() => undefined);
    await pausedAt('disk.copied');
    expect(fs.existsSync(path.join(pools.p2, '.hostd-lxc/containers', String(base), 'disk.img.new'))).to.equal(true);
    await env.d.kill();
    await boot();
    const list = await consistent();
    const c = (await env.req('GET', `/lxc/${base}`)).body.container;
    expect(c).to.include({ disk_size_bytes: 0 });
    expect(c.rootfs.kind).to.equal('dir');
    expect(fs.readdirSync(path.join(pools.p2, '.hostd-lxc/containers', String(base)))).to.deep.equal(['rootfs']);
    void list;
  });

  it('killed during template capture and image import: no image appears, no work dir stays', async () => {
    await env.d.stop();
    await boot({ HOSTD_TEST_PAUSE_AT: 'lxc.template.packed' });
    const r = await env.req('POST', `/lxc/${base}/template`, { image_id: 'half' });
    expect(r.status).to.equal(201);
    await pausedAt('template.packed');
    // One change at a time per container: a start during the capture is refused, naming it.
    const busy = await env.req('POST', `/lxc/${base}/start`);
    expect(busy.status).to.equal(409);
    expect(busy.body).to.deep.equal({ error: `container ${base} is busy: template capture in progress` });
    await env.d.kill();
    await boot({ HOSTD_TEST_PAUSE_AT: 'lxc.import.copied' });
    void hostctl(dataDir, ['lxc', 'image', 'import', env.image.rootfs, '--id', 'half2', '--no-wait']);
    await pausedAt('import.copied');
    await env.d.kill();
    await boot();
    await consistent();
    expect((await env.req('GET', '/lxc/images')).body.images.map((i: any) => i.image_id)).to.deep.equal(['bb']);
  });

  it('a daemon restart does not stop containers', async () => {
    expect((await env.req('POST', `/lxc/${base}/start`)).status).to.equal(200);
    const pid = initPid(dataDir, base);
    await env.d.kill();
    await boot();
    expect(lxcState(dataDir, base)).to.equal('RUNNING');
    expect(initPid(dataDir, base)).to.equal(pid);
    expect((await env.req('GET', `/lxc/${base}`)).body.container.state).to.equal('running');
    expect((await env.req('POST', `/lxc/${base}/stop`)).status).to.equal(200);
  });

  it('autostart containers start at host boot, not at a daemon restart', async () => {
    const r = await env.req('POST', '/lxc', { name: 'auto', template: 'bb', autostart: true });
    expect(r.status).to.equal(201);
    const auto = r.body.container.lxcid;
    // Same boot: a restart starts nothing (the user may have stopped it on purpose). Once the
    // daemon's autostart pass says it is done, whatever it started would run.
    await env.d.stop();
    await boot();
    await eventually(() => env.d.logs.some((l) => l.msg === AUTOSTART_DONE), 60_000, 'the autostart pass to end');
    expect(lxcState(dataDir, auto)).to.equal('STOPPED');
    // A new boot: autostart containers start; others stay stopped.
    await env.d.stop();
    await boot({ HOSTD_TEST_LXC_BOOT_ID: 'boot-B' });
    await eventually(() => lxcState(dataDir, auto) === 'RUNNING', 30_000, 'the autostart container to run');
    // LXC says RUNNING before the daemon's autostart has finished with the container (a stop then would be
    // refused as busy): wait until the API reports it running too.
    await eventually(
      async () => (await env.req('GET', `/lxc/${auto}`)).body.container?.state === 'running',
      30_000,
      'the API to report the autostart container running',
    );
    expect(lxcState(dataDir, base)).to.equal('STOPPED');
    expect((await env.req('POST', `/lxc/${auto}/stop`)).status).to.equal(200);
    await consistent();
  });
});
