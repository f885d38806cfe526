/**
 * The sandbox service: disposable VMs owned by the token that created them,
 * started from a warm state where one fits (a resume on a linked clone, with
 * the sandbox's own identity set right after) and cold-booted otherwise.
 *
 * - Ownership is by token id: another token gets 404, never 403, and never
 *   sees the sandbox in a list (a forwarded call carries the same token id).
 * - A create answers at once with the sandbox `booting`; a background boot
 *   takes it to `running`. Admission (idempotency key, caps, capacity, name)
 *   is one short critical section per host, and the record and its
 *   idempotency key are written in one batch before any VM exists.
 * - The VM service is the truth about processes and files: a ready sandbox's
 *   state (running, suspended, stopped) is its VM's, so its suspend and resume
 *   are crash-safe through the VM service's own journal. Destroys go through
 *   this domain's intent journal; `recover()` finishes them, continues boots,
 *   and removes VMs no sandbox owns.
 *
 * This class composes the domain's parts, one file per concern
 * (admission.ts, reads.ts, lifecycle.ts, guest.ts, fork.ts, warm-states.ts, upkeep.ts) over the
 * shared context (context.ts).
 *
 * Response shapes and decisions: docs/sandboxes.md.
 */
import { SandboxContext } from './context.js';
import { SandboxAdmission } from './admission.js';
import { SandboxReads } from './reads.js';
import { SandboxLifecycle } from './lifecycle.js';
import { SandboxWarmStates } from './warm-states.js';
import { SandboxUpkeep } from './upkeep.js';
import { SandboxGuest } from './guest.js';
import { SandboxFork } from './fork.js';
import { ForkResumes } from './fork-resumes.js';

export type { CreateArgs, SandboxEnv, SandboxState, SandboxView } from './context.js';

export class SandboxService extends SandboxContext {
  private readonly admission = new SandboxAdmission(this);
  private readonly reads = new SandboxReads(this);
  private readonly lifecycle = new SandboxLifecycle(this);
  private readonly warm = new SandboxWarmStates(this);
  // One queue for fork copies, whether a fork or a restart queues them.
  private readonly resumes = new ForkResumes(this);
  private readonly upkeep = new SandboxUpkeep(this, this.resumes);
  private readonly guest = new SandboxGuest(this);
  private readonly forks = new SandboxFork(this, this.admission, this.resumes);

  // admission.ts
  readonly create = this.admission.create.bind(this.admission);
  // reads.ts
  readonly list = this.reads.list.bind(this.reads);
  readonly get = this.reads.get.bind(this.reads);
  readonly wait = this.reads.wait.bind(this.reads);
  readonly images = this.reads.images.bind(this.reads);
  // lifecycle.ts
  readonly suspend = this.lifecycle.suspend.bind(this.lifecycle);
  readonly resume = this.lifecycle.resume.bind(this.lifecycle);
  readonly destroy = this.lifecycle.destroy.bind(this.lifecycle);
  // warm-states.ts
  readonly saveWarm = this.warm.saveWarm.bind(this.warm);
  readonly warmStates = this.warm.warmStates.bind(this.warm);
  readonly deleteWarm = this.warm.deleteWarm.bind(this.warm);
  readonly keepWarm = this.warm.keepWarm.bind(this.warm);
  // guest.ts
  readonly execIn = this.guest.exec.bind(this.guest);
  readonly fileGet = this.guest.get.bind(this.guest);
  readonly filePut = this.guest.put.bind(this.guest);
  readonly fileDelete = this.guest.remove.bind(this.guest);
  // fork.ts
  readonly fork = this.forks.fork.bind(this.forks);
  // upkeep.ts
  readonly listAll = this.upkeep.listAll.bind(this.upkeep);
  readonly exec = this.upkeep.exec.bind(this.upkeep);
  readonly guests = this.upkeep.guests.bind(this.upkeep);
  readonly recover = this.upkeep.recover.bind(this.upkeep);
  readonly prune = this.upkeep.prune.bind(this.upkeep);
  readonly close = this.upkeep.close.bind(this.upkeep);
}
