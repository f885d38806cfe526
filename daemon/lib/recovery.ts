/**
 * Start-up recovery, one shape for every domain: the domain module's `open()`
 * builds an `IntentRecovery` over its intent journal and awaits `run()` before
 * it returns its handlers, so that no call is served while a change that a
 * crash interrupted is still open.
 *
 * Each open intent is handed to the domain's `settle`, which finishes or
 * undoes the change by what the disk and the process table show and returns
 * the store writes of the outcome; they are committed with the intent's drop
 * in one batch. A settle that fails (its runtime is not up yet: the Docker
 * engine, a share's server) leaves the intent open and pending, with why:
 * `retry()` settles the pending ones again (a periodic job, or a service once
 * its runtime answers), and `requireSettled(key)` is what a call that touches
 * the resource awaits first: 503 while that resource's change is still open.
 * Nothing is dropped unsettled: an intent dropped without its outcome would
 * leave files or processes the store does not know. Only pending intents are
 * retried: an intent opened by a call being served is never touched.
 */
import { unavailable } from './errors.js';
import type { IntentJournal, JournalOp } from './journal.js';
import { SerialQueue } from './serial.js';

interface RecoveryLog {
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
  /** A pino child's own fields (a domain's logger already names its `domain`). */
  bindings?(): Record<string, unknown>;
}

export interface RecoveryPlan<I> {
  /** The registry's name of the domain (for log lines). */
  domain: string;
  journal: IntentJournal<I>;
  log: RecoveryLog;
  /** Finishes or undoes one interrupted change; returns the store writes of its outcome (none when undone). */
  settle(key: string, intent: I): Promise<JournalOp[]>;
  /**
   * Reconciles what intents do not cover, after them, at each run (records
   * left `creating` by a task the restart interrupted, a VM's disk layers, a
   * proxy's address). Failures are logged and retried with the next run.
   */
  reconcile?(): Promise<void>;
  /**
   * What a log line may say about an intent (its op and resource ids). Only
   * the key is logged without it: an intent may hold what must never be in a
   * log line.
   */
  describe?(intent: I): Record<string, unknown>;
}

export interface RecoveryReport {
  /** Intents finished or undone by this run. */
  settled: number;
  /** Intents still open, with why their settle failed. */
  pending: Array<{ key: string; reason: string }>;
}

export class IntentRecovery<I> {
  private readonly waiting = new Map<string, string>();
  private readonly queue = new SerialQueue();
  private ran = false;

  constructor(private readonly plan: RecoveryPlan<I>) {}

  /**
   * At open, before serving: settles every open intent, then reconciles.
   * Once: after it, open intents may belong to calls being served.
   */
  run(): Promise<RecoveryReport> {
    if (this.ran) return Promise.reject(new Error(`${this.plan.domain}: recovery runs once, at open; use retry() for what it left pending`));
    this.ran = true;
    return this.queue.run(() => this.pass(null));
  }

  /** Settles the intents a previous run left pending (a no-op when none is). */
  retry(): Promise<RecoveryReport> {
    return this.queue.run(() => (this.waiting.size ? this.pass(new Set(this.waiting.keys())) : Promise.resolve(this.report(0))));
  }

  /**
   * Resolves when the change recorded under `key` is settled (retrying the
   * pending ones first); 503 naming `what` and the reason while it is not.
   */
  async requireSettled(key: string, what: string): Promise<void> {
    if (!this.waiting.has(key)) return;
    await this.retry();
    const reason = this.waiting.get(key);
    if (reason !== undefined) throw unavailable(`${what} has a change interrupted by a restart that cannot be settled yet: ${reason}`);
  }

  /** Intents left open by the last run, with why. */
  pending(): Array<{ key: string; reason: string }> {
    return [...this.waiting].map(([key, reason]) => ({ key, reason }));
  }

  /** Settles the open intents (only those of `only`, when given), then reconciles. */
  private async pass(only: Set<string> | null): Promise<RecoveryReport> {
    const { domain, journal, log } = this.plan;
    // Each line names its domain once: a domain's child logger writes it already, and a key twice is not JSON a reader can trust.
    const named = log.bindings?.().domain === domain ? {} : { domain };
    const retrying = only !== null;
    let settled = 0;
    const open = await journal.open();
    // A pending intent no longer in the journal needs nothing more.
    if (only) for (const key of only) if (!open.some(([k]) => k === key)) this.waiting.delete(key);
    for (const [key, intent] of open) {
      if (only && !only.has(key)) continue;
      const about = { ...named, key, ...(this.plan.describe?.(intent) ?? {}) };
      try {
        const ops = await this.plan.settle(key, intent);
        await journal.commit(key, ops);
        this.waiting.delete(key);
        settled++;
        log.warn(about, `${domain}: settled a change interrupted by a restart`);
      } catch (err) {
        const reason = (err as Error)?.message ?? String(err);
        this.waiting.set(key, reason);
        log.error({ ...about, err }, `${domain}: cannot settle an interrupted change yet; it stays open and is retried`);
      }
    }
    if (this.plan.reconcile) {
      try {
        await this.plan.reconcile();
      } catch (err) {
        log.error({ ...named, err }, `${domain}: reconciling after recovery failed; the next run tries again`);
      }
    }
    const report = this.report(settled);
    if (settled || report.pending.length || !retrying) {
      log.info({ ...named, settled, pending: report.pending.length }, `${domain}: recovery ${retrying ? 'retried' : 'done'}`);
    }
    return report;
  }

  private report(settled: number): RecoveryReport {
    return { settled, pending: this.pending() };
  }
}
