/**
 * The one queue fork copies resume through: as a fork answers (fork.ts) and
 * when hostd starts again with copies still `booting` (upkeep.ts). Two
 * bounds, both host-wide:
 *
 * - `sandboxes.fork_resume_concurrency`: copies resuming at once (a resume
 *   loads the saved memory and, under TCG, runs the guest on a host core from
 *   its first instruction);
 * - `sandboxes.fork_max_guests` (0: none): a copy begins its resume only
 *   while fewer sandbox guests than this run on the host (every sandbox VM
 *   with a QEMU process, copies resuming included), so a fork never takes
 *   the host past that many guests; it waits `booting` until one goes
 *   (destroyed, suspended, stopped).
 *
 * A waiting copy holds no VM and no slot. The service makes one queue and
 * hands it to fork.ts and upkeep.ts; a slot frees when a resume ends, running or
 * failed, and a guest going frees room under `fork_max_guests`.
 */
import { O, SANDBOX_LABEL } from './driver.js';
import type { SandboxContext } from './context.js';

/** VM states with a QEMU process (a guest taking memory and a core). */
const WITH_PROCESS = new Set(['creating', 'running', 'paused']);

export class ForkResumes {
  /** Copies whose resume waits, oldest first. */
  private readonly waiting: string[] = [];
  /** Copies whose resume runs. */
  private readonly resuming = new Set<string>();
  private filling = false;
  private again = false;
  /** Whether the last fill stopped at fork_max_guests (said once in the log, not at every look). */
  private held = false;
  private retry: NodeJS.Timeout | null = null;
  private readonly unhear: () => void;

  constructor(private readonly c: SandboxContext) {
    // A sandbox's guest that goes (or comes) changes the room under fork_max_guests.
    this.unhear =
      c.vms.onStateChange?.((ch) => {
        if (ch.owner === O.owner && this.waiting.length) this.pump();
      }) ?? (() => undefined);
  }

  /** Queues the copies' resumes (each once); each begins when the bounds allow. */
  add(ids: string[]): void {
    for (const id of ids) if (!this.waiting.includes(id) && !this.resuming.has(id)) this.waiting.push(id);
    this.pump();
  }

  close(): void {
    this.unhear();
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
  }

  /** One fill at a time: a change heard during one fills again after it. */
  private pump(): void {
    if (this.filling) {
      this.again = true;
      return;
    }
    this.filling = true;
    void this.fill()
      .catch((err) => this.c.e.log.error({ err }, 'sandboxes: starting queued fork resumes failed'))
      .finally(() => {
        this.filling = false;
        if (this.again) {
          this.again = false;
          this.pump();
        }
      });
  }

  private async fill(): Promise<void> {
    const s = this.c.e.settings;
    while (this.waiting.length && this.resuming.size < s.forkResumeConcurrency && !this.c.closed) {
      if (s.forkMaxGuests > 0) {
        const guests = await this.guests();
        if (guests >= s.forkMaxGuests) {
          if (!this.held)
            this.c.e.log.info({ waiting: this.waiting.length, guests, fork_max_guests: s.forkMaxGuests }, 'sandboxes: fork copies wait for a guest to go');
          this.held = true;
          // The VM service's changes wake the queue; this is the safety net when none comes (a driver without them).
          if (this.retry) clearTimeout(this.retry);
          this.retry = setTimeout(() => this.pump(), s.waitPollMs);
          this.retry.unref();
          return;
        }
      }
      this.held = false;
      const id = this.waiting.shift()!;
      this.c.startBoot(id);
      const boot = this.c.boots.get(id);
      // Not started (the domain is shutting down, or a boot of it already runs): it takes no slot.
      if (!boot) continue;
      this.resuming.add(id);
      this.c.e.log.info({ id, resuming: this.resuming.size, waiting: this.waiting.length }, 'sandboxes: a fork copy begins to resume');
      void boot.done.finally(() => {
        this.resuming.delete(id);
        this.pump();
      });
    }
  }

  /**
   * The sandbox guests there are or will be: VMs of sandboxes with a QEMU
   * process, and each copy resuming once (before its VM exists too). A VM of
   * a copy still waiting is left out: it is an earlier attempt's, which that
   * copy's own resume removes (hostd stopped during it).
   */
  private async guests(): Promise<number> {
    const seen = new Set<string>();
    let n = 0;
    for (const v of await this.c.vms.listOwned(O.owner)) {
      const sid = v.labels[SANDBOX_LABEL];
      if (!WITH_PROCESS.has(v.state) || (sid !== undefined && this.waiting.includes(sid))) continue;
      n++;
      if (sid !== undefined) seen.add(sid);
    }
    for (const id of this.resuming) if (!seen.has(id)) n++;
    return n;
  }
}
