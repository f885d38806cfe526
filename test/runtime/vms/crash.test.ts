/**
 * Crash safety: hostd is paused at a named step of a change
 * (HOSTD_TEST_PAUSE_AT=vms.<step>), killed with SIGKILL there, and started again; the
 * records, the files and the QEMU processes must agree afterwards. The VMs
 * here boot nothing (a blank disk: SeaBIOS finds no boot device), which is
 * enough for QEMU to run, save memory and snapshot disks.
 */
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { run } from '../../../daemon/lib/run.js';
import { tempDir } from '../../helpers/daemon.js';
import { api, fails, killGuests, requireVmsRuntime, ok, pausedAt, qemuPids, startVmsDaemon, succeeded, type VmsEnv } from '../../helpers/vms-fixture.js';

/** Files a process has open, with whether it may write them. */
function openFiles(pid: number): Map<string, 'rw' | 'ro'> {
  const out = new Map<string, 'rw' | 'ro'>();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
      const flags = Number.parseInt(/flags:\s*(\d+)/.exec(fs.readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8'))![1], 8);
      out.set(target, (flags & 3) === 2 ? 'rw' : 'ro');
    } catch {
      /* closed meanwhile */
    }
  }
  return out;
}

describe('vms crash recovery (QEMU)', function () {
  this.timeout(15 * 60_000);
  let e: VmsEnv;
  let root: string;

  const restart = async (env: Record<string, string> = {}) => {
    await e.d.kill();
    e = await startVmsDaemon({ root, env });
  };

  /** Runs `start` with hostd paused at `step`, kills hostd there, starts it again. */
  const crashAt = async (step: string, start: () => Promise<unknown>) => {
    await restart({ HOSTD_TEST_PAUSE_AT: `vms.${step}` });
    const inflight = start().catch(() => undefined);
    await pausedAt(e, step);
    await restart();
    await inflight;
  };

  const vmDirs = () =>
    fs
      .readdirSync(path.join(e.pools.p1, '.vms'))
      .filter((n) => n.startsWith('vm-'))
      .sort();
  const warmDirs = () => (fs.existsSync(path.join(e.pools.p1, '.vms/warm')) ? fs.readdirSync(path.join(e.pools.p1, '.vms/warm')) : []);

  before(async function () {
    await requireVmsRuntime(this);
    root = tempDir('hostd-vms-crash-');
    e = await startVmsDaemon({ root });
    const blank = path.join(root, 'blank.qcow2');
    await run('qemu-img', ['create', '-q', '-f', 'qcow2', blank, '1G']);
    const r = await e.d.admin.request('POST', '/admin/vms/images/import', { file: blank, image_id: 'blank', min_memory_mb: 256 });
    await succeeded(e, r.body.task.task_id);
    await ok(e, 'POST', '/vms', { name: 'source', image_id: 'blank', vmid: 110, linked_clone: true, memory_mb: 256 }, 201);
  });

  after(async function () {
    if (root) await killGuests(root);
  });

  for (const step of ['create:dir', 'create:disk', 'create:seed']) {
    it(`rolls back a linked-clone create killed at ${step}`, async function () {
      await crashAt(step, () => api(e, 'POST', '/vms', { name: 'doomed', image_id: 'blank', vmid: 150, linked_clone: true, seed_data: 'secret-seed' }));
      await fails(e, 'GET', '/vms/150', undefined, 404, 'VM 150 not found');
      expect(vmDirs()).to.deep.equal(['vm-110']);
      expect(fs.existsSync(path.join(e.d.dataDir, 'secrets/vms-cloudinit/seed-150'))).to.equal(false);
      expect((await ok(e, 'GET', '/vms/images')).images[0].linked_clones).to.deep.equal([110]);
      // The id is free again.
      await ok(e, 'POST', '/vms', { name: 'again', image_id: 'blank', vmid: 150, linked_clone: true }, 201);
      await ok(e, 'DELETE', '/vms/150');
    });
  }

  for (const step of ['clone:dir', 'clone:copied']) {
    it(`rolls back a clone killed at ${step}`, async function () {
      await crashAt(step, () => api(e, 'POST', '/vms/151/clone', { source_vmid: 110, name: 'copy' }));
      await fails(e, 'GET', '/vms/151', undefined, 404, 'VM 151 not found');
      expect(vmDirs()).to.deep.equal(['vm-110']);
      const tasks = (await ok(e, 'GET', '/tasks')).tasks ?? [];
      expect(tasks.filter((t: any) => t.kind === 'vms.vm.clone' && t.state === 'running')).to.deep.equal([]);
      expect((await ok(e, 'GET', '/vms/110')).vm.state).to.equal('stopped');
    });
  }

  for (const step of ['template:copied', 'template:placed']) {
    it(`rolls back a template capture killed at ${step}`, async function () {
      await crashAt(step, () => api(e, 'POST', '/vms/110/template', { template_name: 'captured' }));
      expect((await ok(e, 'GET', '/vms/images')).images.map((i: any) => i.image_id)).to.deep.equal(['blank']);
      expect(
        fs
          .readdirSync(path.join(e.pools.p1, '.vms/images'))
          .filter((f) => f !== '.partial')
          .sort(),
      ).to.deep.equal(['blank.qcow2']);
      expect(fs.readdirSync(path.join(e.pools.p1, '.vms/images/.partial'))).to.deep.equal([]);
    });
  }

  it('rolls back an image import killed after the file was placed', async function () {
    const blank = path.join(root, 'blank.qcow2');
    await crashAt('image:placed', () => e.d.admin.request('POST', '/admin/vms/images/import', { file: blank, image_id: 'half' }));
    expect((await ok(e, 'GET', '/vms/images')).images.map((i: any) => i.image_id)).to.deep.equal(['blank']);
    expect(fs.existsSync(path.join(e.pools.p1, '.vms/images/half.qcow2'))).to.equal(false);
  });

  describe('with a running VM', function () {
    let pid = 0;
    const layersAgree = async () => {
      const vm = (await ok(e, 'GET', '/vms/120')).vm;
      expect(vm.state).to.equal('running');
      const files = openFiles(pid);
      const dir = path.join(e.pools.p1, '.vms/vm-120');
      // The record's active layer is the one QEMU writes; every older layer is read-only.
      expect(files.get(path.join(dir, vm.root_layers[vm.root_layers.length - 1]))).to.equal('rw');
      for (const l of vm.root_layers.slice(0, -1)) expect(files.get(path.join(dir, l))).to.equal('ro');
      const onDisk = fs
        .readdirSync(dir)
        .filter((f) => f.startsWith('root'))
        .sort();
      expect(onDisk).to.deep.equal([...vm.root_layers].sort());
      return vm;
    };

    before(async function () {
      await ok(e, 'POST', '/vms', { name: 'runner', image_id: 'blank', vmid: 120, linked_clone: true, memory_mb: 256 }, 201);
      await ok(e, 'POST', '/vms/120/start', {});
      [pid] = qemuPids(root);
      expect(pid).to.be.a('number');
    });

    it('answers 503 for exec when the guest agent is silent, and wait-ready says so', async function () {
      await fails(
        e,
        'POST',
        '/vms/120/exec',
        { command: 'true' },
        503,
        'the guest agent of VM 120 does not answer (is qemu-guest-agent installed and running in the guest?)',
      );
      const w = await ok(e, 'POST', '/vms/120/wait-ready', { timeout_seconds: 2 });
      expect(w).to.include({ ready: false, timed_out: true, state: 'running', reason: 'the guest agent did not answer' });
    });

    for (const step of ['warm:saved', 'warm:snapshot']) {
      it(`rolls back a warm-state save killed at ${step}; the VM runs on, on the layer the record names`, async function () {
        await crashAt(step, () => api(e, 'POST', '/vms/120/warm-states', {}));
        expect(qemuPids(root)).to.deep.equal([pid]);
        await layersAgree();
        expect((await ok(e, 'GET', '/vms/warm-states')).warm_states).to.deep.equal([]);
        expect(warmDirs()).to.deep.equal([]);
      });
    }

    it('finishes a warm-state save killed after its files were complete; it restores', async function () {
      await crashAt('warm:linked', () => api(e, 'POST', '/vms/120/warm-states', { name: 'kept' }));
      const vm = await layersAgree();
      const ws = (await ok(e, 'GET', '/vms/warm-states')).warm_states;
      expect(ws).to.have.length(1);
      expect(ws[0]).to.include({ vmid: 120, name: 'kept', memory_mb: 256 });
      expect(warmDirs()).to.deep.equal([ws[0].id]);
      // The warm state's disk is the layer frozen at the save: the one before the VM's active layer.
      const frozen = path.join(e.pools.p1, '.vms/vm-120', vm.root_layers[vm.root_layers.length - 2]);
      expect(fs.statSync(path.join(e.pools.p1, '.vms/warm', ws[0].id, 'disk.qcow2')).ino).to.equal(fs.statSync(frozen).ino);
      const r = await ok(e, 'POST', `/vms/warm-states/${ws[0].id}`, { name: 'restored', vmid: 121 });
      expect(r.vm.state).to.equal('running');
      // A blank disk has no guest agent: the clone runs, without its own identity, and says so.
      expect(r.identity).to.deep.equal({ applied: false, reason: 'the guest agent did not answer within 15 s after the resume' });
      await ok(e, 'DELETE', '/vms/121');
      await ok(e, 'DELETE', `/vms/warm-states/${ws[0].id}`);
      expect(warmDirs()).to.deep.equal([]);
    });

    it('continues the guest when a suspend is killed after the memory was saved', async function () {
      await crashAt('suspend:saved', () => api(e, 'POST', '/vms/120/suspend', {}));
      expect(qemuPids(root)).to.deep.equal([pid]);
      expect((await ok(e, 'GET', '/vms/120')).vm.state).to.equal('running');
      expect(fs.readdirSync(path.join(e.pools.p1, '.vms/vm-120')).filter((f) => f.startsWith('suspend'))).to.deep.equal([]);
    });

    it('completes a resume killed after QEMU loaded the state', async function () {
      await ok(e, 'POST', '/vms/120/suspend', {});
      expect(qemuPids(root)).to.deep.equal([]);
      await crashAt('resume:started', () => api(e, 'POST', '/vms/120/resume', {}));
      [pid] = qemuPids(root);
      expect((await ok(e, 'GET', '/vms/120')).vm.state).to.equal('running');
      expect(fs.existsSync(path.join(e.pools.p1, '.vms/vm-120/suspend.state'))).to.equal(false);
      expect((await ok(e, 'POST', '/vms/120/resume', {})).already_running).to.equal(true);
    });

    it('finishes a delete killed after the VM was stopped', async function () {
      await crashAt('delete:stopped', () => api(e, 'DELETE', '/vms/120'));
      await fails(e, 'GET', '/vms/120', undefined, 404, 'VM 120 not found');
      expect(qemuPids(root)).to.deep.equal([]);
      expect(vmDirs()).to.deep.equal(['vm-110']);
    });
  });
});
