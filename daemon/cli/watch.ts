/**
 * `hostctl task watch`: prints a task's log lines and shows a progress bar
 * until it ends. It follows the event stream (`tasks.*` events of the task);
 * against a daemon without the stream (an older member), or when the stream
 * ends before the task does, it polls. Exit status 0 when it succeeded, 1
 * otherwise.
 */
import cliProgress from 'cli-progress';
import type { AdminClient } from './client.js';
import { API_PREFIX } from '../../api/catalog.js';
import { openSse, type StreamEvent } from './sse.js';

export interface WatchOptions {
  peerId?: string;
  intervalMs?: number;
  /** Poll even when the stream is there (tests of the fallback). */
  poll?: boolean;
  out?: NodeJS.WritableStream;
  err?: NodeJS.WriteStream | NodeJS.WritableStream;
}

const TERMINAL = new Set(['succeeded', 'failed']);

interface Task {
  state: string;
  progress?: number;
  error?: string | null;
}

/** What watching prints: log lines on stdout above a bar on stderr, and the ending. */
class View {
  afterLine = 0;
  private started = false;
  private readonly bar: cliProgress.SingleBar;
  private readonly tty: boolean;

  constructor(
    private readonly taskId: string,
    private readonly out: NodeJS.WritableStream,
    private readonly err: NodeJS.WriteStream,
  ) {
    this.tty = Boolean(err.isTTY);
    this.bar = new cliProgress.SingleBar(
      { format: `${taskId} [{bar}] {percentage}% | {state}`, stream: err, noTTYOutput: !this.tty, notTTYSchedule: 1000, hideCursor: this.tty },
      cliProgress.Presets.shades_classic,
    );
  }

  update(task: Task): void {
    if (!this.started) {
      this.bar.start(100, task.progress ?? 0, { state: task.state });
      this.started = true;
    } else this.bar.update(task.progress ?? 0, { state: task.state });
  }

  /** Line `n` of the log (numbers only order them), shown with the time the task wrote it, in local time. */
  line(n: number, time: string | undefined, text: string, task: Task): void {
    if (n <= this.afterLine) return;
    // Log lines go to stdout above the bar, which lives on stderr.
    if (this.tty && this.started) this.bar.stop();
    const at = time ? new Date(time) : null;
    this.out.write(`${at && Number.isFinite(at.getTime()) ? at.toTimeString().slice(0, 8) : '--:--:--'} ${text}\n`);
    if (this.tty && this.started) this.bar.start(100, task.progress ?? 0, { state: task.state });
    this.afterLine = n;
  }

  fail(msg: string): number {
    if (this.started) this.bar.stop();
    this.err.write(`hostctl: ${msg}\n`);
    return 1;
  }

  end(task: Task): number {
    this.update(task);
    this.bar.stop();
    if (task.state === 'succeeded') {
      this.out.write(`task ${this.taskId} succeeded\n`);
      return 0;
    }
    this.out.write(`task ${this.taskId} failed: ${task.error ?? 'unknown error'}\n`);
    return 1;
  }
}

export async function watchTask(client: AdminClient, taskId: string, opts: WatchOptions = {}): Promise<number> {
  // A client made for --peer watches that member's task.
  if (!opts.peerId && client.peerId) opts = { ...opts, peerId: client.peerId };
  const view = new View(taskId, opts.out ?? process.stdout, (opts.err ?? process.stderr) as NodeJS.WriteStream);
  // A peer's task is polled through peer_id (the stream of another member is not forwarded over the admin socket).
  if (!opts.peerId && !opts.poll) {
    const code = await follow(client, taskId, view);
    if (code !== undefined) return code;
  }
  return poll(client, taskId, view, opts);
}

/** Follows the stream; undefined when the stream is not there or ended early (the caller polls on). */
async function follow(client: AdminClient, taskId: string, view: View): Promise<number | undefined> {
  const q = new URLSearchParams({ task_id: taskId, types: 'tasks.' });
  const early: StreamEvent[] = [];
  let handle: ((e: StreamEvent) => void) | undefined;
  let finished: ((code: number) => void) | undefined;
  const result = new Promise<number>((r) => (finished = r));
  // Over --url there is no socket to stream from: the caller polls.
  if (client.remote) return undefined;
  // The stream opens first, so that nothing between reading the task and following it is missed.
  const stream = await openSse(client.socketPath, `${API_PREFIX}/events/stream?${q}`, (e) => (handle ? handle(e) : early.push(e))).catch(() => undefined);
  if (!stream) return undefined;
  try {
    const r = await client.request('GET', `${API_PREFIX}/tasks/${encodeURIComponent(taskId)}`);
    if (r.status !== 200) return view.fail(r.body?.error ?? `status ${r.status}`);
    const task: Task = r.body.task;
    view.update(task);
    if (!(await printLogs(client, taskId, view, task, ''))) return undefined;
    if (TERMINAL.has(task.state)) return view.end(task);
    const current: Task = { ...task };
    handle = (e) => {
      const d = e.data as { state?: string; progress?: number; line?: number; text?: string; error?: string | null };
      if (d.state) current.state = d.state;
      if (typeof d.progress === 'number') current.progress = d.progress;
      if (e.type === 'tasks.log' && typeof d.line === 'number') view.line(d.line, e.time, String(d.text ?? ''), current);
      else if (e.type === 'tasks.ended') {
        current.error = d.error ?? null;
        finished?.(view.end(current));
      } else if (e.type === 'tasks.progress') view.update(current);
    };
    for (const e of early.splice(0)) handle(e);
    const ended = await Promise.race([result, stream.done.then(() => undefined)]);
    return ended;
  } finally {
    stream.close();
  }
}

/** Prints the log lines after the view's last one; false when they cannot be read. */
async function printLogs(client: AdminClient, taskId: string, view: View, task: Task, peer: string): Promise<boolean> {
  for (;;) {
    const logs = await client.request(
      'GET',
      `${API_PREFIX}/tasks/${encodeURIComponent(taskId)}/logs?after_line=${view.afterLine}&limit=500${peer ? '&' + peer : ''}`,
    );
    if (logs.status !== 200) return false;
    for (const l of logs.body.lines) view.line(l.line, l.time, l.text, task);
    if (logs.body.lines.length < 500) return true;
  }
}

async function poll(client: AdminClient, taskId: string, view: View, opts: WatchOptions): Promise<number> {
  const interval = opts.intervalMs ?? 300;
  const peer = opts.peerId ? `peer_id=${encodeURIComponent(opts.peerId)}` : '';
  for (;;) {
    const r = await client.request('GET', `${API_PREFIX}/tasks/${encodeURIComponent(taskId)}${peer ? '?' + peer : ''}`);
    if (r.status !== 200) return view.fail(r.body?.error ?? `status ${r.status}`);
    const task: Task = r.body.task;
    view.update(task);
    await printLogs(client, taskId, view, task, peer);
    if (TERMINAL.has(task.state)) return view.end(task);
    await new Promise((res) => setTimeout(res, interval));
  }
}
