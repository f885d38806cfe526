/**
 * The QEMU guest agent protocol over the VM's virtio-serial chardev socket.
 * Replies carry no ids, so a connection first synchronises with
 * `guest-sync-delimited` (whose reply starts with a 0xFF byte; anything
 * before it is stale output of an earlier client) and then runs commands one
 * at a time. A command that times out poisons the connection: it is closed,
 * never reused, so a late reply cannot be taken for the next one.
 */
import crypto from 'node:crypto';
import net from 'node:net';
import { AgentError, AgentTimeout } from '../driver.js';

export { AgentError, AgentTimeout };

export interface GuestInterface {
  name: string;
  'hardware-address'?: string;
  'ip-addresses'?: Array<{ 'ip-address-type': 'ipv4' | 'ipv6'; 'ip-address': string; prefix: number }>;
}

export interface ExecStatus {
  exited: boolean;
  exitcode?: number;
  signal?: number;
  'out-data'?: string;
  'err-data'?: string;
  'out-truncated'?: boolean;
  'err-truncated'?: boolean;
}

/**
 * The most the agent may send in one reply, and hold unread: the guest is not
 * trusted, and hostd's memory must not be its to fill. An exec reply holds
 * both streams, cut in the guest to EXEC_STREAM_CAP_BYTES + 1 each, as
 * base64 (4/3 larger), with room to spare.
 */
export const AGENT_REPLY_MAX_BYTES = 4 * 1024 * 1024;

export class GuestAgent {
  /** Complete lines not yet read, and the bytes of the line still arriving. */
  private readonly lines: Buffer[] = [];
  private linesBytes = 0;
  private partial: Buffer[] = [];
  private partialBytes = 0;
  private waiter: ((line: string | Error) => void) | null = null;
  private synced = false;
  private dead: Error | null = null;

  private constructor(
    private readonly sock: net.Socket,
    readonly path: string,
  ) {
    sock.on('data', (d: Buffer) => this.onData(d));
    sock.on('error', (err) => this.fail(err));
    sock.on('close', () => this.fail(new Error('guest agent connection closed')));
  }

  /** Connects and synchronises; AgentTimeout when the agent does not answer within `timeoutMs`. */
  static async open(path: string, timeoutMs = 3000): Promise<GuestAgent> {
    const sock = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.createConnection(path);
      const t = setTimeout(() => {
        s.destroy();
        reject(new AgentTimeout(`guest agent socket ${path} did not accept a connection within ${timeoutMs} ms`));
      }, timeoutMs);
      s.once('connect', () => {
        clearTimeout(t);
        resolve(s);
      });
      s.once('error', (e) => {
        clearTimeout(t);
        reject(e);
      });
    });
    const a = new GuestAgent(sock, path);
    try {
      await a.sync(timeoutMs);
    } catch (err) {
      a.close();
      throw err;
    }
    return a;
  }

  private fail(err: Error): void {
    if (!this.dead) this.dead = err;
    const w = this.waiter;
    this.waiter = null;
    w?.(err);
  }

  /** Splits what arrives into lines, looking only at the new bytes (a long reply costs one copy). */
  private onData(d: Buffer): void {
    if (this.dead) return;
    let start = 0;
    for (;;) {
      const nl = d.indexOf(0x0a, start);
      if (nl < 0) {
        if (start < d.length) {
          this.partial.push(d.subarray(start));
          this.partialBytes += d.length - start;
        }
        break;
      }
      const line = this.partial.length ? Buffer.concat([...this.partial, d.subarray(start, nl)]) : d.subarray(start, nl);
      this.partial = [];
      this.partialBytes = 0;
      this.lines.push(line);
      this.linesBytes += line.length;
      start = nl + 1;
    }
    if (this.partialBytes + this.linesBytes > AGENT_REPLY_MAX_BYTES) {
      // A guest that floods its agent channel gets its connection closed, not hostd's memory.
      this.lines.length = 0;
      this.partial = [];
      this.fail(
        new AgentError(
          'reply',
          'ReplyTooLarge',
          `the guest agent sent more than ${AGENT_REPLY_MAX_BYTES} bytes without hostd reading them; the connection was closed`,
        ),
      );
      this.sock.destroy();
      return;
    }
    this.pump();
  }

  private pump(): void {
    while (this.waiter && this.lines.length) {
      let line = this.lines.shift()!;
      this.linesBytes -= line.length;
      if (!this.synced) {
        // Before the sync reply, everything up to the last 0xFF sentinel is stale output of an earlier client.
        const ff = line.lastIndexOf(0xff);
        if (ff < 0) continue;
        line = line.subarray(ff + 1);
      }
      const w = this.waiter;
      this.waiter = null;
      w(line.toString('utf8').trim());
    }
  }

  private readLine(timeoutMs: number, what: string): Promise<string> {
    if (this.dead) return Promise.reject(this.dead);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.waiter = null;
        const e = new AgentTimeout(`guest agent did not answer ${what} within ${timeoutMs} ms`);
        this.fail(e);
        this.sock.destroy();
        reject(e);
      }, timeoutMs);
      this.waiter = (l) => {
        clearTimeout(t);
        if (l instanceof Error) reject(l);
        else resolve(l);
      };
      this.pump();
    });
  }

  private async sync(timeoutMs: number): Promise<void> {
    const id = crypto.randomInt(1, 2 ** 31);
    this.sock.write(Buffer.concat([Buffer.from([0xff]), Buffer.from(JSON.stringify({ execute: 'guest-sync-delimited', arguments: { id } }) + '\n')]));
    const end = Date.now() + timeoutMs;
    for (;;) {
      const line = await this.readLine(Math.max(1, end - Date.now()), 'guest-sync-delimited');
      let msg: any;
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      if (msg?.return === id) break;
      // A stale reply of an earlier sync: keep looking for ours.
      this.synced = false;
    }
    this.synced = true;
  }

  /** Runs one command; AgentError on an error reply, AgentTimeout when no reply comes in time. */
  async call<T = any>(command: string, args?: Record<string, unknown>, timeoutMs = 10_000): Promise<T> {
    if (this.dead) throw this.dead;
    this.sock.write(JSON.stringify(args ? { execute: command, arguments: args } : { execute: command }) + '\n');
    for (;;) {
      const line = await this.readLine(timeoutMs, command);
      if (!line) continue;
      let msg: any;
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      if (msg.error) throw new AgentError(command, msg.error.class ?? 'GenericError', msg.error.desc ?? 'failed');
      return msg.return as T;
    }
  }

  /**
   * A command after which the agent sends no reply (guest-shutdown, guest-suspend-*):
   * written, then the connection is closed.
   */
  send(command: string, args?: Record<string, unknown>): void {
    this.sock.write(JSON.stringify(args ? { execute: command, arguments: args } : { execute: command }) + '\n');
  }

  close(): void {
    this.sock.destroy();
  }
}
