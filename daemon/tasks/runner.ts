/**
 * Background tasks: a persisted record per task plus numbered log lines.
 * Work runs in-process; its record is written on every state change so that a
 * restart can tell what was interrupted and mark it failed. Each task has an
 * abort signal: `shutdown()` (daemon stop) and `cancel()` abort it, and the
 * work is expected to stop and clean up.
 */
import crypto from 'node:crypto';
import { LAZY, SYNC, type BatchOp, type BatchParticipant, type Store, type Sub } from '../store/store.js';
import { progressWorthAnEvent, taskCreated, taskEnded, taskLog, taskProgress } from '../events/sources.js';
import type { NewEvent } from '../events/types.js';
import { notFound } from '../lib/errors.js';
import type { TaskHandle, TaskRecord, TaskStart, TaskWork, Tasks } from '../lib/tasks.js';

export type { TaskRecord, TaskState, TaskHandle, TaskWork } from '../lib/tasks.js';

export interface TaskLogLine {
  line: number;
  time: string;
  text: string;
}

const LINE_WIDTH = 10;
const lineKey = (taskId: string, n: number) => `${taskId}|${String(n).padStart(LINE_WIDTH, '0')}`;

interface Live {
  /** The record as the work changes it; written to the store in order, on `chain`. */
  rec: TaskRecord;
  /**
   * The last record the store has: what readers are shown. A record is
   * written after the lines it counts, so the lines it counts can be read,
   * and a task is shown ended only once its last line can be.
   */
  shown: TaskRecord;
  chain: Promise<void>;
  abort: AbortController;
  /** Resolves when the work has returned or thrown and the record is written. */
  ended: Promise<void>;
}

export class TaskRunner implements Tasks {
  private readonly tasks: Sub<TaskRecord>;
  private readonly logs: Sub<TaskLogLine>;
  /** Records of tasks this process runs; their writes are serialised per task. */
  private readonly live = new Map<string, Live>();

  constructor(
    private readonly store: Store,
    private readonly nodeId = '',
    /** The event log: each record change's `tasks.*` event is written in the change's batch. */
    private readonly events?: BatchParticipant<NewEvent | NewEvent[]>,
  ) {
    this.tasks = store.sub<TaskRecord>('tasks');
    this.logs = store.sub<TaskLogLine>('task_logs');
  }

  /** Marks tasks left queued or running by a previous process as failed. */
  async init(): Promise<number> {
    let n = 0;
    for await (const [id, rec] of this.tasks.iterator()) {
      if (rec.state === 'queued' || rec.state === 'running') {
        const line: TaskLogLine = {
          line: rec.log_lines + 1,
          time: new Date().toISOString(),
          text: 'interrupted: the daemon restarted while this task was running',
        };
        const upd: TaskRecord = { ...rec, state: 'failed', error: 'interrupted by a daemon restart', finished_at: line.time, log_lines: line.line };
        await this.write(
          [
            { type: 'put', sub: this.tasks, key: id, value: upd },
            { type: 'put', sub: this.logs, key: lineKey(id, line.line), value: line },
          ],
          [taskLog(upd, line.line, line.text), taskEnded(upd)],
          SYNC,
        );
        n++;
      }
    }
    return n;
  }

  /** One batch of the task store, with its events. */
  private write(ops: BatchOp[], events: NewEvent[], sync: {}): Promise<void> {
    const write = (extra: BatchOp[]) => this.store.batch([...ops, ...extra], sync);
    return this.events && events.length ? this.events.join(events, write) : write([]);
  }

