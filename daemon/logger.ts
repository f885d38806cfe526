/**
 * Structured logs (pino), one line per request. Secrets never reach a log:
 * request lines carry the path without its query string, and these keys are
 * redacted wherever they appear.
 */
import pino, { type Logger } from 'pino';

export interface Loggers {
  /** General log, with secret-looking keys redacted wherever they appear. */
  log: Logger;
  /**
   * Request lines: written on every call, so no redaction pass; the fields are
   * fixed by the transport (id, method, path without query, status, op, actor, ms).
   */
  requests: Logger;
}

export function createLoggers(level: string, dest: number | string = 1): Loggers {
  const stream = pino.destination({ dest, sync: false });
  const log = pino(
    {
      level,
      base: { pid: process.pid },
      redact: { paths: ['*.password', '*.secret', '*.token', '*.authorization', '*.credentials', 'password', 'secret', 'token', 'authorization', 'credentials'], censor: '[redacted]' },
    },
    stream,
  );
  const requests = pino({ level, base: { pid: process.pid } }, stream);
  return { log, requests };
}
