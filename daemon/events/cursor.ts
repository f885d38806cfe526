/**
 * Cursors: opaque to clients, base64url of a small JSON object naming, per
 * member, the member's log epoch and the last seq the reader has seen
 * (`{"v":1,"m":{"<node_id>":["<epoch>",<seq>]}}`). A single member's stream
 * has one entry; a `members=all` stream has one per member, so one cursor
 * resumes each member where it stopped. The epoch is a random id made when a
 * member's event log is created: a cursor from a wiped data dir names an
 * epoch that no longer exists, and is answered with `reset`, never misread as
 * a position in the new log.
 */
import { badRequest } from '../lib/errors.js';

export interface Position {
  epoch: string;
  seq: number;
}

export type Cursor = Record<string, Position>;

/** Longest cursor accepted: a cluster's worth of members, no more. */
export const MAX_CURSOR_CHARS = 8192;
const ID_RE = /^[A-Za-z0-9_.:-]{1,128}$/;

export function encodeCursor(c: Cursor): string {
  const m: Record<string, [string, number]> = {};
  for (const node of Object.keys(c).sort()) m[node] = [c[node].epoch, c[node].seq];
  return Buffer.from(JSON.stringify({ v: 1, m }), 'utf8').toString('base64url');
}

/** The cursor a client sent, or a 400 naming `what` (the argument or header it came in). */
export function decodeCursor(text: string, what = "argument 'cursor'"): Cursor {
  const bad = () => badRequest(`${what} is not a cursor this server issued`);
  if (typeof text !== 'string' || !text || text.length > MAX_CURSOR_CHARS || !/^[A-Za-z0-9_-]+$/.test(text)) throw bad();
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (!raw || typeof raw !== 'object' || (raw as { v?: unknown }).v !== 1) throw bad();
  const m = (raw as { m?: unknown }).m;
  if (!m || typeof m !== 'object' || Array.isArray(m)) throw bad();
  const out: Cursor = {};
  for (const [node, pos] of Object.entries(m as Record<string, unknown>)) {
    if (!ID_RE.test(node) || !Array.isArray(pos) || pos.length !== 2) throw bad();
    const [epoch, seq] = pos as [unknown, unknown];
    if (typeof epoch !== 'string' || !ID_RE.test(epoch) || typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) throw bad();
    out[node] = { epoch, seq };
  }
  if (!Object.keys(out).length) throw bad();
  return out;
}
