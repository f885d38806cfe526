/** The VM service's rules over a fake driver (the runtime tests hold the same against QEMU). */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { Store } from '../../daemon/store/store.js';
import { TaskRunner } from '../../daemon/tasks/runner.js';
import { noNotes } from '../../daemon/lib/caller.js';
import type { VmService } from '../../daemon/vms/service.js';
import { rejectsApi } from '../helpers/expect.js';
import { FakeDriver, fakeVmService } from '../helpers/vms-fake-driver.js';

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
    await rejectsApi(svc.create({ name: 'b', image_id: 'base', cpu_cores: 1 }, noNotes), 400, "argument 'cpu_cores' (1) is below image 'base''s minimum of 2");
    await rejectsApi(svc.create({ name: 'b', image_id: 'base', disk_size_gb: 4 }, noNotes), 400, "argument 'disk_size_gb' (4) is below image 'base''s 5 GiB minimum");
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
    const made = await Promise.all(Array.from({ length: 8 }, async (_, i) => {
      await new Promise((r) => setTimeout(r, i * 5));
      return svc.create({ name: `c${i}`, image_id: 'base', linked_clone: true }, noNotes);
    }));
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
    const { vm } = await svc.create({ name: 'a', image_id: 'base', linked_clone: true, ip_address: '10.0.0.9', gateway: '10.0.0.1', dns_servers: ['1.1.1.1'] }, noNotes);
    await rejectsApi(svc.cloudInit(vm.vmid, { password: 'p', clear_password: true }, noNotes), 400, "arguments 'password' and 'clear_password' cannot be combined");
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
    await rejectsApi(svc.deleteWarmState(saved.warm_state_id, noNotes), 409, `warm state '${saved.warm_state_id}' is the base of VMs ${r.vm.vmid}: delete them first`);
    expect(await svc.imageDependents('base')).to.deep.equal({ vms: [vm.vmid, r.vm.vmid], warm_states: [saved.warm_state_id] });
    await svc.remove(r.vm.vmid, noNotes);
    await svc.deleteWarmState(saved.warm_state_id, noNotes);
  });
});
