/**
 * One VM daemon shared by the VM runtime files of a mocha process whose tests
 * are not about a cold boot (exec output, a guest powering itself off, the
 * escalation suite's guest): the test guest imported as `deb12` (and a blank
 * disk as `blank`), and one warm state of the guest, saved once, when the
 * first of those files asks (one cold boot for all of them). Each of their
 * VMs then resumes that state in seconds instead of booting (a minute or
 * more under TCG). The daemon outlives the file that started it (the root
 * hooks stop it at the end of the run); when a file ends, its VMs are deleted
 * and its tokens revoked, so that the next file finds the same state. No
 * guest runs between files.
 */
import { expect } from 'chai';
import { eventually, shareDaemon } from './daemon.js';
import { importImages } from './sandboxes-fixture.js';
import { ok, qemuPids, sh, startVmsDaemon, succeeded, untilReady, type VmsEnv } from './vms-fixture.js';

/** The VM the shared warm state is saved from (deleted right after). */
const SOURCE_VMID = 990;
const BOOT_S = 900;

export interface SharedVms {
  e: VmsEnv;
  /** The warm state of image deb12 every VM of these files resumes. */
  warmId: string;
}

let shared: Promise<SharedVms> | undefined;

function prepareShared(): Promise<SharedVms> {
  shared ??= (async () => {
    const e = await startVmsDaemon();
    shareDaemon(e.d);
    await importImages(e);
    await ok(e, 'POST', '/vms', { name: 'shared-warm-source', image_id: 'deb12', vmid: SOURCE_VMID, linked_clone: true }, 201);
    await ok(e, 'POST', `/vms/${SOURCE_VMID}/start`, {});
    await untilReady(e, SOURCE_VMID, BOOT_S);
    await sh(e, SOURCE_VMID, 'sync');
    const t = await ok(e, 'POST', `/vms/${SOURCE_VMID}/warm-states`, { name: 'shared warm' }, 201);
    await succeeded(e, t.task.task_id);
    // The warm state keeps its own link to the disk: the source goes, so that no guest runs between files.
    await ok(e, 'DELETE', `/vms/${SOURCE_VMID}`);
    await eventually(() => qemuPids(e.root).length === 0, 60_000, 'the warm state source to end');
    return { e, warmId: t.warm_state_id as string };
  })().catch((err) => {
    // A failed preparation is tried again by the next file rather than failing every file with the same stale error.
    shared = undefined;
    throw err;
  });
  return shared;
}

export interface VmsLease extends SharedVms {
  /** Token secrets by name, made for this file. */
  tokens: Record<string, string>;
  /** A new VM `vmid` resumed from the shared warm state, its agent answering; its view. */
  resume(vmid: number, name: string): Promise<any>;
  /** Deletes every VM and warm state this file made, revokes its tokens, and waits until no QEMU of the daemon runs. */
  release(): Promise<void>;
}

/** The shared VM daemon (prepared on first use) with tokens `scopes` (name → scopes) for one test file. */
export async function leaseSharedVms(scopes: Record<string, string[]> = {}): Promise<VmsLease> {
  const s = await prepareShared();
  const { e } = s;
  const vmsBefore = new Set(((await ok(e, 'GET', '/vms')).vms as Array<{ vmid: number }>).map((v) => v.vmid));
  const statesBefore = new Set(((await ok(e, 'GET', '/vms/warm-states')).warm_states as Array<{ id: string }>).map((w) => w.id));
  const tokens: Record<string, string> = {};
  for (const [name, sc] of Object.entries(scopes)) tokens[name] = await e.d.token(name, sc);
  const resume = async (vmid: number, name: string) => {
    // Its identity is not asserted: on a loaded machine the agent may answer only after the restore gave up
    // setting it, and these files are not about it (generation-id and lifecycle are).
    const r = await ok(e, 'POST', `/vms/warm-states/${s.warmId}`, { name, vmid });
    await untilReady(e, vmid, 300);
    return r.vm;
  };
  const release = async () => {
    for (const v of (await ok(e, 'GET', '/vms')).vms as Array<{ vmid: number }>) if (!vmsBefore.has(v.vmid)) await ok(e, 'DELETE', `/vms/${v.vmid}`);
    for (const w of (await ok(e, 'GET', '/vms/warm-states')).warm_states as Array<{ id: string }>)
      if (!statesBefore.has(w.id)) await ok(e, 'DELETE', `/vms/warm-states/${w.id}`);
    for (const name of Object.keys(tokens)) {
      const r = await e.d.admin.request('DELETE', `/admin/tokens/${name}`);
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
    }
    await eventually(() => qemuPids(e.root).length === 0, 60_000, 'no QEMU of the shared VM daemon left');
  };
  return { ...s, tokens, resume, release };
}
