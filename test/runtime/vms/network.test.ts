/**
 * Bridged networking: a VM on a bridge gets a tap on it while it runs. The
 * bridge is made by the test (no uplink, no address, so no traffic leaves it)
 * and removed after; the VM boots nothing (a blank disk).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { run } from '../../../daemon/lib/run.js';
import { eventually, tempDir } from '../../helpers/daemon.js';
import { fails, killGuests, requireVmsRuntime, ok, startVmsDaemon, succeeded, type VmsEnv } from '../../helpers/vms-fixture.js';

describe('vms bridged networking (QEMU)', function () {
  this.timeout(5 * 60_000);
  let e: VmsEnv;
  const bridge = `hvt${crypto.randomBytes(3).toString('hex')}`;
  let made = false;

  before(async function () {
    await requireVmsRuntime(this);
    await run('ip', ['link', 'add', 'name', bridge, 'type', 'bridge']);
    made = true;
    const root = tempDir('hostd-vms-net-');
    // VMs may join only the bridges the operator lists (docs/vms.md, "Networks").
    e = await startVmsDaemon({ root, extraYaml: `  allowed_bridges: [${bridge}, hvtmissing0]` });
    const blank = path.join(root, 'blank.qcow2');
    await run('qemu-img', ['create', '-q', '-f', 'qcow2', blank, '1G']);
    const r = await e.d.admin.request('POST', '/admin/vms/images/import', { file: blank, image_id: 'blank', min_memory_mb: 256 });
    await succeeded(e, r.body.task.task_id);
  });

  after(async function () {
    if (e) await killGuests(e.root);
    if (made) await run('ip', ['link', 'del', bridge]).catch(() => undefined);
  });

  it('puts the VM on the bridge through a tap while it runs, and refuses a missing bridge', async function () {
    await ok(e, 'POST', '/vms', { name: 'bridged', image_id: 'blank', vmid: 140, linked_clone: true, memory_mb: 256 }, 201);
    await fails(
      e,
      'POST',
      '/vms/140/cloud-init',
      { network_type: 'bridged', network_bridge: 'lo' },
      403,
      `bridge 'lo' is not one VMs may join (allowed: ${bridge}, hvtmissing0; the settings vms.bridge and vms.allowed_bridges list them)`,
    );
    const c = await ok(e, 'POST', '/vms/140/cloud-init', { network_type: 'bridged', network_bridge: bridge });
    expect(c.vm.network).to.include({ type: 'bridged', bridge, ssh_port: null });
    await ok(e, 'POST', '/vms/140/start', {});
    const ports = await eventually(
      () => {
        const p = fs.readdirSync(`/sys/class/net/${bridge}/brif`);
        return p.length ? p : undefined;
      },
      10_000,
      'a tap on the bridge',
    );
    expect(ports).to.have.length(1);
    const mac = fs.readFileSync(`/sys/class/net/${ports[0]}/address`, 'utf8').trim();
    expect(mac).to.match(/^[0-9a-f:]{17}$/);
    const conn = await ok(e, 'GET', '/vms/140/connection');
    expect(conn).to.include({ network_type: 'bridged', port: 22 });
    await ok(e, 'DELETE', '/vms/140');
    // QEMU's tap goes with it.
    await eventually(() => fs.readdirSync(`/sys/class/net/${bridge}/brif`).length === 0, 10_000, 'the tap to go');
    await ok(e, 'POST', '/vms', { name: 'nowhere', image_id: 'blank', vmid: 141, linked_clone: true, memory_mb: 256 }, 201);
    await ok(e, 'POST', '/vms/141/cloud-init', { network_type: 'bridged', network_bridge: 'hvtmissing0' });
    await fails(e, 'POST', '/vms/141/start', {}, 409, "bridge 'hvtmissing0' of VM 141 does not exist on this host");
    await ok(e, 'DELETE', '/vms/141');
  });
});
