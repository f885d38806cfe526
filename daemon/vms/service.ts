/**
 * The VM service: the spec's rules for VMs on QEMU (states and 409s, image
 * minimums, cloud-init settings, disks, warm states, templates), with a lock
 * per resource, crash-safe changes through the intent journal, and long work
 * as tasks. Response shapes and decisions: docs/vms.md.
 *
 * This class composes the domain's parts, one file per resource or concern
 * (create.ts, lifecycle.ts, cloud-init.ts, guest.ts, disks.ts,
 * warm-states.ts, inventory.ts, host-status.ts) over the shared context
 * (context.ts), and is the one entry point handlers and other domains use.
 *
 * ## Service API for other domains (sandboxes)
 *
 * Another domain that runs VMs (the sandboxes domain) uses this class, never
 * a second driver. It receives this domain's instance in the domain list
 * (daemon/domains.ts) and calls `service()` on it (index.ts). `ctx`
 * is a NoteSink (`noNotes` outside a request); `o = { owner }` is the calling
 * domain's marker (e.g. `{ owner: 'sandbox' }`) and must be passed on every
 * call for its VMs:
 *
 *   create(input, ctx, { owner, labels })      VM from an image; input is POST /vms's
 *                                              arguments (seed_data, skip_rekey, cpu_cores,
 *                                              memory_mb, disk_size_gb...); owners get a linked
 *                                              clone unless input.linked_clone is false. The
 *                                              identity (hostname, machine-id, SSH host keys,
 *                                              /etc/svc/seed) is written by the first start,
 *                                              before the guest boots. Returns { vm, task }.
 *   restoreWarmState(id, { name, vmid?, seed_data?, skip_rekey?, labels?, autostart? }, ctx, o)
 *                                              new VM on a linked clone of the warm state's
 *                                              disk, resumed from its memory: running when it
 *                                              returns; its own hostname, machine-id, seed and
 *                                              SSH host keys are set through the guest agent
 *                                              right after the resume. { vm, resume_ms, identity }
 *   start / stop / suspend / resume / remove (vmid, ctx, o)
 *   exec(vmid, command, timeoutSeconds, ctx, o, opts?)   through the guest agent; opts: env, cwd,
 *                                              user, input (stdin), encoding
 *   guestFileGet / guestFilePut / guestFileDelete (vmid, path, ..., o)
 *                                              guest files by path (guest-files.ts)
 *   waitReady(vmid, timeoutSeconds, o)                   running and the agent answers
 *   saveWarmState(vmid, name, ctx, { owner, wait: true }) resolves when saved
 *   warmStates({ owner, image_id })                      warm states per image
 *   deleteWarmState(id, ctx, o)
 *   get(vmid, o) / listOwned(owner)                      views of the VMs
 *   guestInfo(vmid)                                      what GET /system/allocation counts
 *
 * `owner` marks VMs (and warm states) as belonging to that domain: the /vms
 * endpoints neither list nor act on them (404, as if absent), and the vms
 * domain's `guests` port leaves them out, so the owning domain reports them
 * itself (guestInfo helps). Their vmids share the one VM id space.
 */
import { SEED_NS, TEMPLATE_BUILD_OWNER, VmContext } from './context.js';
import { VmCreation } from './create.js';
import { VmLifecycle } from './lifecycle.js';
import { VmCloudInit } from './cloud-init.js';
import { VmGuest } from './guest.js';
import { VmGuestFiles } from './guest-files.js';
import { VmDisks } from './disks.js';
import { VmWarmStates } from './warm-states.js';
import { VmInventory } from './inventory.js';
import { VmHostStatus } from './host-status.js';
import type { VmStateChange } from './state-events.js';
import type { NoteSink } from '../lib/caller.js';
import { actorOf } from '../lib/operator.js';

export {
  agentFailure,
  VM_LOCK_LABELS,
  warmRefusal,
  type CloudInitUpdate,
  type CreateInput,
  type OwnerOpts,
  type VmEnv,
  type VmState,
  type VmView,
} from './context.js';
export type { JournalOp } from '../lib/journal.js';
export type { VmIntent } from './records.js';
export type { VmStateChange } from './state-events.js';

