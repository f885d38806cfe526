/**
 * Fresh randomness after a warm-state resume, by design (docs/vms.md, "Warm
 * states"): every VM has QEMU's VM generation ID device, and every VM resumed
 * from a warm state gets a generation ID of its own, which QEMU writes into
 * the loaded memory and signals, and on which the guest kernel (Debian 12's
 * 6.1) reseeds its random-number generator. QEMU is asked directly over each
 * VM's QMP socket (hostd is killed for that and started again). One guest runs
 * at a time: the saved VM is deleted before the first resume.
 */
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { Store } from '../../../daemon/store/store.js';
import { VmRecords } from '../../../daemon/vms/records.js';
import { api, fails, killGuests, requireVmsRuntime, ok, qemuPids, sh, startVmsDaemon, succeeded, untilReady, type VmsEnv } from '../../helpers/vms-fixture.js';
import { importImages } from '../../helpers/sandboxes-fixture.js';
import { generationIdOf, withHostdDown } from '../../helpers/vms-qmp.js';

const BOOT_S = 900;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const RESEED = 'crng reseeded due to virtual machine fork';

describe('vms runtime: a new VM generation ID at every warm-state resume (QEMU)', function () {
  this.timeout(40 * 60_000);
  let e: VmsEnv;
  let saved = '';
  let warmId = '';
  const resumed: string[] = [];

  const restart = () => startVmsDaemon({ root: e.root });
  /** QEMU's own answer for each VM, hostd down meanwhile. */
  const qemuSays = async (vmids: number[]) => {
    const r = await withHostdDown(e, restart, vmids, (qmp) => generationIdOf(qmp));
    e = r.e;
    return vmids.map((v) => r.results.get(v));
  };

  before(async function () {
    await requireVmsRuntime(this);
    e = await startVmsDaemon();
    await importImages(e, 'deb12', false);
  });

  after(async function () {
    if (e) await killGuests(e.root);
  });

  it('boots a VM with a generation ID device: hostd and QEMU report the same guid, and the cold boot is no fork', async () => {
    const c = await ok(e, 'POST', '/vms', { name: 'gen-source', image_id: 'deb12', vmid: 300, linked_clone: true }, 201);
    saved = c.vm.generation_id;
    expect(saved).to.match(UUID);
    const s = await ok(e, 'POST', '/vms/300/start', {});
    expect(s.vm.generation_id).to.equal(saved);
    await untilReady(e, 300, BOOT_S);
    expect(await qemuSays([300])).to.deep.equal([saved]);
    // The guest kernel found the device (ACPI id QEMUVGID) and has not been forked.
    expect((await sh(e, 300, 'ls /sys/bus/acpi/devices/ | grep -c "^QEMUVGID:" || true')).trim()).to.equal('1');
    expect((await sh(e, 300, `dmesg | grep -c "${RESEED}" || true`)).trim()).to.equal('0');
  });

  it("saves a warm state that records the saved VM's generation ID (format 2, resumable)", async () => {
    await sh(e, 300, 'sync');
    const t = await ok(e, 'POST', '/vms/300/warm-states', { name: 'gen warm' }, 201);
    warmId = t.warm_state_id;
    await succeeded(e, t.task.task_id);
    const w = (await ok(e, 'GET', '/vms/warm-states')).warm_states.find((x: any) => x.id === warmId);
    expect(w).to.deep.include({ generation_id: saved, format: 2, resumable: true, reason: null });
    // One guest at a time: the saved VM goes before any resume (the warm state keeps its own disk link).
    await ok(e, 'DELETE', '/vms/300');
    expect(qemuPids(e.root)).to.deep.equal([]);
  });

  for (const [vmid, name] of [
    [301, 'gen-one'],
    [302, 'gen-two'],
  ] as const) {
    it(`resumes VM ${vmid} from it with a generation ID of its own, on which the guest kernel reseeds`, async () => {
      const r = await ok(e, 'POST', `/vms/warm-states/${warmId}`, { name, vmid });
      const id = r.vm.generation_id;
      expect(id).to.match(UUID);
      expect([saved, ...resumed]).to.not.include(id);
      resumed.push(id);
      expect(await qemuSays([vmid])).to.deep.equal([id]);
      await untilReady(e, vmid, 300);
      expect((await sh(e, vmid, `dmesg | grep -c "${RESEED}" || true`)).trim()).to.equal('1');
      await ok(e, 'DELETE', `/vms/${vmid}`);
    });
  }

  it('refuses a warm state as an earlier hostd left it (no format): 409 saying what to do, nothing deleted, listed in host-status', async () => {
    await e.d.stop();
    const store = await Store.open(path.join(e.root, 'data', 'db'));
    try {
      const recs = new VmRecords(store);
      const w = (await recs.warmState(warmId))!;
      delete w.format;
      delete w.vmgenid;
      await recs.warm.put(warmId, w);
    } finally {
      await store.close();
    }
    e = await restart();
    const msg = `warm state '${warmId}' was saved before VMs had a VM generation ID device: a VM resumed from it could not be told to renew its randomness, so it is not resumed; delete it and save a new one from a running VM`;
    await fails(e, 'POST', `/vms/warm-states/${warmId}`, { name: 'old', vmid: 303 }, 409, msg);
    await fails(e, 'GET', '/vms/303', undefined, 404, 'VM 303 not found');
    const w = (await ok(e, 'GET', '/vms/warm-states')).warm_states.find((x: any) => x.id === warmId);
    expect(w).to.deep.include({ generation_id: null, format: 1, resumable: false, reason: msg });
    const h = await ok(e, 'GET', '/vms/host-status');
    expect(h.refused).to.deep.equal([{ kind: 'warm_state', id: warmId, rule: 'vmgenid', refuses: 'restore', message: msg }]);
    const dir = path.join(e.pools.p1, '.vms', 'warm', warmId);
    expect(fs.readdirSync(dir).sort()).to.deep.equal(['disk.qcow2', 'memory.state']);
    expect(qemuPids(e.root)).to.deep.equal([]);
    await ok(e, 'DELETE', `/vms/warm-states/${warmId}`);
    expect((await ok(e, 'GET', '/vms/host-status')).refused).to.deep.equal([]);
    expect((await api(e, 'GET', '/vms/warm-states')).body.warm_states).to.deep.equal([]);
  });
});
