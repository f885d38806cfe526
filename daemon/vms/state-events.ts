/**
 * `vms.state` events (docs/events.md, "What each domain reports"): every
 * change of a VM's state is reported once, whoever sees it first. The last
 * state reported is stored per VM (sublevel `vms_state_events`) in the same
 * batch as its event, so a restart reports only what changed while hostd
 * was down (`found-at-open`), and a change seen both by the call that made
 * it and by the machine's watch is reported once.
 *
 * Who reports: a call that changes a VM reports at its end, named by its
 * caller (`during`); while one runs, the watch leaves the VM to it. Outside
 * calls the machine's watch (QMP events and the process's end) reports with
 * `actor: 'runtime'` and a `reason`. VMs of another domain (`owner` set:
 * sandboxes, template builds) have no `vms.state` event (their owner
 * reports them in its own terms): their changes go to `onChange` listeners.
 */
import { EventEmitter } from 'node:events';
import type { EventsPort } from '../domain.js';
import { writeWithState } from '../events/state.js';
import { nextSignal, type NextSignal } from '../events/wake.js';
import { OPERATOR } from '../lib/operator.js';
import { SYNC, type BatchOp, type Sub } from '../store/store.js';
import type { Logger } from 'pino';
import type { MachineEvent, MachineRef, VmDriver } from './driver.js';
import type { VmRecord, VmRecords, VmState } from './records.js';

/** What reporting needs of the domain's context (context.ts is one; naming only this keeps the import one way). */
export interface StatesHost {
  readonly e: { log: Logger };
  readonly records: VmRecords;
  readonly driver: VmDriver;
  ref(vmid: number): MachineRef;
  state(rec: VmRecord): Promise<VmState>;
}

export type ReportedState = VmState | 'deleted';

/** A VM's change as the owning domain of an owned VM hears it. */
export interface VmStateChange {
  vmid: number;
  owner: string | null;
  labels: Record<string, string>;
  state: ReportedState;
  actor: string;
  /** Set for a change nobody asked for (`guest-shutdown`, `crashed`, `outside`, `found-at-open`). */
  reason?: string;
}

interface Reported {
  state: ReportedState;
  owner: string | null;
  labels: Record<string, string>;
}

export interface ReportOpts {
  actor?: string;
  reason?: string;
  /** The state when the caller knows it (a record change not yet written); else read from the record and the process. */
  state?: ReportedState;
  /** The caller's own store ops: written in the same batch as the event (or alone when nothing changed). */
  ops?: BatchOp[];
  /** The record as the caller is about to write it (a create, whose record is not in the store yet). */
  rec?: VmRecord;
}

export class VmStates {
  private readonly reported: Sub<Reported>;
  /** Calls under way per VM: while one runs, the watch leaves the reporting to it. */
  private readonly busy = new Map<number, number>();
  private readonly watches = new Map<number, () => void>();
  private readonly chains = new Map<number, Promise<unknown>>();
  private readonly listeners = new Set<(c: VmStateChange) => void>();
  /** Wakes waiters (wait-ready) after each report of a VM, and at `wake`, by vmid. */
  private readonly reports = new EventEmitter().setMaxListeners(0);
  private closed = false;

  constructor(
    private readonly c: StatesHost,
    private readonly events: EventsPort | undefined,
  ) {
    this.reported = c.records.store.sub<Reported>('vms_state_events');
  }

