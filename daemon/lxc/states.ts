/**
 * `lxc.state` events: what a client sees of a container's life, each settled
 * change once. The last state reported is stored per container (lxc_meta
 * `state:<lxcid>`), so a change is reported once whoever saw it first (the
 * call that made it, the runtime watch, the check at open) and a change
 * while the daemon was down is reported at the next open.
 *
 * A call reports after its change, inside its container lock. The watch
 * reports only what no call is making: a signal for a container whose lock
 * is held is left to the call, and a check whose container a call changed
 * meanwhile is dropped (`generation`), so a stale reading never follows
 * the call's event. Reports of one container are serialised (`chain`).
 *
 * An event, the stored state it leaves and, for a create, clone or delete,
 * the record's commit go in one synced batch (`writeWithState`): a crash
 * leaves all of them or none, so a change is never lost nor reported twice.
 * A call's own report is written lazily when its activity row follows it,
 * synced, before the call answers (`NoteSink.rowSyncs`).
 */
import type { EventsPort } from '../domain.js';
import { writeWithState } from '../events/state.js';
import type { JournalDb } from '../lib/journal.js';
import { actorOf } from '../lib/operator.js';
import { LAZY, SYNC, type BatchOp } from '../store/store.js';
import type { LxcState, StateSignal } from './driver.js';
import { LxcContext, type ChangeSink, type LxcDeps, type LxcStates, type ReportedState } from './context.js';
import { ctKey } from './records.js';
import { LXC_NAME_PREFIX } from './naming.js';

/** Who reports a change nobody's call made. */
export const RUNTIME_ACTOR = 'runtime';

const SETTLED: Partial<Record<LxcState, ReportedState>> = { STOPPED: 'STOPPED', RUNNING: 'RUNNING', FROZEN: 'FROZEN' };

/** What is stored after a report: `created` leaves a stopped container behind, `deleted` nothing. */
const AFTER: Record<ReportedState, LxcState | null> = { STOPPED: 'STOPPED', RUNNING: 'RUNNING', FROZEN: 'FROZEN', created: 'STOPPED', deleted: null };

const metaKey = (lxcid: number) => `state:${ctKey(lxcid)}`;

export class StateReports implements LxcStates {
  private readonly chain = new Map<number, Promise<void>>();
  /**
   * Containers a signal came for while a call held them, with the last
   * settled state the runtime said (undefined: not known): checked when the
   * call ends (`afterCall`).
   */
  private readonly deferred = new Map<number, LxcState | undefined>();
  /** Bumped by every call's report: a watcher's check begun before it is stale. */
  private readonly generation = new Map<number, number>();
  /**
   * The stored state of each container (lxc_meta `state:<lxcid>`) as this
   * process last read or wrote it (null: none stored). This class is its
   * only writer, so a report reads it here rather than from the store.
   */
  private readonly stored = new Map<number, LxcState | null>();

  constructor(
    private readonly ctx: LxcContext,
    private readonly events: EventsPort,
  ) {}

  /**
   * A call changed the container (under its lock): report it. Written before
   * the call answers; lazily when the call's activity row follows it, synced,
   * before the answer (one fsync for the two).
   */
  async changed(lxcid: number, state: ReportedState, by: ChangeSink): Promise<void> {
    this.generation.set(lxcid, (this.generation.get(lxcid) ?? 0) + 1);
    const how = by.rowSyncs ? LAZY : SYNC;
    await this.serial(lxcid, () => this.publish(lxcid, state, {}, { actor: actorOf(by) }, state === 'created' || state === 'deleted', [], how));
    if (state === 'deleted') this.generation.delete(lxcid);
  }

  /**
   * Where a call's journal commits a change of the record (create, clone:
   * `created`; delete: `deleted`): its ops are written with the event and
   * the stored state in one batch.
   */
  committing(lxcid: number, state: 'created' | 'deleted', actor: string): JournalDb {
    return {
      batch: async (ops) => {
        this.generation.set(lxcid, (this.generation.get(lxcid) ?? 0) + 1);
        await this.serial(lxcid, () => this.publish(lxcid, state, {}, { actor }, true, ops as BatchOp[]));
        if (state === 'deleted') this.generation.delete(lxcid);
      },
    };
  }

  /** The runtime said something happened to `lxcName`: report what the container is now, unless a call is at work. */
  observe(s: StateSignal): void {
    if (!s.lxcName.startsWith(LXC_NAME_PREFIX)) return;
    const lxcid = Number(s.lxcName.slice(LXC_NAME_PREFIX.length));
    if (!Number.isSafeInteger(lxcid)) return;
    // Transient states settle into another signal; only settled ones are checked.
    if (!SETTLED[s.state]) return;
    this.check(lxcid, 'watch', s.exitStatus, s.state).catch((err) => this.ctx.log.warn({ err, lxcid }, 'lxc: cannot report a state change'));
  }

