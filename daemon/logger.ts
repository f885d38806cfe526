/**
 * Structured logs (pino), one line per request. Secrets never reach a log:
 * request lines carry the path without its query string, and these keys are
 * redacted wherever they appear.
 */
import pino, { type Logger } from 'pino';

export function createLogger(level: string, dest: number | string = 1): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      redact: { paths: ['*.password', '*.secret', '*.token', '*.authorization', '*.credentials', 'password', 'secret', 'token', 'authorization', 'credentials'], censor: '[redacted]' },
    },
    pino.destination({ dest, sync: false }),
  );
}
