/**
 * The watch on hostd's app containers: the engine's event stream
 * (`GET /events`, what `docker events` reads), filtered by the engine to
 * containers carrying both a compose project label and hostd's app label,
 * and to the events that change what an app's state is made of. Idle, it is
 * one open HTTP response (no polling).
 *
 * The stream ends when the engine stops or restarts; the watch opens it
 * again after a backoff (1 s doubling to 30 s, back to 1 s once a stream
 * has delivered), and each reopening asks the service to check every app
 * (`onResync`): what happened while nobody watched is unknown.
 */
import type { Logger } from 'pino';
import type { ContainerSignal, EngineWatch } from '../driver.js';
import { LABEL_APP } from '../compose/render.js';
import type { Engine } from './engine.js';
import { LABEL_PROJECT } from './engine.js';

/** The container events that can change an app's state (created and removed containers included). */
// Not kill, oom or restart: each is followed by die (and start), which carry what changed.
const EVENTS = ['start', 'die', 'stop', 'pause', 'unpause', 'destroy'];
/** An engine event is a few hundred bytes: a line longer than this is dropped, so a stuck stream cannot grow the daemon. */
const MAX_LINE = 64 * 1024;
const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 30_000;

interface EngineEvent {
  Type?: string;
  Action?: string;
  status?: string;
  id?: string;
  Actor?: { ID?: string; Attributes?: Record<string, string> };
}

/** One engine event as the service sees it; null for what is not an app container's. */
export function signalOf(e: EngineEvent): ContainerSignal | null {
  const attrs = e.Actor?.Attributes ?? {};
  const project = attrs[LABEL_PROJECT];
  const appId = attrs[LABEL_APP];
  const action = e.Action ?? e.status;
  if (e.Type !== 'container' || !project || !appId || !action) return null;
  const exit = attrs.exitCode !== undefined ? Number(attrs.exitCode) : undefined;
  return {
    appId,
    project,
    action,
    container: attrs.name ?? e.Actor?.ID ?? e.id ?? '',
    ...(exit !== undefined && Number.isInteger(exit) ? { exitCode: exit } : {}),
  };
}

export class EngineEvents implements EngineWatch {
  private stream: (NodeJS.ReadableStream & { destroy?: () => void }) | null = null;
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;
  private backoff = BACKOFF_MIN_MS;
  private first = true;
  /** Whether a stream was open before this failure (the engine went away: worth a warning; never there: not). */
  private wasOpen = false;

  constructor(
    private readonly engine: Engine,
    private readonly onSignal: (s: ContainerSignal) => void,
    private readonly onResync: () => void,
    private readonly log: Logger,
  ) {}

  start(): void {
    void this.open();
  }

  private async open(): Promise<void> {
    if (this.stopped) return;
    let stream: EngineEvents['stream'];
    try {
      stream = (await this.engine.docker.getEvents({
        filters: JSON.stringify({ type: ['container'], label: [LABEL_PROJECT, LABEL_APP], event: EVENTS }),
      })) as EngineEvents['stream'];
    } catch (err) {
      this.again(`cannot open the engine's event stream: ${(err as Error).message}`);
      return;
    }
    if (this.stopped) {
      stream!.destroy?.();
      return;
    }
    this.stream = stream;
    this.wasOpen = true;
    // The first stream follows the check at open; a later one follows a gap nobody watched.
    if (!this.first) this.onResync();
    this.first = false;
    let buf = '';
    let delivered = false;
    stream!.setEncoding?.('utf8');
    stream!.on('data', (chunk: string | Buffer) => {
      buf += chunk.toString();
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (!line) continue;
        let e: EngineEvent;
        try {
          e = JSON.parse(line) as EngineEvent;
        } catch {
          continue;
        }
        const s = signalOf(e);
        if (s) {
          delivered = true;
          this.onSignal(s);
        }
      }
      if (buf.length > MAX_LINE) buf = '';
    });
    let ended = false;
    const end = (why: string) => {
      if (ended) return;
      ended = true;
      if (this.stream === stream) this.stream = null;
      if (delivered) this.backoff = BACKOFF_MIN_MS;
      this.again(why);
    };
    stream!.on('end', () => end('the engine ended the event stream'));
    stream!.on('close', () => end('the event stream closed'));
    stream!.on('error', (err: Error) => end(err.message));
  }

  private again(why: string): void {
    if (this.stopped) return;
    const wait = this.backoff;
    this.backoff = Math.min(this.backoff * 2, BACKOFF_MAX_MS);
    this.first = false;
    if (this.wasOpen) this.log.warn({ why, retry_ms: wait }, 'apps: engine event watch ended; watching again after a pause');
    else this.log.debug({ why, retry_ms: wait }, 'apps: no engine event stream yet; trying again after a pause');
    this.wasOpen = false;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.open();
    }, wait);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.stream?.destroy?.();
    this.stream = null;
  }
}
