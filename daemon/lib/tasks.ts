/**
 * What a domain sees of background tasks: start long work, report progress
 * and log lines, and stop when the signal aborts (daemon shutdown, a cancel).
 * The runner (daemon/tasks) persists the records; these are its types.
 */
export type TaskState = 'queued' | 'running' | 'succeeded' | 'failed';

export interface TaskRecord {
  task_id: string;
  kind: string;
  title: string;
  state: TaskState;
  /** 0-100 */
  progress: number;
  /** Node that runs the task (a task started through peer_id lives on that peer). */
  node_id: string;
  /** Name of the token that started it. */
  owner: string;
  /** The resource it acts on, e.g. `vms/101` or `vms/images/debian-12`. */
  resource: string;
  /** Same as `resource`; kept for clients of the first release. */
  target: string;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  result: unknown;
  error: string | null;
  log_lines: number;
}

export interface TaskHandle {
  readonly id: string;
  /** Aborts when the daemon shuts down or the task is cancelled: stop the work and clean up. */
  readonly signal: AbortSignal;
  log(text: string): void;
  progress(percent: number): void;
}

export type TaskWork = (t: TaskHandle) => Promise<unknown>;

export interface TaskStart {
  kind: string;
  title: string;
  /** Token name of the caller. */
  owner: string;
  /** The resource the task acts on. */
  resource: string;
}

export interface Tasks {
  /** Records the task and runs `work` in the background; answers at once with the queued record. */
  start(what: TaskStart, work: TaskWork): TaskRecord;
  get(taskId: string): Promise<TaskRecord>;
  /** Resolves when the task has ended. */
  settled(taskId: string): Promise<TaskRecord>;
}