  /** Every container against what was last reported (at open, and after the watch restarted). */
  async checkAll(why: 'open' | 'watch'): Promise<void> {
    const recs = await this.ctx.records.all();
    const ids = new Set(recs.map((r) => r.lxcid));
    for (const r of recs) await this.check(r.lxcid, why).catch((err) => this.ctx.log.warn({ err, lxcid: r.lxcid }, 'lxc: cannot check a container state'));
    if (why !== 'open') return;
    // A delete a crash cut short is finished by recovery, which drops the record: its event is owed.
    for (const key of await this.ctx.records.meta.keys().all()) {
      const m = /^state:(\d+)$/.exec(key);
      if (!m) continue;
      const lxcid = Number(m[1]);
      if (!ids.has(lxcid)) await this.serial(lxcid, () => this.publish(lxcid, 'deleted', { reason: 'found-at-open' }, { actor: RUNTIME_ACTOR }, true));
    }
  }

  /**
   * A call that held the container ended: a signal that came meanwhile is
   * checked now (a call that changes nothing, an update or a disk change,
   * reports nothing itself, and an outside stop during it must not be lost).
   */
  afterCall(lxcid: number): void {
    const said = this.deferred.get(lxcid);
    if (!this.deferred.delete(lxcid)) return;
    // The runtime's last word is what the call itself just reported (its own
    // stop's STOPPED): nothing to report, and no lxc-info to run for it.
    if (said !== undefined && this.stored.get(lxcid) === said) return;
    this.check(lxcid, 'watch').catch((err) => this.ctx.log.warn({ err, lxcid }, 'lxc: cannot report a state change'));
  }

  private async check(lxcid: number, why: 'open' | 'watch', exitStatus?: number, said?: LxcState): Promise<void> {
    if (this.ctx.lock.busy(`ct:${lxcid}`)) {
      if (why === 'watch') this.deferred.set(lxcid, said);
      return;
    }
    const gen = this.generation.get(lxcid) ?? 0;
    await this.serial(lxcid, async () => {
      const rec = await this.ctx.records.get(lxcid);
      if (!rec) return;
      const now = SETTLED[await this.ctx.driver.tools.state(`${LXC_NAME_PREFIX}${lxcid}`)];
      if (this.ctx.lock.busy(`ct:${lxcid}`)) {
        if (why === 'watch') this.deferred.set(lxcid, said);
        return;
      }
      if (!now || (this.generation.get(lxcid) ?? 0) !== gen) return;
      const last = await this.last(lxcid);
      if (last === undefined && why === 'open') {
        // A container from before state events (one created since has its stored state from its create's batch): remember where it stands, report nothing.
        await this.ctx.records.meta.put(metaKey(lxcid), now);
        this.stored.set(lxcid, now as LxcState);
        return;
      }
      if (last === now) return;
      const data: Record<string, unknown> = { reason: why === 'open' ? 'found-at-open' : now === 'STOPPED' ? 'init-exited' : 'outside' };
      if (now === 'STOPPED' && exitStatus !== undefined) data.exit_status = exitStatus;
      await this.publish(lxcid, now, data, { actor: RUNTIME_ACTOR }, false);
    });
  }

  private async last(lxcid: number): Promise<LxcState | null | undefined> {
    if (!this.stored.has(lxcid)) this.stored.set(lxcid, ((await this.ctx.records.meta.get(metaKey(lxcid))) as LxcState | null | undefined) ?? null);
    return this.stored.get(lxcid) ?? undefined;
  }

  private async publish(
    lxcid: number,
    state: ReportedState,
    data: Record<string, unknown>,
    opts: { actor: string },
    always: boolean,
    ops: BatchOp[] = [],
    sync: {} = SYNC,
  ): Promise<void> {
    if (!always && (await this.last(lxcid)) === state) return;
    const after = AFTER[state];
    const mark: BatchOp = after
      ? { type: 'put', sub: this.ctx.records.meta, key: metaKey(lxcid), value: after }
      : { type: 'del', sub: this.ctx.records.meta, key: metaKey(lxcid) };
    // Unknown while the batch is in flight: a failed batch may or may not have been stored.
    this.stored.delete(lxcid);
    await writeWithState(
      this.events,
      this.ctx.records.store,
      [...ops, mark],
      {
        domain: 'lxc',
        resource: `lxc/${lxcid}`,
        state,
        data,
        actor: opts.actor,
        summary: `container ${lxcid} is ${state}`,
      },
      sync,
    );
    if (after) this.stored.set(lxcid, after);
    await this.ctx.pause('state.written');
  }

  /** Resolves once every report under way is written (close waits for it: the store closes after). */
  async idle(): Promise<void> {
    while (this.chain.size) await Promise.all([...this.chain.values()]);
  }

  private serial(lxcid: number, fn: () => Promise<void>): Promise<void> {
    const prev = this.chain.get(lxcid) ?? Promise.resolve();
    const mine = prev.then(fn, fn);
    const tail = mine.catch(() => undefined);
    this.chain.set(lxcid, tail);
    // The map holds only containers with a report under way.
    void tail.then(() => {
      if (this.chain.get(lxcid) === tail) this.chain.delete(lxcid);
    });
    return mine;
  }
}

/** The domain's context with its state reports (the context itself imports none of its users). */
export function lxcContext(d: LxcDeps): LxcContext {
  const ctx = new LxcContext(d);
  ctx.states = new StateReports(ctx, d.events);
  return ctx;
}
