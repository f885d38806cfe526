/**
 * Background tasks: a persisted record per task plus numbered log lines.
 * Work runs in-process; its record is written on every state change so that a
 * restart can tell what was interrupted and mark it failed.
 */
import crypto from 'node:crypto';
import type { Store, Sub } from '../store/store.js';
import { notFound } from '../../api/errors.js';

export type TaskState = 'queued' | 'running' | 'succeeded' | 'failed';

export interface TaskRecord {
  task_id: string;
  kind: string;
  title: string;
  state: TaskState;
  /** 0-100 */
  progress: number;
  owner: string;
  target: string;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  result: unknown;
  error: string | null;
  log_lines: number;
}

export interface TaskLogLine {
  line: number;
  time: string;
  text: string;
}

export interface TaskHandle {
  readonly id: string;
  log(text: string): void;
  progress(percent: number): void;
}

export type TaskWork = (t: TaskHandle) => Promise<unknown>;

const LINE_WIDTH = 10;
const lineKey = (taskId: string, n: number) => `${taskId}|${String(n).padStart(LINE_WIDTH, '0')}`;

export class TaskRunner {
  private readonly tasks: Sub<TaskRecord>;
  private readonly logs: Sub<TaskLogLine>;
  /** Records of tasks this process runs; their writes are serialised per task. */
  private readonly live = new Map<string, { rec: TaskRecord; chain: Promise<void> }>();

  constructor(private readonly store: Store) {
    this.tasks = store.sub<TaskRecord>('tasks');
    this.logs = store.sub<TaskLogLine>('task_logs');
  }

  /** Marks tasks left queued or running by a previous process as failed. */
  async init(): Promise<number> {
    let n = 0;
    for await (const [id, rec] of this.tasks.iterator()) {
      if (rec.state === 'queued' || rec.state === 'running') {
        const line: TaskLogLine = { line: rec.log_lines + 1, time: new Date().toISOString(), text: 'interrupted: the daemon restarted while this task was running' };
        const upd: TaskRecord = { ...rec, state: 'failed', error: 'interrupted by a daemon restart', finished_at: line.time, log_lines: line.line };
        await this.store.batch([
          { type: 'put', sub: this.tasks, key: id, value: upd },
          { type: 'put', sub: this.logs, key: lineKey(id, line.line), value: line },
        ]);
        n++;
      }
    }
    return n;
  }

  start(kind: string, title: string, meta: { owner: string; target?: string }, work: TaskWork): TaskRecord {
    const now = new Date().toISOString();
    const rec: TaskRecord = {
      task_id: 'task_' + crypto.randomBytes(8).toString('hex'),
      kind, title, state: 'queued', progress: 0, owner: meta.owner, target: meta.target ?? '',
      created_at: now, started_at: null, finished_at: null, result: null, error: null, log_lines: 0,
    };
    const entry = { rec, chain: this.tasks.put(rec.task_id, { ...rec }) };
    this.live.set(rec.task_id, entry);
    const persist = () => {
      const snapshot = { ...entry.rec };
      entry.chain = entry.chain.then(() => this.tasks.put(snapshot.task_id, snapshot)).catch(() => undefined);
    };
    const handle: TaskHandle = {
      id: rec.task_id,
      log: (text) => {
        const line: TaskLogLine = { line: ++entry.rec.log_lines, time: new Date().toISOString(), text };
        entry.chain = entry.chain.then(() => this.logs.put(lineKey(rec.task_id, line.line), line)).catch(() => undefined);
        persist();
      },
      progress: (p) => {
        entry.rec.progress = Math.max(0, Math.min(100, Math.round(p)));
        persist();
      },
    };
    void entry.chain.then(async () => {
      entry.rec.state = 'running';
      entry.rec.started_at = new Date().toISOString();
      persist();
      try {
        entry.rec.result = (await work(handle)) ?? null;
        entry.rec.state = 'succeeded';
        entry.rec.progress = 100;
      } catch (err) {
        entry.rec.state = 'failed';
        entry.rec.error = err instanceof Error ? err.message : String(err);
        handle.log(`failed: ${entry.rec.error}`);
      }
      entry.rec.finished_at = new Date().toISOString();
      persist();
      await entry.chain;
      this.live.delete(rec.task_id);
    });
    return { ...rec };
  }

  /** Resolves when the task has ended (for tests and for callers that wait). */
  async settled(taskId: string): Promise<TaskRecord> {
    for (;;) {
      const live = this.live.get(taskId);
      if (!live) return this.get(taskId);
      await live.chain;
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  async get(taskId: string): Promise<TaskRecord> {
    const live = this.live.get(taskId);
    if (live) return { ...live.rec };
    const rec = await this.tasks.get(taskId);
    if (!rec) throw notFound(`task '${taskId}' not found`);
    return rec;
  }

  /** Queued and running tasks, oldest first. */
  async listActive(): Promise<TaskRecord[]> {
    const out: TaskRecord[] = [];
    for await (const rec of this.tasks.values()) {
      const cur = this.live.get(rec.task_id)?.rec ?? rec;
      if (cur.state === 'queued' || cur.state === 'running') out.push({ ...cur });
    }
    return out.sort((a, b) => a.created_at.localeCompare(b.created_at));
  }

  async logLines(taskId: string, afterLine = 0, limit = 200): Promise<{ task_id: string; lines: TaskLogLine[]; next_after_line: number; total_lines: number }> {
    const rec = await this.get(taskId);
    const lines: TaskLogLine[] = [];
    for await (const line of this.logs.values({ gt: lineKey(taskId, afterLine), lt: `${taskId}}`, limit })) lines.push(line);
    return {
      task_id: taskId,
      lines,
      next_after_line: lines.length ? lines[lines.length - 1].line : afterLine,
      total_lines: rec.log_lines,
    };
  }

  /** Waits for every running task's writes (shutdown). */
  async drain(): Promise<void> {
    await Promise.all([...this.live.values()].map((e) => e.chain));
  }
}
