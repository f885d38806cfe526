/** The VM service's rules over a fake driver (the runtime tests hold the same against QEMU). */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { Store } from '../../../daemon/store/store.js';
import { TaskRunner } from '../../../daemon/tasks/runner.js';
import { noNotes } from '../../../daemon/lib/caller.js';
import type { VmService } from '../../../daemon/vms/service.js';
import { getOperation } from '../../../api/registry/index.js';
import { validateArgs } from '../../../api/validate.js';
import { rejectsApi } from '../../helpers/expect.js';
import { FakeDriver, fakeVmService } from '../../helpers/vms-fake-driver.js';

describe('vms service rules (fake driver)', () => {
  let dir: string;
  let store: Store;
  let tasks: TaskRunner;
  let drv: FakeDriver;
  let svc: VmService;
  const o = { owner: 'sandbox' };

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-vms-unit-'));
    store = await Store.open(path.join(dir, 'db'));
    tasks = new TaskRunner(store, 'n1');
    drv = new FakeDriver();
    svc = await fakeVmService(dir, store, tasks, drv, { min_cpu_cores: 2, min_memory_mb: 0, min_disk_gb: 5 });
  });

  afterEach(async () => {
    await tasks.shutdown();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('applies image minimums to omitted (or 0) values, the default where the image has none, and refuses less', async () => {
    const { vm } = await svc.create({ name: 'a', image_id: 'base', linked_clone: true, cpu_cores: 0 }, noNotes);
    expect(vm).to.include({ vmid: 100, cpu_cores: 2, memory_mb: 768, disk_size_gb: 5, state: 'stopped' });
    expect(vm.cloud_init.username).to.equal('debian');
    await rejectsApi(
      svc.create({ name: 'b', image_id: 'base', cpu_cores: 1 }, noNotes),
      400,
      "argument 'cpu_cores' (1) is below the minimum of image 'base' (2)",
    );
    await rejectsApi(
      svc.create({ name: 'b', image_id: 'base', disk_size_gb: 4 }, noNotes),
      400,
      "argument 'disk_size_gb' (4) is below the minimum of image 'base' (5 GiB)",
    );
    await rejectsApi(svc.create({ name: 'b', image_id: 'base', vmid: 100 }, noNotes), 409, 'vmid 100 is taken');
    const next = await svc.create({ name: 'c', image_id: 'base', linked_clone: true }, noNotes);
    expect(next.vm.vmid).to.equal(101);
  });

  it('concurrent creates get distinct vmids, each its own VM, and each can start at once', async () => {
    // Reading the records is made slow, and the creates staggered, so that some commit their record
    // (and drop their reservation) while others are still reading the records to pick a vmid.
    const records = svc.records;
    const read = records.allVms.bind(records);
    records.allVms = async () => {
      const all = await read();
      await new Promise((r) => setTimeout(r, 25));
      return all;
    };
    const made = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        await new Promise((r) => setTimeout(r, i * 5));
        return svc.create({ name: `c${i}`, image_id: 'base', linked_clone: true }, noNotes);
      }),
    );
    const ids = made.map((m) => m.vm.vmid);
    expect(new Set(ids).size).to.equal(8);
    for (const id of ids) expect((await svc.start(id, noNotes)).vm.state).to.equal('running');
    expect((await svc.list()).map((v) => v.name).sort()).to.deep.equal(['c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7']);
  });

  it('writes the identity and the seed at the first start only, then clears the pending seed', async () => {
    const { vm } = await svc.create({ name: 'My Box', image_id: 'base', linked_clone: true, seed_data: 'S1', skip_rekey: true }, noNotes);
    expect(drv.identities).to.deep.equal([]);
    expect(await svc.e.secrets.get('vms-cloudinit', `seed-${vm.vmid}`)).to.equal('S1');
    await svc.start(vm.vmid, noNotes);
    expect(drv.identities.map((i) => [i.seed, i.rekey, i.hostname])).to.deep.equal([['S1', false, 'my-box']]);
    expect(await svc.e.secrets.get('vms-cloudinit', `seed-${vm.vmid}`)).to.equal(null);
    expect([...drv.seeds.keys()]).to.deep.equal([path.join(dir, `pool/.vms/vm-${vm.vmid}/seed.iso`)]);
    await svc.stop(vm.vmid, noNotes);
    await svc.start(vm.vmid, noNotes);
    expect(drv.identities).to.have.length(1);
  });

  it('hides owned VMs from /vms callers and counts them for their owner', async () => {
    const { vm } = await svc.create({ name: 'sb', image_id: 'base' }, noNotes, o);
    expect(vm.linked_clone).to.equal(true);
    expect(await svc.list()).to.deep.equal([]);
    expect((await svc.listOwned('sandbox')).map((v) => v.vmid)).to.deep.equal([vm.vmid]);
    await rejectsApi(svc.get(vm.vmid), 404, `VM ${vm.vmid} not found`);
    await rejectsApi(svc.start(vm.vmid, noNotes), 404, `VM ${vm.vmid} not found`);
    expect(await svc.guests()).to.deep.equal([]);
    expect((await svc.guestInfo(vm.vmid))?.kind).to.equal('sandbox');
  });

  it('keeps cloud-init values unless given, clears on empty, never returns the password', async () => {
    const { vm } = await svc.create(
      { name: 'a', image_id: 'base', linked_clone: true, ip_address: '10.0.0.9', gateway: '10.0.0.1', dns_servers: ['1.1.1.1'] },
      noNotes,
    );
    await rejectsApi(
      svc.cloudInit(vm.vmid, { password: 'p', clear_password: true }, noNotes),
      400,
      "arguments 'password' and 'clear_password' cannot be combined",
    );
    const r = await svc.cloudInit(vm.vmid, { password: 'hunter2', dns_servers: null, ip_address: null }, noNotes);
    expect(r.vm.cloud_init).to.include({ ip_address: '10.0.0.9/24', gateway: '10.0.0.1', password_set: true });
    expect(r.vm.cloud_init.dns_servers).to.deep.equal(['1.1.1.1']);
    expect(JSON.stringify(r)).to.not.include('hunter2');
    const seed = drv.seeds.get(path.join(dir, `pool/.vms/vm-${vm.vmid}/seed.iso`))!;
    expect(seed['user-data']).to.include('$6$fake$');
    expect(seed['user-data']).to.not.include('hunter2');
    const c = await svc.cloudInit(vm.vmid, { ip_address: '', gateway: '', dns_servers: [], clear_password: true }, noNotes);
    expect(c.vm.cloud_init).to.include({ ip_address: null, gateway: null, password_set: false });
    expect(c.vm.cloud_init.dns_servers).to.deep.equal([]);
  });

  it('refuses state conflicts with 409s that say why, and a busy VM with the operation in progress', async () => {
    const { vm } = await svc.create({ name: 'a', image_id: 'base', linked_clone: true }, noNotes);
    await svc.start(vm.vmid, noNotes);
    await rejectsApi(svc.update(vm.vmid, { cpu_cores: 4 }, noNotes), 409, `VM ${vm.vmid} is running: stop it before changing CPU, memory or autostart`);
    await rejectsApi(svc.clone(300, vm.vmid, 'c', noNotes), 409, `source VM ${vm.vmid} is running: clone needs a stopped VM`);
    drv.stopDelayMs = 200;
    const stopping = svc.stop(vm.vmid, noNotes);
    await new Promise((r) => setTimeout(r, 20));
    await rejectsApi(svc.start(vm.vmid, noNotes), 409, `VM ${vm.vmid} is busy: stop in progress`);
    expect((await stopping).stopped_by).to.equal('acpi');
    await rejectsApi(svc.resume(vm.vmid, noNotes), 409, `VM ${vm.vmid} is stopped, not suspended: start it instead`);
  });

  it('grows disks only, and pins warm states and images while something rests on them', async () => {
    const { vm } = await svc.create({ name: 'a', image_id: 'base', linked_clone: true }, noNotes);
    const d = await svc.diskAttach(vm.vmid, 2, noNotes);
    expect(d.disk.disk_id).to.equal('d1');
    await rejectsApi(svc.diskGrow(vm.vmid, 'd1', 2, noNotes), 400, "argument 'size_gb' (2) must be larger than disk d1's current 2 GiB: disks only grow");
    expect((await svc.diskGrow(vm.vmid, 'd1', 3, noNotes)).disk.size_gb).to.equal(3);
    await svc.diskDelete(vm.vmid, 'd1', noNotes);
    await svc.start(vm.vmid, noNotes);
    const saved = await svc.saveWarmState(vm.vmid, 'w', { note() {} }, { wait: true });
    expect((await svc.get(vm.vmid)).root_layers).to.have.length(2);
    const r = await svc.restoreWarmState(saved.warm_state_id, { name: 'r' }, noNotes);
    expect(r.vm).to.include({ state: 'running', warm_state_id: saved.warm_state_id });
    await rejectsApi(
      svc.deleteWarmState(saved.warm_state_id, noNotes),
      409,
      `warm state '${saved.warm_state_id}' is the base of VMs ${r.vm.vmid}: delete them first`,
    );
    expect(await svc.imageDependents('base')).to.deep.equal({ vms: [vm.vmid, r.vm.vmid], warm_states: [saved.warm_state_id] });
    await svc.remove(r.vm.vmid, noNotes);
    await svc.deleteWarmState(saved.warm_state_id, noNotes);
  });

  it("saves a warm state only once the guest's first boot (cloud-init) has finished, and refuses to save one that does not settle", async () => {
    const { vm } = await svc.create({ name: 'a', image_id: 'base', linked_clone: true }, noNotes);
    await svc.start(vm.vmid, noNotes);
    drv.trail.length = 0;
    const saved = await svc.saveWarmState(vm.vmid, 'w', { note() {} }, { wait: true });
    const settle = drv.trail.findIndex((t) => t.startsWith('exec:') && t.includes('cloud-init status --wait'));
    expect(settle, drv.trail.join(' | ')).to.be.at.least(0);
    // systemd's start-up jobs first (hostd's own SSH host key unit among them), then cloud-init.
    const script = drv.trail[settle];
    expect(script.indexOf('systemctl is-system-running --wait'), script).to.be.within(0, script.indexOf('cloud-init status --wait'));
    expect(drv.trail.indexOf('saveMemory'), 'the memory is saved after the wait').to.be.greaterThan(settle);
    await svc.deleteWarmState(saved.warm_state_id, noNotes);

    drv.execTimesOut = /cloud-init status --wait/;
    drv.trail.length = 0;
    try {
      await rejectsApi(
        svc.saveWarmState(vm.vmid, 'w2', { note() {} }, { wait: true }),
        500,
        `saving the warm state failed: VM ${vm.vmid}'s first boot (systemd's start-up jobs, cloud-init) did not finish within 900 s (vms.warm_settle_timeout_seconds): a warm state saved now would carry it on in every VM resumed from it; save it once the guest has settled`,
      );
    } finally {
      drv.execTimesOut = null;
    }
    expect(drv.trail, 'nothing saved').to.not.include('saveMemory');
    expect(await svc.warmStates()).to.deep.equal([]);
    expect((await svc.get(vm.vmid)).state).to.equal('running');
  });

  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  const spec = (vmid: number) => drv.machines.get(svc.runDir(vmid))!.spec;

  it('gives every VM its own generation ID, kept across its starts, and a new one to each VM resumed from a warm state', async () => {
    const { vm } = await svc.create({ name: 'a', image_id: 'base', linked_clone: true }, noNotes);
    expect(vm.generation_id).to.match(UUID);
    await svc.start(vm.vmid, noNotes);
    expect(spec(vm.vmid).generationId).to.equal(vm.generation_id);
    await svc.stop(vm.vmid, noNotes);
    await svc.start(vm.vmid, noNotes);
    expect(spec(vm.vmid).generationId).to.equal(vm.generation_id);
    const saved = await svc.saveWarmState(vm.vmid, 'w', { note() {} }, { wait: true });
    expect(saved.warm_state).to.deep.include({ generation_id: vm.generation_id, format: 2, resumable: true, reason: null });
    const r1 = await svc.restoreWarmState(saved.warm_state_id, { name: 'r1' }, noNotes);
    const r2 = await svc.restoreWarmState(saved.warm_state_id, { name: 'r2' }, noNotes);
    for (const r of [r1, r2]) {
      expect(r.vm.generation_id).to.match(UUID);
      expect(spec(r.vm.vmid)).to.deep.include({
        generationId: r.vm.generation_id,
        incoming: path.join(dir, `pool/.vms/warm/${saved.warm_state_id}/memory.state`),
      });
    }
    expect(new Set([vm.generation_id, r1.vm.generation_id, r2.vm.generation_id]).size).to.equal(3);
    // A clone (a new VM of a copied disk) is another machine too.
    await svc.stop(vm.vmid, noNotes);
    const c = await svc.clone(300, vm.vmid, 'c', noNotes);
    await tasks.settled(c.task.task_id);
    expect((await svc.get(300)).generation_id)
      .to.match(UUID)
      .and.not.equal(vm.generation_id);
  });

  it('refuses (409, saying what to do) a warm state saved before the device existed, keeps it, and lists it in host-status', async () => {
    const { vm } = await svc.create({ name: 'a', image_id: 'base', linked_clone: true }, noNotes);
    await svc.start(vm.vmid, noNotes);
    const saved = await svc.saveWarmState(vm.vmid, 'w', { note() {} }, { wait: true });
    const id = saved.warm_state_id;
    // The record as an earlier hostd wrote it: no format, no generation ID.
    const old = (await svc.records.warmState(id))!;
    delete old.format;
    delete old.vmgenid;
    await svc.records.warm.put(id, old);
    const msg = `warm state '${id}' was saved before VMs had a VM generation ID device: a VM resumed from it could not be told to renew its randomness, so it is not resumed; delete it and save a new one from a running VM`;
    await rejectsApi(svc.restoreWarmState(id, { name: 'r' }, noNotes), 409, msg);
    expect((await svc.list()).map((v) => v.vmid)).to.deep.equal([vm.vmid]);
    expect((await svc.warmStates())[0]).to.deep.include({ id, generation_id: null, format: 1, resumable: false, reason: msg });
    expect((await svc.hostStatus()).refused).to.deep.equal([{ kind: 'warm_state', id, rule: 'vmgenid', refuses: 'restore', message: msg }]);
    expect(fs.existsSync(path.join(dir, `pool/.vms/warm/${id}/memory.state`))).to.equal(true);
    await svc.deleteWarmState(id, noNotes);
    expect((await svc.hostStatus()).refused).to.deep.equal([]);
  });

  it('refuses a warm-state save of a machine started without the device, resumes a VM suspended then without it, and gives it one at its next start', async () => {
    const { vm } = await svc.create({ name: 'a', image_id: 'base', linked_clone: true }, noNotes);
    await svc.start(vm.vmid, noNotes);
    // What an earlier hostd left running: a machine without the device, a record without the field.
    spec(vm.vmid).generationId = null;
    const rec = (await svc.records.vm(vm.vmid))!;
    delete rec.vmgenid;
    await svc.records.vms.put(String(vm.vmid).padStart(10, '0'), rec);
    await rejectsApi(
      svc.saveWarmState(vm.vmid, 'w', { note() {} }),
      409,
      `VM ${vm.vmid} runs on a machine without a VM generation ID device (started before hostd added one): VMs resumed from its warm state could not be told to renew their randomness; stop and start it, then save the warm state`,
    );
    expect((await svc.hostStatus()).refused.map((r) => [r.kind, r.id, r.rule, r.refuses])).to.deep.equal([
      ['vm', String(vm.vmid), 'vmgenid', 'warm-state save'],
    ]);
    await svc.suspend(vm.vmid, noNotes);
    await svc.resume(vm.vmid, noNotes);
    expect(spec(vm.vmid).generationId, 'the resume keeps the device set the memory was saved with').to.equal(null);
    expect((await svc.get(vm.vmid)).generation_id).to.equal(null);
    await svc.stop(vm.vmid, noNotes);
    await svc.start(vm.vmid, noNotes);
    const now = (await svc.get(vm.vmid)).generation_id;
    expect(now).to.match(UUID);
    expect(spec(vm.vmid).generationId).to.equal(now);
    expect((await svc.saveWarmState(vm.vmid, 'w', { note() {} }, { wait: true })).warm_state?.resumable).to.equal(true);
    expect((await svc.hostStatus()).refused).to.deep.equal([]);
  });

  it('lets VMs join only the bridges the host gives them: 403 naming the settings, at update and at every start', async () => {
    const { vm } = await svc.create({ name: 'a', image_id: 'base', linked_clone: true }, noNotes);
    const why = "bridge 'docker0' is not one VMs may join (allowed: none; the settings vms.bridge and vms.allowed_bridges list them)";
    await rejectsApi(svc.cloudInit(vm.vmid, { network_type: 'bridged', network_bridge: 'docker0' }, noNotes), 403, why);
    // A malformed name is the registry's rule, refused before the service runs.
    expect(() => validateArgs(getOperation('vms_cloud_init_update')!, { id: vm.vmid, network_type: 'bridged', network_bridge: '..' })).to.throw(
      "argument 'network_bridge' must be an interface name (1-15 of [A-Za-z0-9_.-], not '.' or '..'), or empty, or null",
    );
    expect((await svc.get(vm.vmid)).network.type).to.equal('user');
    // A VM put on that bridge before the rule: refused at its start, listed, nothing deleted.
    const rec = (await svc.records.vm(vm.vmid))!;
    rec.cloud_init = { ...rec.cloud_init, network_type: 'bridged', network_bridge: 'docker0' };
    await svc.records.vms.put(String(vm.vmid).padStart(10, '0'), rec);
    await rejectsApi(svc.start(vm.vmid, noNotes), 403, `VM ${vm.vmid}: ${why}`);
    expect(drv.machines.size).to.equal(0);
    expect((await svc.hostStatus()).refused).to.deep.equal([
      { kind: 'vm', id: String(vm.vmid), rule: 'vms.allowed_bridges', refuses: 'start', message: `VM ${vm.vmid}: ${why}` },
    ]);
    await svc.cloudInit(vm.vmid, { network_type: 'none' }, noNotes);
    expect((await svc.start(vm.vmid, noNotes)).vm.state).to.equal('running');
  });

  it("refuses a gateway outside the static address's subnet, at create and at a cloud-init change of either", async () => {
    await rejectsApi(
      svc.create({ name: 'g', image_id: 'base', linked_clone: true, ip_address: '10.0.0.5/24', gateway: '10.0.1.1' }, noNotes),
      400,
      "argument 'gateway' is outside 10.0.0.5/24",
    );
    const { vm } = await svc.create({ name: 'g', image_id: 'base', linked_clone: true, ip_address: '10.0.0.5', gateway: '10.0.0.1' }, noNotes);
    expect(vm.cloud_init).to.include({ ip_address: '10.0.0.5/24', gateway: '10.0.0.1' });
    await rejectsApi(svc.cloudInit(vm.vmid, { ip_address: '192.168.1.5/24' }, noNotes), 400, "argument 'gateway' is outside 192.168.1.5/24");
    await rejectsApi(svc.cloudInit(vm.vmid, { gateway: 'fd00::1' }, noNotes), 400, "argument 'gateway' is an IPv6 address and the address is IPv4");
    const moved = await svc.cloudInit(vm.vmid, { ip_address: '192.168.1.5/24', gateway: '192.168.1.1' }, noNotes);
    expect(moved.vm.cloud_init).to.include({ ip_address: '192.168.1.5/24', gateway: '192.168.1.1' });
  });

  it('stops with the grace period asked for, or at once without asking the guest when forced', async () => {
    const { vm } = await svc.create({ name: 's', image_id: 'base', linked_clone: true }, noNotes);
    await svc.start(vm.vmid, noNotes);
    expect((await svc.stop(vm.vmid, noNotes, { timeoutSeconds: 5 })).stopped_by).to.equal('acpi');
    expect(drv.stopGraces).to.deep.equal([5000]);
    await svc.start(vm.vmid, noNotes);
    const forced = await svc.stop(vm.vmid, noNotes, { force: true });
    expect(forced.stopped_by).to.equal('forced');
    expect(forced.vm.state).to.equal('stopped');
    expect(drv.stopGraces, 'a forced stop sends no ACPI power-down').to.deep.equal([5000]);
    expect((await svc.stop(vm.vmid, noNotes, { force: true })).stopped_by).to.equal('already-stopped');
    await svc.start(vm.vmid, noNotes);
    await svc.stop(vm.vmid, noNotes);
    expect(drv.stopGraces.at(-1), 'the setting vms.stop_grace_seconds by default').to.equal(60_000);
  });

  it('wait-ready gives an agent that answers slowly more time at each ask, and does not for one that refuses at once', async function () {
    this.timeout(20_000);
    const { vm } = await svc.create({ name: 'slow', image_id: 'base', linked_clone: true }, noNotes);
    await svc.start(vm.vmid, noNotes);
    // Refused at once twice (QEMU's socket not there yet), then an agent that needs more than the first 2 s.
    const budgets: number[] = [];
    drv.ping = async (_m, t = 0) => {
      budgets.push(t);
      if (budgets.length <= 2) return false;
      if (t > 2000) return true;
      await new Promise((r) => setTimeout(r, t));
      return false;
    };
    const w = await svc.waitReady(vm.vmid, 30);
    expect(w).to.include({ ready: true, timed_out: false, state: 'running' });
    expect(budgets).to.deep.equal([2000, 2000, 2000, 4000]);
  });
});