export class VmService extends VmContext {
  private readonly creation = new VmCreation(this);
  private readonly lifecycle = new VmLifecycle(this);
  private readonly cloudInits = new VmCloudInit(this);
  private readonly guest = new VmGuest(this);
  private readonly guestFiles = new VmGuestFiles(this);
  private readonly disks = new VmDisks(this);
  private readonly warm = new VmWarmStates(this);
  private readonly inventory = new VmInventory(this);
  private readonly hostStatusPart = new VmHostStatus(this);

  // create.ts
  readonly create = this.creation.create.bind(this.creation);
  readonly clone = this.creation.clone.bind(this.creation);
  // lifecycle.ts (each reports where it left the VM: state-events.ts)
  readonly start = this.reporting(this.lifecycle.start.bind(this.lifecycle));
  readonly stop = this.reporting(this.lifecycle.stop.bind(this.lifecycle));
  readonly suspend = this.reporting(this.lifecycle.suspend.bind(this.lifecycle));
  readonly resume = this.reporting(this.lifecycle.resume.bind(this.lifecycle));
  readonly remove = this.reporting(this.lifecycle.remove.bind(this.lifecycle));
  readonly update = this.lifecycle.update.bind(this.lifecycle);
  readonly autostart = this.lifecycle.autostart.bind(this.lifecycle);
  // cloud-init.ts
  readonly cloudInit = this.cloudInits.cloudInit.bind(this.cloudInits);
  // guest.ts
  readonly exec = this.guest.exec.bind(this.guest);
  readonly waitReady = this.guest.waitReady.bind(this.guest);
  readonly waitIp = this.guest.waitIp.bind(this.guest);
  readonly connection = this.guest.connection.bind(this.guest);
  // guest-files.ts
  readonly guestFileGet = this.guestFiles.guestFileGet.bind(this.guestFiles);
  readonly guestFilePut = this.guestFiles.guestFilePut.bind(this.guestFiles);
  readonly guestFileDelete = this.guestFiles.guestFileDelete.bind(this.guestFiles);
  // disks.ts
  readonly diskAttach = this.disks.diskAttach.bind(this.disks);
  readonly diskGrow = this.disks.diskGrow.bind(this.disks);
  readonly diskDelete = this.disks.diskDelete.bind(this.disks);
  // warm-states.ts
  readonly warmStates = this.warm.warmStates.bind(this.warm);
  readonly saveWarmState = this.warm.saveWarmState.bind(this.warm);
  readonly restoreWarmState = this.warm.restoreWarmState.bind(this.warm);
  readonly deleteWarmState = this.warm.deleteWarmState.bind(this.warm);
  // inventory.ts
  readonly list = this.inventory.list.bind(this.inventory);
  readonly get = this.inventory.get.bind(this.inventory);
  readonly listOwned = this.inventory.listOwned.bind(this.inventory);
  readonly guestInfo = this.inventory.guestInfo.bind(this.inventory);
  readonly guests = this.inventory.guests.bind(this.inventory);
  readonly docsGet = this.inventory.docsGet.bind(this.inventory);
  readonly docsSet = this.inventory.docsSet.bind(this.inventory);
  // host-status.ts
  readonly hostStatus = this.hostStatusPart.hostStatus.bind(this.hostStatusPart);
  readonly refusedResources = this.hostStatusPart.refusedResources.bind(this.hostStatusPart);
  readonly capacity = this.hostStatusPart.capacity.bind(this.hostStatusPart);

  /** Hears every state change of a VM another domain owns (state-events.ts). */
  onStateChange(fn: (c: VmStateChange) => void): () => void {
    return this.states.onChange(fn);
  }

  /** A call on one VM that may change its state: the watch leaves the VM to it, and it reports at its end, named by its caller. */
  private reporting<A extends [number, NoteSink, ...unknown[]], R>(fn: (...a: A) => Promise<R>): (...a: A) => Promise<R> {
    return (...a: A) => this.states.during(a[0], actorOf(a[1] as { caller?: { tokenName: string } }), () => fn(...a));
  }

  static readonly TEMPLATE_BUILD_OWNER = TEMPLATE_BUILD_OWNER;
  static readonly SEED_NS = SEED_NS;
}
