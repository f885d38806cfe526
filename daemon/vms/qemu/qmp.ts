/**
 * QMP client over the VM's unix socket: greeting, `qmp_capabilities`, then
 * commands answered in order by id, and asynchronous events. One connection
 * per call site is cheap (the socket is local); QEMU accepts one monitor
 * client at a time per socket, so callers serialise through the driver.
 */
import net from 'node:net';
import { EventEmitter } from 'node:events';

export interface QmpEvent {
  event: string;
  data?: Record<string, unknown>;
  timestamp?: { seconds: number; microseconds: number };
}

export class QmpError extends Error {
  constructor(
    readonly command: string,
    readonly cls: string,
    desc: string,
  ) {
    super(`QMP ${command}: ${desc}`);
    this.name = 'QmpError';
  }
}

interface Pending {
  command: string;
  resolve: (v: any) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

export class QmpClient extends EventEmitter {
  private buf = '';
  private nextId = 1;
  private readonly pending = new Map<string, Pending>();
  private closed = false;
  private greeted!: Promise<void>;

  private constructor(
    private readonly sock: net.Socket,
    readonly path: string,
  ) {
    super();
  }

  /** Connects, reads the greeting and negotiates capabilities. */
  static async connect(path: string, timeoutMs = 5000): Promise<QmpClient> {
    const sock = net.createConnection(path);
    const c = new QmpClient(sock, path);
    let greet!: () => void;
    let fail!: (e: Error) => void;
    c.greeted = new Promise<void>((res, rej) => ((greet = res), (fail = rej)));
    const timer = setTimeout(() => fail(new Error(`QMP socket ${path} gave no greeting within ${timeoutMs} ms`)), timeoutMs);
    sock.on('error', (err) => {
      fail(err);
      c.shutdown(err);
    });
    sock.on('close', () => c.shutdown(new Error('QMP connection closed')));
    let gotGreeting = false;
    sock.on('data', (d) => {
      c.buf += d.toString('utf8');
      let i: number;
      while ((i = c.buf.indexOf('\n')) >= 0) {
        const line = c.buf.slice(0, i).trim();
        c.buf = c.buf.slice(i + 1);
        if (!line) continue;
        let msg: any;
        try {
          msg = JSON.parse(line);
        } catch {
          continue;
        }
        if (!gotGreeting && msg.QMP) {
          gotGreeting = true;
          greet();
          continue;
        }
        c.onMessage(msg);
      }
    });
    try {
      await c.greeted;
    } finally {
      clearTimeout(timer);
    }
    await c.execute('qmp_capabilities', undefined, timeoutMs);
    return c;
  }

  private onMessage(msg: any): void {
    if (msg.event) {
      this.emit('event', msg as QmpEvent);
      return;
    }
    const id = msg.id === undefined ? undefined : String(msg.id);
    const p = id ? this.pending.get(id) : undefined;
    if (!p) return;
    this.pending.delete(id!);
    clearTimeout(p.timer);
    if (msg.error) p.reject(new QmpError(p.command, msg.error.class ?? 'GenericError', msg.error.desc ?? 'failed'));
    else p.resolve(msg.return);
  }

  private shutdown(err: Error): void {
    if (this.closed) return;
    this.closed = true;
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(new Error(`QMP ${p.command}: ${err.message}`));
    }
    this.pending.clear();
    this.emit('close');
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Runs one command; rejects with QmpError on a QMP error, or after `timeoutMs`. */
  execute<T = any>(command: string, args?: Record<string, unknown>, timeoutMs = 10_000): Promise<T> {
    if (this.closed) return Promise.reject(new Error(`QMP ${command}: connection closed`));
    const id = String(this.nextId++);
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`QMP ${command} got no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { command, resolve, reject, timer });
      this.sock.write(JSON.stringify(args ? { execute: command, arguments: args, id } : { execute: command, id }) + '\n');
    });
  }

  /** Resolves with the first event named `name` for which `match` holds, or rejects after `timeoutMs`. */
  waitEvent(name: string, timeoutMs: number, match: (e: QmpEvent) => boolean = () => true): Promise<QmpEvent> {
    return new Promise((resolve, reject) => {
      const onEvent = (e: QmpEvent) => {
        if (e.event !== name || !match(e)) return;
        done();
        resolve(e);
      };
      const onClose = () => {
        done();
        reject(new Error(`QMP connection closed while waiting for ${name}`));
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${name} event within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.off('event', onEvent);
        this.off('close', onClose);
      };
      this.on('event', onEvent);
      this.on('close', onClose);
    });
  }

  /** Resolves when the peer closed the connection (QEMU exited), or after `timeoutMs` with false. */
  waitClosed(timeoutMs: number): Promise<boolean> {
    if (this.closed) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.off('close', onClose);
        resolve(false);
      }, timeoutMs);
      const onClose = () => {
        clearTimeout(timer);
        resolve(true);
      };
      this.once('close', onClose);
    });
  }

  close(): void {
    this.sock.destroy();
    this.shutdown(new Error('closed by client'));
  }
}
