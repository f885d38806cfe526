/**
 * `apps.state` events: each change of an app's state (views.ts `stateOf`:
 * its record, what holds its lock, its containers) once, and `uninstalled`.
 * The last state reported is stored per app (sublevel `apps_state`), so a
 * change is reported once whoever saw it first (the call that made it, the
 * engine watch, the check at open), and a change while the daemon was down
 * at the next open.
 *
 * Every report reads the state as it is now (after the change is stored),
 * one app at a time (`chain`): a late reading never overwrites a newer one.
 * The engine watch reports only what no call is making (a signal for an
 * app whose lock is held is the call's to report, when it ends).
 *
 * An event and the stored state go in one synced batch (`writeWithState`),
 * and so does the record's commit of a call (`commit`): an install, an
 * uninstall, an action, and the last commit of an install, move or update
 * whether it runs as a task or not. A crash leaves all of them or none.
 */
import type { EventsPort } from '../domain.js';
import { writeWithState } from '../events/state.js';
import type { JournalOp } from '../lib/journal.js';
import type { BatchOp } from '../store/store.js';
import type { Release } from '../lib/lock.js';
import { AppsContext, appKey, type AppsContextDeps, type AppsStates } from './context.js';
import type { ContainerSignal } from './driver.js';
import { stateOf } from './views.js';

/** Who reports a change nobody's call made. */
export const RUNTIME_ACTOR = 'runtime';

export class AppStates implements AppsStates {
  private readonly chain = new Map<string, Promise<void>>();

  constructor(
    private readonly c: AppsContext,
    private readonly events: EventsPort,
  ) {}

  /** Reports the app's state if it changed (resolves once the event is stored). */
  refresh(appId: string, actor: string, data: Record<string, unknown> = {}): Promise<void> {
    return this.serial(appId, () => this.report(appId, actor, data, false));
  }

  /**
   * Writes `ops` (a call's commit, which puts or forgets the app's record)
   * with the event of the state they leave the app in, in one batch.
   * `settling`: the state read ignores what holds the app's lock (a task's
   * commit: `moving` and `updating` end when it lets go, and its event is
   * already written then).
   */
  commit(appId: string, actor: string, ops: JournalOp[], settling = false): Promise<void> {
    return this.serial(appId, () => this.report(appId, actor, {}, false, false, undefined, ops as BatchOp[], settling));
  }

  /** A lock release that reports the app's state once the lock is free (a task's end: moving, updating, installing settle). */
  releasing(appId: string, actor: string, release: Release): Release {
    return () => {
      release();
      this.refresh(appId, actor).catch((err) => this.c.log.warn({ err, app_id: appId }, 'apps: cannot report a state change'));
    };
  }

  /** The engine said something happened to an app's container: report the app's state unless a call is at work on it. */
  observe(s: ContainerSignal): void {
    if (this.c.lock.busy(appKey(s.appId))) return;
    const data: Record<string, unknown> = { reason: 'outside', container: s.container, action: s.action };
    if (s.exitCode !== undefined) data.exit_code = s.exitCode;
    this.serial(s.appId, () => this.report(s.appId, RUNTIME_ACTOR, data, true, false, s.container)).catch((err) =>
      this.c.log.warn({ err, app_id: s.appId }, 'apps: cannot report a state change'),
    );
  }

  /** Every app (and every app reported and gone) against what was last reported: at open, and after the watch reopened. */
  async checkAll(why: 'open' | 'watch'): Promise<void> {
    const ids = new Set(this.c.records.all().map((r) => r.app_id));
    for (const key of await this.c.records.states.keys().all()) ids.add(key);
    for (const id of ids) {
      await this.serial(id, () => this.report(id, RUNTIME_ACTOR, { reason: why === 'open' ? 'found-at-open' : 'outside' }, true, why === 'open')).catch((err) =>
        this.c.log.warn({ err, app_id: id }, 'apps: cannot check an app state'),
      );
    }
  }

  /**
   * `signalled`: the container an engine event named, whose state is read live (the engine's list may not show the event yet).
   * `ops`: a call's commit, written with the event (or alone when the state did not change); the record read is the one they leave.
   */
  private async report(
    appId: string,
    actor: string,
    data: Record<string, unknown>,
    unlessBusy: boolean,
    quietFirst = false,
    signalled?: string,
    ops: BatchOp[] = [],
    settling = false,
  ): Promise<void> {
    if (unlessBusy && this.c.lock.busy(appKey(appId))) return;
    const alone = () => (ops.length ? this.c.records.write(ops) : Promise.resolve());
    const last = (await this.c.records.states.get(appId)) ?? undefined;
    const r = this.c.records.after(appId, ops);
    if (!r) {
      if (last === undefined) return alone();
      await this.write(
        ops,
        { type: 'del', sub: this.c.records.states, key: appId },
        appId,
        'uninstalled',
        unlessBusy ? data : {},
        actor,
        `app ${appId} is uninstalled`,
      );
      return;
    }
    let cs;
    try {
      cs = await this.c.driver.containers({ project: r.project });
      if (signalled) {
        const live = await this.c.driver.liveState(signalled);
        cs = cs.filter((x) => x.name !== signalled || live !== null).map((x) => (x.name === signalled && live ? { ...x, state: live } : x));
      }
    } catch {
      // The engine does not answer: nothing is known (the watch reopens and checks again).
      return alone();
    }
    const state = stateOf(
      this.c,
      r,
      cs.filter((x) => x.project === r.project),
      settling,
    );
    if (state === 'unknown' || state === last) return alone();
    if (last === undefined && quietFirst) {
      // An app from before state events: remember where it stands, report nothing.
      await this.c.records.states.put(appId, state);
      return;
    }
    await this.write(ops, { type: 'put', sub: this.c.records.states, key: appId, value: state }, appId, state, data, actor, `app ${r.name} is ${state}`);
  }

  /** The change's ops, the stored state (`mark`) and the event: one synced batch. */
  private async write(
    ops: BatchOp[],
    mark: BatchOp,
    appId: string,
    state: string,
    data: Record<string, unknown>,
    actor: string,
    summary: string,
  ): Promise<void> {
    await writeWithState(this.events, this.c.records.store, [...ops, mark], { domain: 'apps', resource: `apps/${appId}`, state, data, actor, summary });
    this.c.records.mirror(ops);
    await this.c.pause('state.written');
  }

  private serial(appId: string, fn: () => Promise<void>): Promise<void> {
    const prev = this.chain.get(appId) ?? Promise.resolve();
    const mine = prev.then(fn, fn);
    const tail = mine.catch(() => undefined);
    this.chain.set(appId, tail);
    // The map holds only apps with a report under way.
    void tail.then(() => {
      if (this.chain.get(appId) === tail) this.chain.delete(appId);
    });
    return mine;
  }

  /** Resolves once every report under way is written (close waits for it). */
  async idle(): Promise<void> {
    while (this.chain.size) await Promise.all([...this.chain.values()]);
  }
}

/** The domain's context with its state reports (the context itself imports none of its users). */
export function appsContext(d: AppsContextDeps): AppsContext {
  const c = new AppsContext(d);
  c.states = new AppStates(c, d.events ?? { publishState: async () => {} });
  return c;
}
