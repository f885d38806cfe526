/**
 * Structured logs (pino), one line per request. Secrets never reach a log:
 * request lines carry the path without its query string, and these keys are
 * redacted wherever they appear.
 */
import pino, { type Logger } from 'pino';

export interface RequestLine {
  req_id: string;
  method: string | undefined;
  path: string;
  status: number;
  op?: string;
  actor?: string;
  ms: number;
  transport?: string;
}

/**
 * Request lines: one per call, on the hot path. They have fixed fields (no
 * query string, no body, so nothing secret) and are serialised by hand into
 * pino's line format on pino's own stream, which costs a fraction of a
 * generic log call.
 */
export interface RequestLog {
  write(line: RequestLine): void;
}

export interface Loggers {
  /** General log, with secret-looking keys redacted wherever they appear. */
  log: Logger;
  requests: RequestLog;
}

/** Printable ASCII without `"` and `\`: JSON's text of such a string is the string in quotes. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;
/** A string as JSON, without JSON.stringify for the usual path or token name (a measurable part of a request line). */
const str = (v: string | undefined) => (v === undefined ? 'null' : PLAIN.test(v) ? `"${v}"` : JSON.stringify(v));

export function requestLogTo(write: (text: string) => void, enabled = true): RequestLog {
  const pid = process.pid;
  return {
    write(l) {
      if (!enabled) return;
      // req_id (validated or made here), method (from the HTTP parser) and op
      // (a registry name) need no escaping; path and actor are escaped.
      write(
        `{"level":30,"time":${Date.now()},"pid":${pid},"req_id":"${l.req_id}","method":${l.method === undefined ? 'null' : `"${l.method}"`},"path":${str(l.path)},` +
          `"status":${l.status},"op":${l.op === undefined ? 'null' : `"${l.op}"`},"actor":${str(l.actor)}${l.transport ? `,"transport":"${l.transport}"` : ''},"ms":${l.ms.toFixed(3)},"msg":"request"}\n`,
      );
    },
  };
}

/** Request lines through an ordinary logger (tests, tools). */
export function requestLogVia(log: Logger): RequestLog {
  return { write: (l) => log.info(l, 'request') };
}

/**
 * The daemon's log stream: lines are gathered in an array up to `minLength`
 * characters and handed to sonic-boom (pino's destination, which writes them
 * synchronously and handles EAGAIN and EPIPE) as one string. Pino's own
 * batching (`minLength` on the destination) measures the byte length of its
 * whole pending buffer on every line: a request line cost about 20 µs of CPU
 * (docs/performance.md, "API"); joining an array once per batch costs a
 * fraction of that. General log lines and request lines share this one
 * buffer, so they stay in the order they were written. A line at warn level or
 * above is written at once, with what was gathered before it: such lines are
 * rare, and they are the ones an operator needs after a `kill -9` (which skips
 * the exit hook) or a reader waits for.
 */
export class LineBatch {
  private parts: string[] = [];
  private size = 0;

  constructor(
    private readonly out: { write(text: string): unknown },
    private readonly minLength: number,
  ) {}

  write(line: string): boolean {
    this.parts.push(line);
    this.size += line.length;
    if (this.size >= this.minLength || urgent(line)) this.flushSync();
    return true;
  }

  /** Writes what is gathered (pino's `logger.flush(cb)` calls this). */
  flush(cb?: (err?: Error) => void): void {
    try {
      this.flushSync();
    } catch (err) {
      if (cb) cb(err as Error);
      return;
    }
    cb?.();
  }

  flushSync(): void {
    if (this.size === 0) return;
    const text = this.parts.length === 1 ? this.parts[0] : this.parts.join('');
    this.parts = [];
    this.size = 0;
    this.out.write(text);
  }
}

/** Pino writes `{"level":N,` first; 40 and above (warn, error, fatal) are urgent. */
function urgent(line: string): boolean {
  return line.startsWith('{"level":') && line.charCodeAt(9) >= 0x34 /* '4' */ && line.charCodeAt(10) !== 0x2c /* ',' */;
}

export function createLoggers(level: string, dest: number | string = 1): Loggers {
  // Lines are gathered up to 8 KiB and written together, and at least every
  // quarter second. The writes are synchronous: an asynchronous write costs a
  // thread-pool round trip and a wake-up each, more than the 8 KiB write itself;
  // the price is that a log reader that stops reading (a full pipe) stalls the daemon.
  const stream = new LineBatch(pino.destination({ dest, sync: true, minLength: 0 }), 8192);
  setInterval(() => {
    try {
      stream.flushSync();
    } catch {
      /* the destination reports its own errors */
    }
  }, 250).unref();
  // A process that exits without a flush (a crash) still writes what it gathered.
  process.once('exit', () => {
    try {
      stream.flushSync();
    } catch {
      /* nothing more to do at exit */
    }
  });
  const log = pino(
    {
      level,
      base: { pid: process.pid },
      redact: {
        paths: ['*.password', '*.secret', '*.token', '*.authorization', '*.credentials', 'password', 'secret', 'token', 'authorization', 'credentials'],
        censor: '[redacted]',
      },
    },
    stream,
  );
  const requests = requestLogTo((t) => stream.write(t), log.isLevelEnabled('info'));
  return { log, requests };
}
