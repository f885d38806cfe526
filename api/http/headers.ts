/**
 * Reads one request header from `rawHeaders`. Node builds `req.headers` (an
 * object of every header) on first access; the API's hot path needs four
 * headers at most, and skipping that object is a measurable share of a call.
 * The first occurrence wins, as for these single-valued headers in
 * `req.headers`.
 */
import type { IncomingMessage } from 'node:http';

export function header(req: IncomingMessage, lowerName: string): string | undefined {
  const raw = req.rawHeaders;
  const n = lowerName.length;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    if (name.length === n && (name === lowerName || name.toLowerCase() === lowerName)) return raw[i + 1];
  }
  return undefined;
}

/**
 * Every occurrence of a request header joined with ', ', as `req.headers`
 * gives a header Node does not keep single (Accept, and any header it does
 * not know, such as MCP-Protocol-Version); undefined when absent.
 */
export function headerJoined(req: IncomingMessage, lowerName: string): string | undefined {
  const raw = req.rawHeaders;
  const n = lowerName.length;
  let out: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    if (name.length === n && (name === lowerName || name.toLowerCase() === lowerName)) out = out === undefined ? raw[i + 1] : `${out}, ${raw[i + 1]}`;
  }
  return out;
}
