/**
 * The watch on the containers of hostd's lxc path: `lxc-monitor`, LXC's own
 * tool. Each container's monitor process sends its state changes and its
 * init's exit status to `lxc-monitord` (one per lxc path, spawned by the
 * first lxc-monitor), which hands them to us; so a container started before
 * the watch, or by someone else, is seen too. Idle, it is one process
 * blocked on a socket (no polling).
 *
 * lxc-monitor dying (killed, monitord gone) restarts it after a backoff
 * (1 s doubling to 30 s); since changes may have been missed meanwhile, each
 * restart asks the service to check every container (`onResync`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Logger } from 'pino';
import { run } from '../../lib/run.js';
import type { LxcState, StateSignal, StateWatch } from '../driver.js';

const STATES = new Set<LxcState>(['STOPPED', 'STARTING', 'RUNNING', 'STOPPING', 'ABORTING', 'FREEZING', 'FROZEN', 'THAWED']);
const STATE_LINE = /^'([^']+)' changed state to \[([A-Z]+)\]$/;
const EXIT_LINE = /^'([^']+)' exited with status \[(-?\d+)\]$/;
/** A line longer than this is not lxc-monitor's: dropped, so a stuck stream cannot grow the daemon. */
const MAX_LINE = 1024;
/** Exit statuses waiting for their STOPPED line (each is consumed by it). */
const MAX_PENDING_EXITS = 1024;
const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 30_000;
/** A watch that ran this long before it died starts again at the shortest backoff. */
const HEALTHY_MS = 60_000;

/** Parses one line of lxc-monitor; null for anything else. */
export function parseMonitorLine(line: string): { name: string; state: LxcState } | { name: string; exitStatus: number } | null {
  const s = STATE_LINE.exec(line);
  if (s) return STATES.has(s[2] as LxcState) ? { name: s[1], state: s[2] as LxcState } : null;
  const e = EXIT_LINE.exec(line);
  if (e) return { name: e[1], exitStatus: Number(e[2]) };
  return null;
}

export class LxcMonitor implements StateWatch {
  private child: ChildProcess | null = null;
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;
  private backoff = BACKOFF_MIN_MS;
  private readonly exits = new Map<string, number>();
  private started = 0;

  constructor(
    private readonly lxcPath: string,
    private readonly namePattern: string,
    private readonly onSignal: (s: StateSignal) => void,
    private readonly onResync: () => void,
    private readonly log: Logger,
    /** setpriv's path, when the host has it. */
    private readonly setpriv: string | null,
  ) {}

  start(): void {
    if (this.stopped || this.child) return;
    this.started = Date.now();
    const args = ['-P', this.lxcPath, '-n', this.namePattern];
    // Tied to hostd's life (as Caddy is): a daemon killed with -9 leaves no watcher behind.
    const child = this.setpriv
      ? spawn(this.setpriv, ['--pdeathsig', 'KILL', '--', 'lxc-monitor', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('lxc-monitor', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    let buf = '';
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      buf += chunk;
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        this.line(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
      if (buf.length > MAX_LINE) buf = '';
    });
    let stderr = '';
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-MAX_LINE);
    });
    let ended = false;
    const ended_ = (why: string) => {
      if (ended) return;
      ended = true;
      if (this.child === child) this.child = null;
      if (this.stopped) return;
      if (Date.now() - this.started > HEALTHY_MS) this.backoff = BACKOFF_MIN_MS;
      const wait = this.backoff;
      this.backoff = Math.min(this.backoff * 2, BACKOFF_MAX_MS);
      this.log.warn({ why, stderr: stderr.trim() || undefined, retry_ms: wait }, 'lxc: lxc-monitor ended; watching again after a pause');
      this.timer = setTimeout(() => {
        this.timer = null;
        this.start();
        // Changes while nobody watched are found by asking each container.
        if (this.child) this.onResync();
      }, wait);
      this.timer.unref();
    };
    child.on('error', (err) => ended_(err.message));
    child.on('exit', (code, signal) => ended_(`exit ${code ?? signal}`));
  }

  private line(text: string): void {
    const m = parseMonitorLine(text.trim());
    if (!m) return;
    if ('exitStatus' in m) {
      if (this.exits.size >= MAX_PENDING_EXITS) this.exits.clear();
      this.exits.set(m.name, m.exitStatus);
      return;
    }
    const exitStatus = m.state === 'STOPPED' ? this.exits.get(m.name) : undefined;
    if (m.state === 'STOPPED') this.exits.delete(m.name);
    this.onSignal({ lxcName: m.name, state: m.state, ...(exitStatus !== undefined ? { exitStatus } : {}) });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGTERM');
      await gone;
    }
    this.child = null;
    // lxc-monitord outlives its clients for a while; nothing else watches this lxc path, so end it now.
    await run('lxc-monitor', ['-P', this.lxcPath, '-Q'], { timeoutMs: 10_000, okCodes: [0, 1] }).catch((err) =>
      this.log.debug({ err }, 'lxc: lxc-monitor -Q failed'),
    );
  }
}