  start(what: TaskStart, work: TaskWork): TaskRecord {
    const now = new Date().toISOString();
    const rec: TaskRecord = {
      task_id: 'task_' + crypto.randomBytes(8).toString('hex'),
      kind: what.kind,
      title: what.title,
      state: 'queued',
      progress: 0,
      node_id: this.nodeId,
      owner: what.owner,
      resource: what.resource,
      target: what.resource,
      created_at: now,
      started_at: null,
      finished_at: null,
      result: null,
      error: null,
      log_lines: 0,
    };
    let ended!: () => void;
    const entry: Live = {
      rec,
      shown: { ...rec },
      chain: this.write([{ type: 'put', sub: this.tasks, key: rec.task_id, value: { ...rec } }], [taskCreated({ ...rec })], SYNC),
      abort: new AbortController(),
      ended: new Promise((r) => (ended = r)),
    };
    this.live.set(rec.task_id, entry);
    // Progress and log lines are written lazily (a power loss may lose the last
    // seconds of them; a restart marks the task interrupted anyway); the record
    // of a task that ended is synced: a result the caller may have read must
    // still be there after a power loss (docs/durability.md).
    // Events: `tasks.progress` when the percent crosses a step (sources.ts) or the task starts running,
    // one `tasks.log` per line, `tasks.ended` with the synced end record.
    const persist = (events: (snapshot: TaskRecord) => NewEvent[] = () => [], line?: TaskLogLine) => {
      const snapshot = { ...entry.rec };
      const ended = snapshot.state === 'succeeded' || snapshot.state === 'failed';
      const ops: BatchOp[] = [{ type: 'put', sub: this.tasks, key: snapshot.task_id, value: snapshot }];
      if (line) ops.unshift({ type: 'put', sub: this.logs, key: lineKey(rec.task_id, line.line), value: line });
      // Readers are shown what the store has: the record with the line it counts (one batch).
      entry.chain = entry.chain
        .then(() => this.write(ops, events(snapshot), ended ? SYNC : LAZY))
        .then(() => {
          entry.shown = snapshot;
        })
        .catch(() => undefined);
    };
    const handle: TaskHandle = {
      id: rec.task_id,
      signal: entry.abort.signal,
      log: (text) => {
        const line: TaskLogLine = { line: ++entry.rec.log_lines, time: new Date().toISOString(), text };
        persist((snap) => [taskLog(snap, line.line, line.text)], line);
      },
      progress: (p) => {
        const next = Math.max(0, Math.min(100, Math.round(p)));
        const before = entry.rec.progress;
        if (next === before) return;
        entry.rec.progress = next;
        persist((snap) => (progressWorthAnEvent(before, next) ? [taskProgress(snap)] : []));
      },
    };
    void entry.chain.then(async () => {
      entry.rec.state = 'running';
      entry.rec.started_at = new Date().toISOString();
      persist((snap) => [taskProgress(snap)]);
      try {
        if (entry.abort.signal.aborted) throw new Error(String(entry.abort.signal.reason ?? 'cancelled'));
        entry.rec.result = (await work(handle)) ?? null;
        entry.rec.state = 'succeeded';
        entry.rec.progress = 100;
      } catch (err) {
        entry.rec.state = 'failed';
        entry.rec.error = entry.abort.signal.aborted
          ? `cancelled: ${String(entry.abort.signal.reason ?? 'cancelled')}`
          : err instanceof Error
            ? err.message
            : String(err);
        handle.log(`failed: ${entry.rec.error}`);
      }
      entry.rec.finished_at = new Date().toISOString();
      persist((snap) => [taskEnded(snap)]);
      await entry.chain;
      this.live.delete(rec.task_id);
      ended();
    });
    return { ...rec };
  }

  /** Aborts a running task's signal; its work stops and the task ends failed ('cancelled: <why>'). */
  cancel(taskId: string, why = 'cancelled'): boolean {
    const e = this.live.get(taskId);
    if (!e) return false;
    e.abort.abort(why);
    return true;
  }

  /** Resolves when the task has ended (for tests and for callers that wait). */
  async settled(taskId: string): Promise<TaskRecord> {
    const live = this.live.get(taskId);
    if (live) await live.ended;
    return this.get(taskId);
  }

  async get(taskId: string): Promise<TaskRecord> {
    const live = this.live.get(taskId);
    if (live) return shown(live);
    const rec = typeof taskId === 'string' ? await this.tasks.get(taskId) : undefined;
    if (!rec) throw notFound(`task '${taskId}' not found`);
    return withDefaults(rec);
  }

  /** Queued and running tasks, oldest first. */
  async listActive(): Promise<TaskRecord[]> {
    const out: TaskRecord[] = [];
    for await (const rec of this.tasks.values()) {
      const live = this.live.get(rec.task_id);
      const cur = live ? shown(live) : rec;
      if (cur.state === 'queued' || cur.state === 'running') out.push(withDefaults(cur));
    }
    return out.sort((a, b) => a.created_at.localeCompare(b.created_at));
  }

  /**
   * A page of a task's log. `total_lines` is the count when the read began;
   * lines stored while it ran are left for the next page, so that the page
   * never holds more lines than it counts.
   */
  async logLines(taskId: string, afterLine = 0, limit = 200): Promise<{ task_id: string; lines: TaskLogLine[]; next_after_line: number; total_lines: number }> {
    const rec = await this.get(taskId);
    const lines: TaskLogLine[] = [];
    for await (const line of this.logs.values({ gt: lineKey(taskId, afterLine), lt: `${taskId}}`, limit })) {
      if (line.line > rec.log_lines) break;
      lines.push(line);
    }
    return {
      task_id: taskId,
      lines,
      next_after_line: lines.length ? lines[lines.length - 1].line : afterLine,
      total_lines: rec.log_lines,
    };
  }

  /**
   * Daemon shutdown: aborts every running task and waits (up to `graceMs`)
   * for its work to stop and its record to be written.
   */
  async shutdown(graceMs = 10_000): Promise<void> {
    const live = [...this.live.values()];
    for (const e of live) e.abort.abort('the daemon is shutting down');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(live.map((e) => e.ended)),
      new Promise<void>((r) => {
        timer = setTimeout(r, graceMs);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
    await Promise.all([...this.live.values()].map((e) => e.chain));
  }

  /** Waits for every running task's writes (tests). */
  async drain(): Promise<void> {
    await Promise.all([...this.live.values()].map((e) => e.chain));
  }
}

/** What readers see of a task this process runs: the last record written. */
function shown(live: Live): TaskRecord {
  return { ...live.shown };
}

/** Records written before node_id and resource existed. */
function withDefaults(rec: TaskRecord): TaskRecord {
  return { ...rec, node_id: rec.node_id ?? '', resource: rec.resource ?? rec.target ?? '' };
}
