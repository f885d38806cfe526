/**
 * The containment rules over a container's life: privileged containers only
 * with lxc.allow_privileged; mount points checked again at every start (a
 * folder renamed through the folders API since); and a host upgraded with
 * containers the rules now refuse (a privileged one, left running; a mount
 * into another domain's directory, as the old rule let through): nothing is
 * deleted, each is refused at its next start (and exec, and the thaw of a
 * frozen one) with a message naming the rule, and listed in host-status.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { tempDir } from '../../helpers/daemon.js';
import { cleanupLxc, lxcEnv, requireLxc, type LxcEnv } from '../../helpers/lxc-env.js';
import { MOUNT_RULE } from '../../../daemon/lxc/containment.js';
import { ctKey, type ContainerRecord } from '../../../daemon/lxc/records.js';
import { Store } from '../../../daemon/store/store.js';

const PRIV = (id: number) => `container ${id} is privileged and lxc.allow_privileged is false (a privileged container is root on the host)`;

describe('lxc runtime: containment rules, and containers made before them', function () {
  this.timeout(300_000);
  let env: LxcEnv;
  let root: string;
  let priv: number;

  before(async function () {
    await requireLxc(this);
    root = tempDir('hostd-lxc-root-');
    fs.mkdirSync(path.join(root, 'data'));
    env = await lxcEnv({ lxcYaml: `  allow_privileged: true\n  mount_roots: [${root}]` });
  });
  after(cleanupLxc);

  it('with lxc.allow_privileged a privileged container is made: no id map, root on the host; host-status says nothing confines it', async () => {
    const r = await env.req('POST', '/lxc', { name: 'priv', template: 'bb', privileged: true, nesting: true });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    priv = r.body.container.lxcid;
    expect(r.body.container).to.include({ privileged: true, nesting: true, idmap: null });
    expect(fs.statSync(path.join(r.body.container.rootfs.path, 'bin/busybox')).uid).to.equal(0);
    expect((await env.req('POST', `/lxc/${priv}/start`)).status).to.equal(200);
    const m = await env.req('POST', `/lxc/${priv}/exec`, { command: 'cat /proc/self/uid_map' });
    expect(m.body.stdout).to.match(/^\s*0\s+0\s+4294967295\s*$/m);
    const hs = (await env.req('GET', '/lxc/host-status')).body;
    expect(hs.allow_privileged).to.equal(true);
    expect(hs.violations).to.deep.equal([]);
    // Measured here: no AppArmor, no SELinux.
    expect(hs.lsm).to.deep.equal({
      apparmor: false,
      selinux: null,
      confines_containers: false,
      profile: 'unconfined',
      note: 'no security module confines containers here: unprivileged containers rely on their user namespace, dropped capabilities and seccomp; a privileged container is root on the host',
    });
  });

  it('a folder renamed through the folders API since create: start is 409 naming the mount and the rule; renamed back, it starts', async () => {
    const f = await env.folder('media');
    const c = await env.req('POST', '/lxc', {
      name: 'media-ct',
      template: 'bb',
      mount_points: [{ host_path: f.path, container_path: '/mnt/media', read_only: true }],
    });
    expect(c.status, JSON.stringify(c.body)).to.equal(201);
    const id = c.body.container.lxcid;
    expect((await env.req('PATCH', `/folders/${f.folder_id}`, { new_name: 'media2' })).status).to.equal(200);
    const s = await env.req('POST', `/lxc/${id}/start`);
    expect(s.status).to.equal(409);
    expect(s.body).to.deep.equal({ error: `container ${id} cannot start: mount point /mnt/media: its host path ${f.path} no longer exists: ${MOUNT_RULE}` });
    expect((await env.req('PATCH', `/folders/${f.folder_id}`, { new_name: 'media' })).status).to.equal(200);
    expect((await env.req('POST', `/lxc/${id}/start`)).status).to.equal(200);
    expect((await env.req('POST', `/lxc/${id}/stop`)).status).to.equal(200);
    // A directory that is not (or no longer) a managed folder is not shared storage.
    expect((await env.req('DELETE', `/folders/${f.folder_id}`)).status).to.equal(200);
    fs.mkdirSync(f.path);
    const again = await env.req('POST', `/lxc/${id}/start`);
    expect(again.status).to.equal(409);
    expect(again.body).to.deep.equal({
      error: `container ${id} cannot start: mount point /mnt/media: its host path ${f.path} is neither a managed folder nor inside one, nor inside a configured root: ${MOUNT_RULE}`,
    });
    fs.rmdirSync(f.path);
    expect((await env.req('DELETE', `/lxc/${id}`)).status).to.equal(200);
  });

  it('after an upgrade: nothing deleted, each container that breaks a rule is refused at start and exec with a message naming it, and listed in host-status', async () => {
    const pool = env.pools.p1;
    const m = await env.req('POST', '/lxc', {
      name: 'mounted',
      template: 'bb',
      mount_points: [{ host_path: path.join(root, 'data'), container_path: '/mnt/data', read_only: true }],
    });
    expect(m.status, JSON.stringify(m.body)).to.equal(201);
    const mounted = m.body.container.lxcid;
    const p = await env.req('POST', '/lxc', { name: 'plain', template: 'bb' });
    const plain = p.body.container.lxcid;
    const dataDir = env.d.dataDir;
    await env.d.stop();

    // The record as the old rule let it be: any directory under a pool, here another domain's.
    const apps = path.join(pool, '.hostd-apps', 'app-1');
    fs.mkdirSync(apps, { recursive: true });
    const store = await Store.open(path.join(dataDir, 'db'));
    try {
      const sub = store.sub<ContainerRecord>('lxc_containers');
      const rec = (await sub.get(ctKey(mounted)))!;
      rec.mount_points = [{ host_path: fs.realpathSync(path.join(pool, '.hostd-apps')), container_path: '/mnt/apps', read_only: true }];
      await sub.put(ctKey(mounted), rec);
    } finally {
      await store.close();
    }

    // The upgraded host: the setting off (the default), no mount roots.
    env = await lxcEnv({ dataDir, poolDirs: env.pools, imageId: null });
    const appsReal = fs.realpathSync(path.join(pool, '.hostd-apps'));
    const mountMsg = `mount point /mnt/apps: its host path ${appsReal} is inside a directory hostd keeps for itself ('.hostd-apps'): ${MOUNT_RULE}`;
    const hs = (await env.req('GET', '/lxc/host-status')).body;
    expect(hs.allow_privileged).to.equal(false);
    expect(hs.violations).to.deep.equal([
      { lxcid: priv, name: 'priv', rule: 'lxc.allow_privileged', message: PRIV(priv) },
      { lxcid: mounted, name: 'mounted', rule: 'mount_points', container_path: '/mnt/apps', message: mountMsg },
    ]);
    const list = (await env.req('GET', '/lxc')).body.containers;
    expect(list.map((c: { lxcid: number; state: string }) => [c.lxcid, c.state])).to.deep.equal([
      [priv, 'running'],
      [mounted, 'stopped'],
      [plain, 'stopped'],
    ]);

    // The privileged one outlived the daemon: no more commands in it, and it may only be stopped and deleted.
    const ex = await env.req('POST', `/lxc/${priv}/exec`, { command: 'id' });
    expect(ex.status).to.equal(409);
    expect(ex.body).to.deep.equal({ error: `container ${priv} cannot run commands: ${PRIV(priv)}` });
    const nest = await env.req('PATCH', `/lxc/${priv}`, { nesting: false });
    expect(nest.status).to.equal(200);
    const nestOn = await env.req('PATCH', `/lxc/${priv}`, { nesting: true });
    expect(nestOn.status).to.equal(403);
    expect(nestOn.body).to.deep.equal({
      error: `argument 'nesting' in privileged container ${priv}: privileged containers are turned off on this host (lxc.allow_privileged is false); a privileged container is root on the host`,
    });
    const cl = await env.req('POST', '/lxc/900/clone', { source_lxcid: priv, name: 'priv-copy' });
    expect(cl.status).to.equal(403);
    expect(cl.body).to.deep.equal({
      error: `container ${priv} is privileged, and so would be its clone: privileged containers are turned off on this host (lxc.allow_privileged is false); a privileged container is root on the host`,
    });
    const rs = await env.req('POST', `/lxc/${priv}/restart`);
    expect(rs.status).to.equal(409);
    expect(rs.body).to.deep.equal({ error: `container ${priv} cannot restart: ${PRIV(priv)}` });
    expect((await env.req('GET', `/lxc/${priv}`)).body.container.state, 'a refused restart does not stop it').to.equal('running');
    // Frozen, it is not let run again: neither a start (which thaws a frozen container) nor an unfreeze.
    expect((await env.req('POST', `/lxc/${priv}/freeze`)).status).to.equal(200);
    const sf = await env.req('POST', `/lxc/${priv}/start`);
    expect(sf.status).to.equal(409);
    expect(sf.body).to.deep.equal({ error: `container ${priv} cannot start: ${PRIV(priv)}` });
    const uf = await env.req('POST', `/lxc/${priv}/unfreeze`);
    expect(uf.status).to.equal(409);
    expect(uf.body).to.deep.equal({ error: `container ${priv} cannot unfreeze: ${PRIV(priv)}` });
    expect((await env.req('GET', `/lxc/${priv}`)).body.container.state, 'still frozen').to.equal('frozen');
    expect((await env.req('POST', `/lxc/${priv}/stop`)).status).to.equal(200);
    const st = await env.req('POST', `/lxc/${priv}/start`);
    expect(st.status).to.equal(409);
    expect(st.body).to.deep.equal({ error: `container ${priv} cannot start: ${PRIV(priv)}` });

    const sm = await env.req('POST', `/lxc/${mounted}/start`);
    expect(sm.status).to.equal(409);
    expect(sm.body).to.deep.equal({ error: `container ${mounted} cannot start: ${mountMsg}` });
    const cm = await env.req('POST', '/lxc/901/clone', { source_lxcid: mounted, name: 'mounted-copy' });
    expect(cm.status).to.equal(409);
    expect(cm.body).to.deep.equal({ error: `container ${mounted} cannot be cloned (the clone would carry its mount points): ${mountMsg}` });

    // Nothing was deleted, and a container that breaks no rule is untouched.
    for (const id of [priv, mounted, plain]) expect(fs.existsSync(path.join(pool, '.hostd-lxc/containers', String(id), 'rootfs')), String(id)).to.equal(true);
    expect((await env.req('POST', `/lxc/${plain}/start`)).status).to.equal(200);
    expect((await env.req('POST', `/lxc/${plain}/exec`, { command: 'true' })).body.exit_code).to.equal(0);
    expect((await env.req('POST', `/lxc/${plain}/stop`)).status).to.equal(200);

    // Deleting is the way out; then host-status has nothing to say.
    for (const id of [priv, mounted, plain]) expect((await env.req('DELETE', `/lxc/${id}`)).status).to.equal(200);
    expect((await env.req('GET', '/lxc/host-status')).body.violations).to.deep.equal([]);
  });
});
