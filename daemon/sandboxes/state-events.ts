/**
 * `sandboxes.state` events (docs/events.md, "What each domain reports"): each
 * change of a sandbox's state (as GET /sandboxes/{id} shows it) is reported
 * once, to its owner token only. The last state reported is stored per
 * sandbox (sublevel `sandboxes_state_events`), in the same synced batch as
 * the event and, for a change of the sandbox's record, as that record: a
 * crash leaves the three together or none of them.
 *
 * Who reports: the service where it writes a record, with the owner as
 * actor (the operator's name for a destroy by the operator); a suspend or
 * resume once its VM call returned, naming the state it left; and a change of
 * its VM that nobody asked for (the guest powered itself off, QEMU died),
 * heard from the VM service, with `actor: 'runtime'` and the VM's `reason`.
 */
import type { EventsPort } from '../domain.js';
import { writeWithState } from '../events/state.js';
import { SYNC, type BatchOp, type Sub } from '../store/store.js';
import type { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { SandboxRecord, SandboxRecords, SandboxState } from './records.js';

/** What reporting needs of the domain's context (context.ts is one; naming only this keeps the import one way). */
export interface StatesHost {
  readonly e: { log: Logger };
  readonly records: SandboxRecords;
  readonly changes: EventEmitter;
  view(rec: SandboxRecord): Promise<{ state: SandboxState }>;
}

export interface SandboxReportOpts {
  actor?: string;
  reason?: string;
  /** The record as the caller is about to write it (its ops in `ops`). */
  rec?: SandboxRecord;
  /**
   * The state when the caller knows it (the VM call it just made): read
   * otherwise, which for a report after a call could name the caller for a
   * change the runtime made meanwhile (a guest that died right after).
   */
  state?: SandboxState;
  /** The caller's own store ops, written in the same batch as the event (or alone when nothing changed). */
  ops?: BatchOp[];
}

export class SandboxStates {
  private readonly reported: Sub<{ state: SandboxState }>;
  private readonly chains = new Map<string, Promise<unknown>>();

  constructor(
    private readonly c: StatesHost,
    private readonly events: EventsPort | undefined,
  ) {
    this.reported = c.records.store.sub<{ state: SandboxState }>('sandboxes_state_events');
  }

  /** Reports the sandbox's state when it differs from the last one reported; one report per sandbox at a time, in order. */
  report(id: string, opts: SandboxReportOpts = {}): Promise<void> {
    const prev = this.chains.get(id) ?? Promise.resolve();
    const run = prev.catch(() => undefined).then(() => this.reportNow(id, opts));
    this.chains.set(id, run);
    void run.catch(() => undefined).finally(() => this.chains.get(id) === run && this.chains.delete(id));
    return run;
  }

  /** Reports without failing the caller (a signal after a change already stored). */
  soon(id: string, opts: SandboxReportOpts = {}): void {
    void this.report(id, opts).catch((err) => this.c.e.log.error({ err, id }, 'sandboxes: reporting a state change failed'));
  }

  private async reportNow(id: string, opts: SandboxReportOpts): Promise<void> {
    const ops = opts.ops ?? [];
    const rec = opts.rec ?? (await this.c.records.get(id));
    const last = await this.reported.get(id);
    const state = rec ? (opts.state ?? (await this.c.view(rec)).state) : null;
    if (!rec || state === null || last?.state === state) {
      if (ops.length) await this.c.records.store.batch(ops, SYNC);
      return;
    }
    const mine: BatchOp = { type: 'put', sub: this.reported, key: id, value: { state } };
    if (!this.events) {
      await this.c.records.store.batch([...ops, mine], SYNC);
      return;
    }
    const actor = opts.actor ?? (state === 'destroyed' && rec.destroyed_by ? rec.destroyed_by : rec.token_name);
    this.c.e.log.info({ id, state, was: last?.state ?? null, actor, reason: opts.reason ?? null }, 'sandboxes: state reported');
    const data: Record<string, unknown> = {
      id,
      name: rec.name,
      vmid: rec.vmid,
      ...(opts.reason ? { reason: opts.reason } : {}),
      ...(state === 'failed' && rec.error ? { error: rec.error } : {}),
    };
    await writeWithState(this.events, this.c.records.store, [...ops, mine], {
      domain: 'sandboxes',
      resource: `sandboxes/${id}`,
      state,
      data,
      actor,
      owner: rec.token_id,
      summary: `sandbox ${id} '${rec.name}' is ${state}${opts.reason ? ` (${opts.reason})` : ''}`,
    });
    // Also a change no record write signals (its VM crashed): the waiters (POST /sandboxes/{id}/wait) learn it from here.
    this.c.changes.emit(id);
  }

  /** Forgets the last state of a sandbox whose tombstone is pruned (in the prune's batch). */
  forget(id: string): BatchOp {
    return { type: 'del', sub: this.reported, key: id };
  }
}
