/**
 * POST /templates against real QEMU: the base image is not on the host, so
 * the build downloads it from the catalog (the test guest, served from a
 * loopback HTTP server), boots a build VM with the user-data verbatim, waits
 * for it to power itself off, and keeps its disk as a labelled template.
 */
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { guestImage, readGuestFile } from '../../helpers/vms-guest.js';
import { tempDir } from '../../helpers/daemon.js';
import { cachedSha256, fails, FileServer, killGuests, requireVmsRuntime, ok, startVmsDaemon, succeeded, type VmsEnv } from '../../helpers/vms-fixture.js';

const USER_DATA = `#cloud-config
write_files:
  - path: /etc/hostd-built
    content: |
      built by a template
power_state:
  mode: poweroff
  condition: true
`;

describe('vms template builds (QEMU)', function () {
  this.timeout(40 * 60_000);
  let e: VmsEnv;
  const srv = new FileServer();

  before(async function () {
    await requireVmsRuntime(this);
    const image = await guestImage();
    await srv.start();
    srv.files.set('/guest.qcow2', image);
    const dir = tempDir('hostd-vms-tpl-');
    const catalog = path.join(dir, 'catalog.json');
    fs.writeFileSync(
      catalog,
      JSON.stringify([
        {
          id: 'guest',
          name: 'Test guest',
          url: srv.url('/guest.qcow2'),
          checksum: `sha256:${await cachedSha256(image)}`,
          format: 'qcow2',
          min_memory_mb: 512,
          default_user: 'debian',
        },
      ]),
    );
    e = await startVmsDaemon({ extraYaml: `  catalog_file: ${catalog}\n  template_build_timeout_seconds: 1500` });
  });

  after(async function () {
    if (e) await killGuests(e.root);
    await srv.stop().catch(() => undefined);
  });

  it('refuses unknown bases and reports unknown builds', async function () {
    await fails(
      e,
      'POST',
      '/templates',
      { base_image_id: 'nope', name: 'x' },
      404,
      "image 'nope' not found (not on this host and not in the download catalog)",
    );
    await fails(
      e,
      'POST',
      '/templates',
      { base_image_id: 'guest', name: '***' },
      400,
      "argument 'name' gives no usable image id (letters, digits, '.', '_' or '-')",
    );
    await fails(e, 'GET', '/templates/task_0000', undefined, 404, "template build 'task_0000' not found");
  });

  it('downloads the missing base, builds from user-data until the guest powers off, and keeps labels', async function () {
    const r = await ok(e, 'POST', '/templates', { base_image_id: 'guest', name: 'Web Base', user_data: USER_DATA, labels: { role: 'web', tier: 'base' } }, 201);
    expect(r.image_id).to.equal('web-base');
    expect(r.task).to.include({ kind: 'templates.template.build', resource: 'vms/images/web-base' });
    await fails(e, 'POST', '/templates', { base_image_id: 'guest', name: 'web base' }, 409, "image 'web-base' already exists");
    const during = await ok(e, 'GET', `/templates/${r.task.task_id}`);
    expect(during.task.task_id).to.equal(r.task.task_id);
    expect(during.template).to.equal(null);
    // The build VM is hidden from /vms.
    expect((await ok(e, 'GET', '/vms')).vms).to.deep.equal([]);
    await succeeded(e, r.task.task_id, 30 * 60_000);
    const done = await ok(e, 'GET', `/templates/${r.task.task_id}`);
    expect(done.task.state).to.equal('succeeded');
    expect(done.template).to.include({ image_id: 'web-base', kind: 'template', name: 'Web Base', default_user: 'debian' });
    expect(done.template.labels).to.deep.equal({ role: 'web', tier: 'base' });
    expect(done.template.source).to.deep.include({ type: 'build', base_image_id: 'guest' });
    const images = (await ok(e, 'GET', '/vms/images')).images.map((i: any) => [i.image_id, i.kind]).sort();
    expect(images).to.deep.equal([
      ['guest', 'image'],
      ['web-base', 'template'],
    ]);
    expect(await readGuestFile(path.join(e.pools.p1, '.vms/images/web-base.qcow2'), '/etc/hostd-built')).to.equal('built by a template\n');
    const logs = await ok(e, 'GET', `/tasks/${r.task.task_id}/logs`);
    expect(logs.lines.map((l: any) => l.text).join('\n')).to.match(/downloading[\s\S]*powered off after \d+ s/);
    // The build VM and its files are gone.
    expect(fs.readdirSync(path.join(e.pools.p1, '.vms')).filter((n) => n.startsWith('vm-'))).to.deep.equal([]);
    const alloc = await ok(e, 'GET', '/system/allocation');
    expect(alloc.allocated.vms.running).to.equal(0);
  });
});