  /** Hears every change of an owned VM (the sandboxes domain). Returns the function that stops it. */
  onChange(fn: (c: VmStateChange) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /**
   * The next report of `vmid` (whether or not it changed the state): take it
   * before reading the state, then `wait` for it (or `ms`), then `cancel`.
   */
  next(vmid: number): NextSignal {
    return nextSignal(this.reports, String(vmid));
  }

  /** Wakes the waiters on `vmid` without a report (the end of a warm restore's identity step). */
  wake(vmid: number): void {
    this.reports.emit(String(vmid));
  }

  /** Marks a call under way on `vmid` until the returned function is called. */
  hold(vmid: number): () => void {
    this.busy.set(vmid, (this.busy.get(vmid) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const n = (this.busy.get(vmid) ?? 1) - 1;
      if (n <= 0) this.busy.delete(vmid);
      else this.busy.set(vmid, n);
    };
  }

  /** Runs a call that may change `vmid`, then reports where it left the VM, named by `actor` (also when it failed). */
  async during<T>(vmid: number, actor: string, fn: () => Promise<T>): Promise<T> {
    const release = this.hold(vmid);
    try {
      return await fn();
    } finally {
      release();
      await this.report(vmid, { actor }).catch((err) => this.c.e.log.error({ err, vmid }, 'vms: reporting a state change failed'));
    }
  }

  /**
   * Ends an intent with its outcome (`ops`) and the VM's new state in one
   * batch: the journal's commit (outcome, intent dropped) with the event.
   */
  commit(key: string, ops: BatchOp[], vmid: number, state: ReportedState, actor: string, rec?: VmRecord): Promise<void> {
    return this.report(vmid, { actor, state, rec, ops: [...ops, { type: 'del', sub: this.c.records.intents, key }] });
  }

  /** At open: what changed while hostd was down, once; then a watch on every running VM. */
  async open(): Promise<void> {
    const seen = new Set<number>();
    for (const rec of await this.c.records.allVms()) {
      seen.add(rec.vmid);
      await this.report(rec.vmid, { actor: 'runtime', reason: 'found-at-open' });
    }
    for await (const [key, r] of this.reported.iterator()) {
      const vmid = Number(key);
      if (!seen.has(vmid) && r.state !== 'deleted') await this.report(vmid, { actor: 'runtime', reason: 'found-at-open', state: 'deleted' });
    }
  }

  /**
   * Reports the VM's state when it differs from the last one reported: the
   * event and the stored last state in one synced batch, with `opts.ops`.
   * One report per VM at a time, in the order asked.
   */
  report(vmid: number, opts: ReportOpts = {}): Promise<void> {
    const prev = this.chains.get(vmid) ?? Promise.resolve();
    const run = prev.catch(() => undefined).then(() => this.reportNow(vmid, opts));
    this.chains.set(vmid, run);
    void run.catch(() => undefined).finally(() => this.chains.get(vmid) === run && this.chains.delete(vmid));
    return run;
  }

  private async reportNow(vmid: number, opts: ReportOpts): Promise<void> {
    try {
      await this.reportChange(vmid, opts);
    } finally {
      this.reports.emit(String(vmid));
    }
  }

  private async reportChange(vmid: number, opts: ReportOpts): Promise<void> {
    const ops = opts.ops ?? [];
    const key = String(vmid);
    const rec = opts.rec ?? (await this.c.records.vm(vmid));
    const last = await this.reported.get(key);
    const state: ReportedState | null = opts.state ?? (rec ? await this.c.state(rec) : last ? 'deleted' : null);
    if (state === 'running' || state === 'paused') this.watch(vmid);
    if (state === null || last?.state === state || (state === 'deleted' && !last && !rec)) {
      if (ops.length) await this.c.records.store.batch(ops, SYNC);
      return;
    }
    const owner = rec?.owner ?? last?.owner ?? null;
    const labels = rec?.labels ?? last?.labels ?? {};
    const mine: BatchOp =
      state === 'deleted' ? { type: 'del', sub: this.reported, key } : { type: 'put', sub: this.reported, key, value: { state, owner, labels } };
    const actor = opts.actor ?? OPERATOR;
    this.c.e.log.info({ vmid, state, was: last?.state ?? null, actor, reason: opts.reason ?? null, owner }, 'vms: state reported');
    if (owner === null && this.events) {
      const name = rec?.name;
      const data: Record<string, unknown> = { vmid, ...(name ? { name } : {}), ...(opts.reason ? { reason: opts.reason } : {}) };
      await writeWithState(this.events, this.c.records.store, [...ops, mine], {
        domain: 'vms',
        resource: `vms/${vmid}`,
        state,
        data,
        actor,
        summary: `VM ${vmid}${name ? ` '${name}'` : ''} is ${state}${opts.reason ? ` (${opts.reason})` : ''}`,
      });
    } else {
      await this.c.records.store.batch([...ops, mine], SYNC);
    }
    if (owner !== null) {
      for (const l of this.listeners) {
        try {
          l({ vmid, owner, labels, state, actor, ...(opts.reason ? { reason: opts.reason } : {}) });
        } catch (err) {
          this.c.e.log.error({ err, vmid }, 'vms: a state listener failed');
        }
      }
    }
  }

  /** Starts the machine's watch (once per running VM; it ends with the process). */
  private watch(vmid: number): void {
    if (this.closed || this.watches.has(vmid) || !this.c.driver.watch) return;
    const stop = this.c.driver.watch(this.c.ref(vmid), (e) => this.onMachine(vmid, e));
    this.watches.set(vmid, stop);
  }

  private onMachine(vmid: number, e: MachineEvent): void {
    if (e.type === 'exit') this.watches.delete(vmid);
    if (this.closed || this.busy.has(vmid)) return;
    if (e.type === 'qmp' && e.event === 'SHUTDOWN') return; // the exit that follows reports it
    const reason = e.type === 'exit' ? e.reason : 'outside';
    void this.settle(vmid, reason);
  }

  /** A change the watch saw (QEMU sends an event once its run state changed, and the exit once the process is gone). */
  private async settle(vmid: number, reason: string): Promise<void> {
    try {
      await this.report(vmid, { actor: 'runtime', reason });
    } catch (err) {
      this.c.e.log.error({ err, vmid }, 'vms: reporting a change the runtime made failed');
    }
  }

  close(): void {
    this.closed = true;
    for (const stop of this.watches.values()) stop();
    this.watches.clear();
  }
}
