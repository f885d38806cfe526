/**
 * `hostctl task watch`: polls a task, prints its new log lines and shows a
 * progress bar until it ends. Exit status 0 when it succeeded, 1 otherwise.
 */
import cliProgress from 'cli-progress';
import type { AdminClient } from './client.js';
import { API_PREFIX } from '../../api/catalog.js';

export interface WatchOptions {
  peerId?: string;
  intervalMs?: number;
  out?: NodeJS.WritableStream;
  err?: NodeJS.WriteStream | NodeJS.WritableStream;
}

const TERMINAL = new Set(['succeeded', 'failed']);

export async function watchTask(client: AdminClient, taskId: string, opts: WatchOptions = {}): Promise<number> {
  const out = opts.out ?? process.stdout;
  const err = (opts.err ?? process.stderr) as NodeJS.WriteStream;
  const interval = opts.intervalMs ?? 300;
  const peer = opts.peerId ? `peer_id=${encodeURIComponent(opts.peerId)}` : '';
  const tty = Boolean(err.isTTY);
  const bar = new cliProgress.SingleBar(
    { format: `${taskId} [{bar}] {percentage}% | {state}`, stream: err, noTTYOutput: !tty, notTTYSchedule: 1000, hideCursor: tty },
    cliProgress.Presets.shades_classic,
  );
  let afterLine = 0;
  let started = false;
  for (;;) {
    const r = await client.request('GET', `${API_PREFIX}/tasks/${encodeURIComponent(taskId)}${peer ? '?' + peer : ''}`);
    if (r.status !== 200) {
      if (started) bar.stop();
      err.write(`hostctl: ${r.body?.error ?? `status ${r.status}`}\n`);
      return 1;
    }
    const task = r.body.task;
    if (!started) {
      bar.start(100, task.progress ?? 0, { state: task.state });
      started = true;
    }
    const logs = await client.request('GET', `${API_PREFIX}/tasks/${encodeURIComponent(taskId)}/logs?after_line=${afterLine}&limit=500${peer ? '&' + peer : ''}`);
    if (logs.status === 200) {
      for (const l of logs.body.lines) {
        // Log lines go to stdout above the bar, which lives on stderr.
        if (tty) bar.stop();
        out.write(`${l.line}: ${l.text}\n`);
        if (tty) bar.start(100, task.progress ?? 0, { state: task.state });
        afterLine = l.line;
      }
    }
    bar.update(task.progress ?? 0, { state: task.state });
    if (TERMINAL.has(task.state)) {
      bar.stop();
      if (task.state === 'succeeded') {
        out.write(`task ${taskId} succeeded\n`);
        return 0;
      }
      out.write(`task ${taskId} failed: ${task.error ?? 'unknown error'}\n`);
      return 1;
    }
    await new Promise((res) => setTimeout(res, interval));
  }
}
