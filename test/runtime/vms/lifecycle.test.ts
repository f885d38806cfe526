/**
 * VMs against real QEMU (TCG where the host has no usable KVM), through the
 * real daemon. One guest (VM 200) is cold-booted and shared by the tests in
 * order; the others (VMs 201 and 203) come from warm states of it, so that
 * the suite pays for one cold boot. Every test cleans what it made; the after hook
 * kills any QEMU the data dir started, also when hostd was killed.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { expect } from 'chai';
import { guestImage, readGuestFile } from '../../helpers/vms-guest.js';
import {
  api,
  fails,
  killGuests,
  requireVmsRuntime,
  ok,
  qemuGuests,
  qemuPids,
  sh,
  startVmsDaemon,
  succeeded,
  cloudInitDone,
  untilReady,
  type VmsEnv,
} from '../../helpers/vms-fixture.js';
import { eventually, hostctl } from '../../helpers/daemon.js';

const KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO5mh7T5Kx2s2n2xvq1C9r5O8kq1v9y2m3Lh0R3tE1aB alice@test';
const BOOT_S = 900;

describe('vms runtime (QEMU)', function () {
  this.timeout(30 * 60_000);
  let e: VmsEnv;
  let image: string;
  let imageMachineId: string;
  let imageHostKey: string;
  let bootId: string;
  let sleeper = 0;
  let warmId = '';

  before(async function () {
    await requireVmsRuntime(this);
    image = await guestImage();
    imageMachineId = (await readGuestFile(image, '/etc/machine-id'))!.trim();
    imageHostKey = (await readGuestFile(image, '/etc/ssh/ssh_host_ed25519_key.pub'))!.trim();
    e = await startVmsDaemon({ extraYaml: '' });
    bootId = path.join(e.root, 'boot_id');
    fs.writeFileSync(bootId, 'boot-1\n');
    // Restart with the boot id file (the autostart test changes it); the first start records it.
    await e.d.stop();
    e = { ...(await startVmsDaemon({ root: e.root, env: { HOSTD_VMS_BOOT_ID_FILE: bootId } })) };
  });

  after(async function () {
    if (e) await killGuests(e.root);
  });

  const restart = async (env: Record<string, string> = {}) => {
    await e.d.kill();
    e = await startVmsDaemon({ root: e.root, env: { HOSTD_VMS_BOOT_ID_FILE: bootId, ...env } });
  };

  it('reports the runtime: accelerator with its reason, QEMU version, every program', async function () {
    const h = await ok(e, 'GET', '/vms/host-status');
    expect(h.available).to.equal(true);
    expect(['kvm', 'tcg']).to.include(h.accelerator);
    if (h.accelerator === 'tcg') expect(h.accelerator_reason).to.be.a('string').and.match(/TCG/);
    expect(h.qemu_version).to.match(/^\d+\.\d+/);
    expect(h.missing).to.deep.equal([]);
    expect(h.programs.map((p: any) => p.name)).to.include.members(['qemu-system-x86_64', 'qemu-img', 'qemu-storage-daemon', 'debugfs', 'genisoimage']);
    for (const p of h.programs) expect(Object.keys(p).sort()).to.deep.equal(['available', 'name', 'reason', 'version']);
  });

  it('imports a qcow2 with hostctl (a task with a progress bar) and lists it with its minimums', async function () {
    const r = await hostctl(e.d.dataDir, ['vm', 'image', 'import', image, '--id', 'deb12', '--default-user', 'debian']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/task task_[0-9a-f]+ succeeded/);
    expect(r.stderr).to.match(/100%/);
    const list = await ok(e, 'GET', '/vms/images');
    const img = list.images.find((i: any) => i.image_id === 'deb12');
    expect(img).to.include({ kind: 'image', storage_id: 'p1', format: 'qcow2', min_cpu_cores: 1, min_memory_mb: 512, default_user: 'debian' });
    expect(img.min_disk_gb).to.equal(Math.ceil(img.virtual_size_bytes / 1024 ** 3));
    expect(img.linked_clones).to.deep.equal([]);
    expect(fs.existsSync(path.join(e.pools.p1, '.vms/images/deb12.qcow2'))).to.equal(true);
    const again = await hostctl(e.d.dataDir, ['vm', 'image', 'import', image, '--id', 'deb12']);
    expect(again.code).to.equal(1);
    expect(again.stderr).to.equal("hostctl: image 'deb12' already exists\n");
  });

  it('refuses bad creates with 400/404 naming the argument or resource', async function () {
    await fails(e, 'POST', '/vms', { name: 'x', image_id: 'nope' }, 404, "image 'nope' not found");
    await fails(
      e,
      'POST',
      '/vms',
      { name: 'x', image_id: 'deb12', memory_mb: 256 },
      400,
      "argument 'memory_mb' (256) is below the minimum of image 'deb12' (512)",
    );
    await fails(
      e,
      'POST',
      '/vms',
      { name: 'x', image_id: 'deb12', disk_size_gb: 1 },
      400,
      /^argument 'disk_size_gb' \(1\) is below the minimum of image 'deb12' \(\d+ GiB\)/,
    );
    await fails(e, 'POST', '/vms', { name: 'x', image_id: 'deb12', storage_id: 'p9' }, 404, "storage pool 'p9' not found (argument 'storage_id')");
    await fails(
      e,
      'POST',
      '/vms',
      { name: 'x', image_id: 'deb12', ssh_public_key: 'not a key' },
      400,
      "argument 'ssh_public_key' must be one OpenSSH public key line (ssh-ed25519 AAAA... comment)",
    );
    await fails(
      e,
      'POST',
      '/vms',
      { name: 'x', image_id: 'deb12', username: 'Root' },
      400,
      "argument 'username' must be a Linux user name (lowercase letter or _, then up to 31 of [a-z0-9_-])",
    );
    await fails(
      e,
      'POST',
      '/vms',
      { name: '  ', image_id: 'deb12' },
      400,
      "argument 'name' must be a name of 1-128 characters without control characters, '/' or '\\', with no space at either end, not '.' or '..'",
    );
    await fails(
      e,
      'POST',
      '/vms',
      { name: 'x', image_id: 'deb12', ip_address: '10.1.2.3/40' },
      400,
      "argument 'ip_address' must be an IPv4 or IPv6 address with an optional /prefix (1-32 or 1-128), or empty",
    );
    await fails(e, 'GET', '/vms/999', undefined, 404, 'VM 999 not found');
    expect((await ok(e, 'GET', '/vms')).vms).to.deep.equal([]);
  });

  it('creates a linked clone at once, with image minimums for omitted values; the image is then pinned', async function () {
    const r = await ok(
      e,
      'POST',
      '/vms',
      {
        name: 'Alpha One',
        image_id: 'deb12',
        vmid: 200,
        username: 'alice',
        ssh_public_key: KEY,
        linked_clone: true,
        seed_data: 'seed-of-alpha\n',
        dns_servers: ['10.0.2.3'],
      },
      201,
    );
    expect(r.task).to.equal(null);
    expect(r.vm).to.include({
      vmid: 200,
      name: 'Alpha One',
      state: 'stopped',
      image_id: 'deb12',
      linked_clone: true,
      cpu_cores: 1,
      memory_mb: 512,
      storage_id: 'p1',
    });
    expect(r.vm.identity).to.deep.equal({ method: null, pending: true, skip_rekey: false, seed_written: false });
    expect(r.vm.cloud_init).to.include({ username: 'alice', ssh_public_key: KEY, password_set: false, network_type: 'user' });
    await fails(e, 'POST', '/vms', { name: 'dup', image_id: 'deb12', vmid: 200 }, 409, 'vmid 200 is taken');
    const img = (await ok(e, 'GET', '/vms/images')).images.find((i: any) => i.image_id === 'deb12');
    expect(img.linked_clones).to.deep.equal([200]);
    await fails(e, 'DELETE', '/vms/images/deb12', undefined, 409, "image 'deb12' cannot be deleted: linked clones VM 200 depend on it");
    await fails(
      e,
      'POST',
      '/vms/images/deb12/move',
      { source_storage_id: 'p1', target_storage_id: 'p2' },
      409,
      "image 'deb12' cannot be moved: linked clones VM 200 depend on it",
    );
    // Omitted vmid: the first free one from vmid_min (100). Without linked_clone: a full copy, as a task.
    const b = await ok(e, 'POST', '/vms', { name: 'beta', image_id: 'deb12' }, 201);
    expect(b.vm).to.include({ vmid: 100, state: 'creating', linked_clone: false, disk_size_gb: img.min_disk_gb });
    expect(b.task).to.include({ kind: 'vms.vm.create', resource: 'vms/100' });
    await fails(e, 'POST', '/vms/100/start', {}, 409, /^VM 100 is (still being created \(task task_[0-9a-f]+\)|busy: create in progress)$/);
    await succeeded(e, b.task.task_id);
    expect((await ok(e, 'GET', '/vms/100')).vm).to.include({ state: 'stopped', task_id: null });
    expect((await ok(e, 'GET', '/vms/images')).images.find((i: any) => i.image_id === 'deb12').linked_clones).to.deep.equal([200]);
    await fails(e, 'POST', '/vms/100/exec', { command: 'true' }, 409, 'VM 100 is stopped: exec needs a running VM');
    await fails(e, 'POST', '/vms/100/resume', {}, 409, 'VM 100 is stopped, not suspended: start it instead');
    await fails(e, 'POST', '/vms/100/suspend', {}, 409, 'VM 100 is stopped: only a running VM can be suspended');
    await fails(e, 'POST', '/vms/100/warm-states', {}, 409, 'VM 100 is stopped: only a running VM can be saved as a warm state');
    const w = await ok(e, 'POST', '/vms/100/wait-ready', { timeout_seconds: 0 });
    expect(w).to.include({ vmid: 100, ready: false, timed_out: true, state: 'stopped', reason: 'the VM is stopped' });
    await ok(e, 'DELETE', '/vms/100');
  });

  it('starts (idempotently) with the identity written before first boot, and answers wait-ready', async function () {
    const s = await ok(e, 'POST', '/vms/200/start', {});
    expect(s.already_running).to.equal(false);
    expect(s.vm.state).to.equal('running');
    expect(s.vm.identity).to.deep.equal({ method: 'offline', pending: false, skip_rekey: false, seed_written: true });
    expect(s.vm.network.ssh_port).to.be.a('number');
    const again = await ok(e, 'POST', '/vms/200/start', {});
    expect(again.already_running).to.equal(true);
    await fails(e, 'PATCH', '/vms/200', { cpu_cores: 2 }, 409, 'VM 200 is running: stop it before changing CPU, memory or autostart');
    await fails(e, 'POST', '/vms/202/clone', { source_vmid: 200, name: 'c' }, 409, 'source VM 200 is running: clone needs a stopped VM');
    await fails(
      e,
      'POST',
      '/vms/200/template',
      {},
      409,
      "VM 200 is running: stop it before capturing a template (a running or suspended guest's disk is not consistent)",
    );
    await untilReady(e, 200, BOOT_S);
    const w = await ok(e, 'POST', '/vms/200/wait-ready', { timeout_seconds: 60 });
    expect(w).to.include({ vmid: 200, ready: true, timed_out: false, state: 'running', reason: null });
  });

  it('runs commands through the guest agent: exit code, stdout, stderr, timeout', async function () {
    const r = await ok(e, 'POST', '/vms/200/exec', { command: 'echo out; echo err >&2; exit 3' });
    expect(r).to.include({ vmid: 200, exit_code: 3, stdout: 'out\n', stderr: 'err\n', timed_out: false, truncated: false });
    const t = await ok(e, 'POST', '/vms/200/exec', { command: 'sleep 60', timeout_seconds: 1 });
    expect(t).to.include({ exit_code: null, timed_out: true });
    await fails(e, 'POST', '/vms/200/exec', { command: ' ' }, 400, "argument 'command' must not be empty");
    await fails(e, 'POST', '/vms/200/exec', { command: 'true', timeout_seconds: 0 }, 400, "argument 'timeout_seconds' must be 1-86400");
  });

  it('gave the clone its own identity: seed, hostname, machine-id and SSH host keys; cloud-init made the user', async function () {
    expect(await sh(e, 200, 'cat /etc/svc/seed')).to.equal('seed-of-alpha\n');
    expect(await sh(e, 200, 'stat -c %a:%U /etc/svc/seed')).to.equal('600:root\n');
    expect((await sh(e, 200, 'hostname')).trim()).to.equal('alpha-one');
    const mid = (await sh(e, 200, 'cat /etc/machine-id')).trim();
    expect(mid).to.match(/^[0-9a-f]{32}$/);
    expect(mid).to.not.equal(imageMachineId);
    // cloud-init's user and key (its later stages run after the agent answers)
    await cloudInitDone(e, 200, BOOT_S);
    expect((await sh(e, 200, 'id -un alice')).trim()).to.equal('alice');
    expect(await sh(e, 200, 'cat /home/alice/.ssh/authorized_keys')).to.include(KEY);
    expect((await sh(e, 200, 'sudo -n -u alice sudo -n id -u')).trim()).to.equal('0');
    const key = (
      await sh(e, 200, 'for i in $(seq 120); do [ -s /etc/ssh/ssh_host_ed25519_key.pub ] && break; sleep 1; done; cat /etc/ssh/ssh_host_ed25519_key.pub')
    ).trim();
    expect(key.split(' ')[1]).to.not.equal(imageHostKey.split(' ')[1]);
    expect(await sh(e, 200, 'grep -c 10.0.2.3 /etc/resolv.conf || true')).to.not.equal('');
  });

  it('reports its address, and SSH through the loopback port forward', async function () {
    const ip = await ok(e, 'POST', '/vms/200/wait-ip', { timeout_seconds: 120 });
    expect(ip.timed_out).to.equal(false);
    expect(ip.ip).to.match(/^\d+\.\d+\.\d+\.\d+$/);
    expect(ip.addresses.map((a: any) => a.address)).to.include(ip.ip);
    const c = await ok(e, 'GET', '/vms/200/connection');
    expect(c).to.include({ vmid: 200, username: 'alice', host: '127.0.0.1', network_type: 'user', key_auth: true, ssh_enabled: true });
    expect(c.command).to.equal(`ssh -p ${c.port} alice@127.0.0.1`);
    const banner = await eventually(
      async () => {
        const b = await new Promise<string>((resolve) => {
          const s = net.createConnection({ host: '127.0.0.1', port: c.port });
          let got = '';
          s.setTimeout(5000, () => s.destroy());
          s.on('data', (d) => {
            got += d.toString();
            if (got.includes('\n')) s.destroy();
          });
          s.on('close', () => resolve(got));
          s.on('error', () => resolve(''));
        });
        return b.startsWith('SSH-2.0-') ? b : undefined;
      },
      300_000,
      'the guest sshd behind the port forward',
    );
    expect(banner).to.match(/^SSH-2\.0-OpenSSH/);
  });

  it('counts the running VM in capacity and in /system/allocation', async function () {
    const cap = await ok(e, 'GET', '/vms/capacity');
    expect(cap.running).to.deep.equal({ vms: 1, cpu_cores: 1, memory_mb: 512 });
    expect(cap.host.memory_mb).to.be.greaterThan(0);
    expect(cap.can_run_another).to.be.a('boolean');
    const alloc = await ok(e, 'GET', '/system/allocation');
    expect(alloc.allocated.vms).to.deep.equal({ count: 1, running: 1 });
    expect(alloc.running.memory_mb).to.be.at.least(512);
  });

  it('hot-plugs a disk, grows it live (only grows), and hot-unplugs it', async function () {
    await fails(e, 'POST', '/vms/200/disks', { size_gb: 0 }, 400, "argument 'size_gb' must be at least 1");
    const a = await ok(e, 'POST', '/vms/200/disks', { size_gb: 1 }, 201);
    expect(a).to.deep.equal({ vmid: 200, disk: { disk_id: 'd1', size_gb: 1 }, hotplugged: true });
    const size = async () =>
      Number((await sh(e, 200, 'for i in $(seq 60); do [ -e /sys/block/vdb ] && break; sleep 1; done; cat /sys/block/vdb/size')).trim()) * 512;
    expect(await size()).to.equal(1024 ** 3);
    await fails(e, 'POST', '/vms/200/warm-states', {}, 409, 'VM 200 has additional disks (d1): warm states cover VMs with only a root disk');
    await fails(e, 'PATCH', '/vms/200/disks/d1', { size_gb: 1 }, 400, "argument 'size_gb' (1) must be larger than disk d1's current 1 GiB: disks only grow");
    await fails(e, 'PATCH', '/vms/200/disks/d9', { size_gb: 3 }, 404, "VM 200 has no disk 'd9'");
    const g = await ok(e, 'PATCH', '/vms/200/disks/d1', { size_gb: 2 });
    expect(g).to.deep.equal({ vmid: 200, disk: { disk_id: 'd1', size_gb: 2 }, live: true });
    expect(await eventually(async () => ((await size()) === 2 * 1024 ** 3 ? true : undefined), 60_000, 'the guest to see 2 GiB')).to.equal(true);
    expect((await ok(e, 'GET', '/vms/200')).vm.disks).to.deep.equal([{ disk_id: 'd1', size_gb: 2 }]);
    const del = await ok(e, 'DELETE', '/vms/200/disks/d1');
    expect(del).to.deep.equal({ vmid: 200, deleted: { disk_id: 'd1', size_gb: 2 } });
    expect((await sh(e, 200, '[ -e /sys/block/vdb ] && echo present || echo gone')).trim()).to.equal('gone');
    expect(fs.existsSync(path.join(e.pools.p1, '.vms/vm-200/disk-d1.qcow2'))).to.equal(false);
  });

  it('keeps a guest process alive across suspend and resume, both idempotent', async function () {
    sleeper = Number((await sh(e, 200, 'setsid sleep 100000 >/dev/null 2>&1 </dev/null & echo $!')).trim());
    const s = await ok(e, 'POST', '/vms/200/suspend', {});
    expect(s.vm.state).to.equal('suspended');
    expect(s.already_suspended).to.equal(false);
    expect(s.saved_bytes).to.be.greaterThan(0);
    expect(qemuPids(e.root)).to.deep.equal([]);
    expect((await ok(e, 'POST', '/vms/200/suspend', {})).already_suspended).to.equal(true);
    await fails(e, 'POST', '/vms/200/exec', { command: 'true' }, 409, 'VM 200 is suspended: exec needs a running VM');
    await fails(e, 'PATCH', '/vms/200', { memory_mb: 1024 }, 409, 'VM 200 is suspended: stop it before changing CPU, memory or autostart');
    const r = await ok(e, 'POST', '/vms/200/resume', {});
    expect(r.vm.state).to.equal('running');
    expect(r.already_running).to.equal(false);
    expect(fs.existsSync(path.join(e.pools.p1, '.vms/vm-200/suspend.state'))).to.equal(false);
    expect((await ok(e, 'POST', '/vms/200/resume', {})).already_running).to.equal(true);
    expect((await sh(e, 200, `kill -0 ${sleeper} && echo alive`)).trim()).to.equal('alive');
  });

  it('saves a warm state while the VM runs on, and resumes a new VM from it on a linked clone', async function () {
    await sh(e, 200, 'echo before > /root/marker; sync');
    const t = await ok(e, 'POST', '/vms/200/warm-states', { name: 'alpha warm' }, 201);
    expect(t.warm_state_id).to.match(/^ws-[0-9a-f]{12}$/);
    warmId = t.warm_state_id;
    await succeeded(e, t.task.task_id);
    // The save asked the guest whether its first boot (systemd's start-up jobs, cloud-init) was over before it saved anything.
    const saveLog = (await ok(e, 'GET', `/tasks/${t.task.task_id}/logs`)).lines.map((l: any) => l.text).join('\n');
    expect(saveLog).to.match(/waiting for the guest's first boot to finish \(systemd's start-up jobs, cloud-init\)\n[\s\S]*saving guest memory/);
    expect((await ok(e, 'GET', '/vms/200')).vm.state).to.equal('running');
    await sh(e, 200, 'echo after > /root/marker; sync');
    const list = await ok(e, 'GET', '/vms/warm-states');
    expect(list.warm_states).to.have.length(1);
    expect(list.warm_states[0]).to.include({ id: warmId, name: 'alpha warm', vmid: 200, image_id: 'deb12', memory_mb: 512, network_type: 'user' });
    expect(list.warm_states[0].dependents).to.deep.equal([]);
    await fails(e, 'POST', `/vms/warm-states/ws-000000000000`, { name: 'x' }, 404, "warm state 'ws-000000000000' not found");
    // A wait-ready asked while the restore still sets the identity answers once the identity is in place:
    // the first command after it sees the clone's own hostname and machine-id, not the saved guest's.
    const restoring = ok(e, 'POST', `/vms/warm-states/${warmId}`, { name: 'Warm Bee', vmid: 201 });
    await eventually(async () => (await api(e, 'GET', '/vms/201')).status === 200, 300_000, 'VM 201 to be recorded');
    expect((await ok(e, 'POST', '/vms/201/wait-ready', { timeout_seconds: 120 })).ready).to.equal(true);
    expect((await sh(e, 201, 'hostname; cat /etc/hostname')).split('\n')).to.deep.equal(['warm-bee', 'warm-bee', '']);
    const r = await restoring;
    expect(r.vm).to.include({ vmid: 201, state: 'running', linked_clone: true, warm_state_id: warmId });
    expect(r.identity).to.deep.equal({ applied: true, reason: null });
    expect(r.resume_ms).to.be.a('number');
    expect((await ok(e, 'POST', '/vms/201/wait-ready', { timeout_seconds: 120 })).ready).to.equal(true);
    // The clone has the disk and memory of the instant of the save, and its own identity; nothing of the
    // saved guest's first boot runs on in it.
    expect(await sh(e, 201, 'cloud-init status')).to.match(/^status: done\n/);
    expect(await sh(e, 201, 'cat /root/marker')).to.equal('before\n');
    expect(await sh(e, 200, 'cat /root/marker')).to.equal('after\n');
    expect((await sh(e, 201, `kill -0 ${sleeper} && echo alive`)).trim()).to.equal('alive');
    expect((await sh(e, 201, 'hostname')).trim()).to.equal('warm-bee');
    expect((await sh(e, 201, 'cat /etc/machine-id')).trim()).to.not.equal((await sh(e, 200, 'cat /etc/machine-id')).trim());
    await fails(e, 'DELETE', `/vms/warm-states/${warmId}`, undefined, 409, `warm state '${warmId}' is the base of VMs 201: delete them first`);
    const alloc = await ok(e, 'GET', '/system/allocation');
    expect(alloc.allocated.vms).to.deep.equal({ count: 2, running: 2 });
  });

  it('keeps VMs running across a hostd crash and finds them again', async function () {
    const pids = qemuPids(e.root).sort();
    expect(pids).to.have.length(2);
    await restart();
    expect(qemuPids(e.root).sort()).to.deep.equal(pids);
    expect((await ok(e, 'GET', '/vms/200')).vm.state).to.equal('running');
    expect((await sh(e, 201, 'echo ok')).trim()).to.equal('ok');
  });

  it('deletes a running VM by hard-stopping it; then its warm state can go', async function () {
    const d = await ok(e, 'DELETE', '/vms/201');
    expect(d.was_running).to.equal(true);
    expect(d.deleted.vmid).to.equal(201);
    expect(fs.existsSync(path.join(e.pools.p1, '.vms/vm-201'))).to.equal(false);
    await fails(e, 'GET', '/vms/201', undefined, 404, 'VM 201 not found');
    const w = await ok(e, 'DELETE', `/vms/warm-states/${warmId}`);
    expect(w.deleted.id).to.equal(warmId);
    expect((await ok(e, 'GET', '/vms/warm-states')).warm_states).to.deep.equal([]);
    // VM 200 still runs on its own layers (the frozen one was shared by a hard link).
    expect(await sh(e, 200, 'cat /root/marker')).to.equal('after\n');
  });

  it('stops a guest that ignores the ACPI request after timeout_seconds, and powers off at once with force', async function () {
    // The daemon's default wait is an hour here: a stop that did not keep to timeout_seconds (or to force)
    // would not come back before this suite's timeout. VM 200 runs on across the restart.
    await e.d.kill();
    e = await startVmsDaemon({ root: e.root, env: { HOSTD_VMS_BOOT_ID_FILE: bootId }, stopGraceSeconds: 3600 });
    // The guests stopped here resume a warm state of VM 200 instead of booting: this test is about stopping.
    const ws = await ok(e, 'POST', '/vms/200/warm-states', { name: 'stop test' }, 201);
    await succeeded(e, ws.task.task_id);
    const running = (vmid: number) => qemuGuests(e.root).some((g) => g.vm === `vm-${vmid}`);
    // force: the guest is not asked.
    expect((await ok(e, 'POST', `/vms/warm-states/${ws.warm_state_id}`, { name: 'Force Off', vmid: 203 })).vm.state).to.equal('running');
    const f = await ok(e, 'POST', '/vms/203/stop', { force: true });
    expect(f.stopped_by).to.equal('forced');
    expect(f.vm.state).to.equal('stopped');
    expect(running(203)).to.equal(false);
    await ok(e, 'DELETE', '/vms/203');
    // A guest that ignores the power button: systemd-logind, which handles it in the test guest (no acpid),
    // is stopped and masked for this boot (systemctl speaks to systemd directly, so no D-Bus is needed).
    await ok(e, 'POST', `/vms/warm-states/${ws.warm_state_id}`, { name: 'Deaf Guest', vmid: 203 });
    await untilReady(e, 203, BOOT_S);
    await sh(e, 203, 'systemctl mask --runtime --now systemd-logind.service; ! systemctl is-active --quiet systemd-logind.service');
    const t = await ok(e, 'POST', '/vms/203/stop', { timeout_seconds: 2 });
    expect(t.stopped_by).to.equal('forced');
    expect(t.vm.state).to.equal('stopped');
    expect(running(203)).to.equal(false);
    const rows = (await api(e, 'GET', '/activity?limit=20')).body.events.map((x: any) => x.summary);
    expect(rows).to.include("VM 203 'Force Off' stopped (force: powered off at once)");
    expect(rows).to.include("VM 203 'Deaf Guest' stopped (hard stop after 2 s without an ACPI power-down)");
    await ok(e, 'DELETE', '/vms/203');
    await ok(e, 'DELETE', `/vms/warm-states/${ws.warm_state_id}`);
    expect(qemuGuests(e.root).map((g) => g.vm)).to.deep.equal(['vm-200']);
    await restart();
  });

  it('updates cloud-init settings by the clear rules; the password is never shown or logged', async function () {
    const secret = 'Sup3r-Secret-pw!';
    await fails(e, 'POST', '/vms/200/cloud-init', { password: 'x', clear_password: true }, 400, "arguments 'password' and 'clear_password' cannot be combined");
    await fails(
      e,
      'POST',
      '/vms/200/cloud-init',
      { network_type: 'bridged' },
      400,
      "argument 'network_bridge' is needed for network_type 'bridged' (no default bridge is configured)",
    );
    const r = await ok(e, 'POST', '/vms/200/cloud-init', {
      password: secret,
      ip_address: '10.0.2.50/24',
      gateway: '10.0.2.2',
      dns_servers: [],
      ssh_password_auth: true,
    });
    expect(r.applies).to.equal('next boot');
    expect(r.vm.cloud_init).to.include({ password_set: true, ip_address: '10.0.2.50/24', gateway: '10.0.2.2', ssh_password_auth: true });
    expect(r.vm.cloud_init.dns_servers).to.deep.equal([]);
    expect(JSON.stringify(r)).to.not.include(secret);
    const seed = fs.readFileSync(path.join(e.pools.p1, '.vms/vm-200/seed.iso'));
    expect(seed.includes(Buffer.from(secret))).to.equal(false);
    expect(seed.includes(Buffer.from('$6$'))).to.equal(true);
    // Stored as a hash, encrypted: neither form of it is readable on disk.
    const stored = fs.readFileSync(path.join(e.d.dataDir, 'secrets/vms-cloudinit/password-200'));
    expect(stored.includes(Buffer.from(secret))).to.equal(false);
    expect(stored.includes(Buffer.from('$6$'))).to.equal(false);
    const cleared = await ok(e, 'POST', '/vms/200/cloud-init', { ip_address: '', gateway: '', clear_password: true, ssh_public_key: '' });
    expect(cleared.vm.cloud_init).to.include({ password_set: false, ip_address: null, gateway: null, ssh_public_key: null, username: 'alice' });
    expect(fs.existsSync(path.join(e.d.dataDir, 'secrets/vms-cloudinit/password-200'))).to.equal(false);
    const rows = await api(e, 'GET', '/activity?limit=200');
    expect(rows.text).to.not.include(secret);
    expect(
      rows.body.events.some(
        (x: any) => x.summary === "VM 200 'Alpha One' cloud-init settings updated: ssh_password_auth, dns_servers, ip_address, gateway, password",
      ),
    ).to.equal(true);
    expect(JSON.stringify(e.d.logs)).to.not.include(secret);
  });

  it('stores documentation: replace, append a timestamped entry', async function () {
    expect(await ok(e, 'GET', '/vms/200/docs')).to.deep.equal({ vmid: 200, content: '', updated_at: null });
    await ok(e, 'PUT', '/vms/200/docs', { content: '# Alpha' });
    const a = await ok(e, 'PUT', '/vms/200/docs', { content: 'rebooted', append_entry: true });
    expect(a.content).to.match(/^# Alpha\n\n## \d{4}-\d\d-\d\dT[\d:.]+Z\n\nrebooted\n$/);
    expect((await ok(e, 'GET', '/vms/200/docs')).content).to.equal(a.content);
  });

  it('stops by ACPI power-down, idempotently; then PATCH works', async function () {
    const s = await ok(e, 'POST', '/vms/200/stop', {});
    expect(s.stopped_by).to.equal('acpi');
    expect(s.vm.state).to.equal('stopped');
    expect((await ok(e, 'POST', '/vms/200/stop', {})).stopped_by).to.equal('already-stopped');
    const p = await ok(e, 'PATCH', '/vms/200', { cpu_cores: 2, memory_mb: 768, autostart: null });
    expect(p.vm).to.include({ cpu_cores: 2, memory_mb: 768, autostart: false });
    await fails(e, 'PATCH', '/vms/200', { memory_mb: 100 }, 400, "argument 'memory_mb' (100) is below the minimum of image 'deb12' (512)");
  });

  it('clones a stopped VM (a full copy task) and captures a template from it', async function () {
    await fails(
      e,
      'POST',
      '/vms/200/clone',
      { source_vmid: 200, name: 'self' },
      409,
      'vmid 200 is taken (by the source VM itself); the path id names the new VM',
    );
    const c = await ok(e, 'POST', '/vms/202/clone', { source_vmid: 200, name: 'gamma' }, 200);
    expect(c.vm).to.include({ vmid: 202, state: 'creating', linked_clone: false });
    await succeeded(e, c.task.task_id);
    const g = (await ok(e, 'GET', '/vms/202')).vm;
    expect(g).to.include({ state: 'stopped', cpu_cores: 2, memory_mb: 768 });
    expect(g.identity.pending).to.equal(true);
    expect(fs.existsSync(path.join(e.pools.p1, '.vms/vm-202/root.qcow2'))).to.equal(true);
    const t = await ok(e, 'POST', '/vms/200/template', { template_name: 'Alpha Template' }, 201);
    expect(t.image_id).to.equal('alpha-template');
    await succeeded(e, t.task.task_id);
    const img = (await ok(e, 'GET', '/vms/images')).images.find((i: any) => i.image_id === 'alpha-template');
    expect(img).to.include({ kind: 'template', storage_id: 'p1', default_user: 'debian', min_memory_mb: 512 });
    expect(img.source).to.deep.equal({ type: 'vm', vmid: 200 });
    // The template holds what the VM wrote (flattened: no backing file).
    expect(await readGuestFile(path.join(e.pools.p1, '.vms/images/alpha-template.qcow2'), '/root/marker')).to.equal('after\n');
    await fails(e, 'POST', '/vms/200/template', { template_name: 'Alpha Template' }, 409, "image 'alpha-template' already exists");
  });

  it('autostarts VMs marked so when hostd starts after a host boot (not after a hostd restart)', async function () {
    await ok(e, 'PATCH', '/vms/202', { autostart: true });
    await restart();
    expect((await ok(e, 'GET', '/vms/202')).vm.state).to.equal('stopped');
    fs.writeFileSync(bootId, 'boot-2\n');
    await restart();
    const st = await eventually(
      async () => {
        const v = (await ok(e, 'GET', '/vms/202')).vm;
        return v.state === 'running' ? v : undefined;
      },
      120_000,
      'VM 202 to autostart',
    );
    expect(st.identity.pending).to.equal(false);
    expect((await ok(e, 'GET', '/vms/200')).vm.state).to.equal('stopped');
    // The autostart's start may still hold the VM for a moment after QEMU runs.
    await eventually(async () => (await api(e, 'DELETE', '/vms/202')).status === 200, 60_000, 'VM 202 to be deleted');
  });

  it('serves the same operations over MCP and hostctl call', async function () {
    const mcp = await e.d.request('POST', '/mcp', {
      token: e.token,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'vms_get', arguments: { id: 200 } } },
    });
    expect(mcp.status).to.equal(200);
    expect(mcp.body.result.structuredContent.vm).to.include({ vmid: 200, name: 'Alpha One', state: 'stopped' });
    const h = await hostctl(e.d.dataDir, ['call', 'vms_docs_get', 'id=200']);
    expect(h.code, h.stderr).to.equal(0);
    expect(JSON.parse(h.stdout).content).to.match(/^# Alpha/);
  });

  it('deletes the VMs, then the image is free to move and delete', async function () {
    await ok(e, 'DELETE', '/vms/200');
    await ok(e, 'DELETE', '/vms/images/alpha-template');
    const m = await ok(e, 'POST', '/vms/images/deb12/move', { source_storage_id: 'p1', target_storage_id: 'p2' });
    await succeeded(e, m.task.task_id);
    expect(fs.existsSync(path.join(e.pools.p2, '.vms/images/deb12.qcow2'))).to.equal(true);
    expect(fs.existsSync(path.join(e.pools.p1, '.vms/images/deb12.qcow2'))).to.equal(false);
    await fails(e, 'DELETE', '/vms/images/deb12?storage_id=p1', undefined, 404, "image 'deb12' is not in pool 'p1' (it is in 'p2'; argument 'storage_id')");
    await ok(e, 'DELETE', '/vms/images/deb12?storage_id=p2');
    expect((await ok(e, 'GET', '/vms/images')).images).to.deep.equal([]);
    expect(qemuPids(e.root)).to.deep.equal([]);
  });
});
