/**
 * The event stream's shapes (docs/events.md). An event is stored once, by
 * seq, without its cursor (a cursor is made for the reader: a `members=all`
 * reader's cursor holds every member's seq), and with who may see it
 * (`acl`), which is never sent.
 */

/** Who may read an event: any one of `scopes`, and when `owner` is set, only that token (by id or name). */
export interface EventAcl {
  scopes: string[];
  owner?: string;
}

export interface StoredEvent {
  seq: number;
  node_id: string;
  time: string;
  type: string;
  domain: string;
  resource: string;
  actor: string;
  summary: string;
  data: Record<string, unknown>;
  acl: EventAcl;
}

/** An event as a client receives it: the stored event with its cursor, never who may read it. */
export type PublicEvent = Omit<StoredEvent, 'acl'> & { cursor: string };

/** What a writer hands in; the log adds seq, node_id and time. */
export interface NewEvent {
  type: string;
  domain: string;
  resource: string;
  actor: string;
  summary: string;
  data?: Record<string, unknown>;
  acl: EventAcl;
  time?: string;
}

/** The store ops of one batch, as Store.batch takes them. */
export type { BatchOp } from '../store/store.js';
