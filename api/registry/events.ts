/**
 * The event stream (docs/events.md): an extension beyond the spec, listed in
 * docs/api-decisions.md. Any token with at least one read scope may call
 * these (the service answers 403 otherwise); each event then reaches it only
 * if its scopes may read the event's domain.
 */
import type { OperationSpec } from './types.js';
import { str, int, object, arrayOf, anyObject, dateTime, oneOf } from './schema.js';

const filters = {
  cursor: str("Resume after this cursor (an event's cursor, a next_cursor, or what a reset carries)", { maxLength: 8192 }),
  types: str("Comma list of event types; an entry ending in '.' matches a family (e.g. 'vms.,tasks.ended')", { maxLength: 2048 }),
  resource: str('A resource path (e.g. vms/101): events of it and of what lies below it', { maxLength: 1024 }),
  task_id: str('Only events of this task', { maxLength: 128 }),
};

export const eventRecord = () =>
  object(
    {
      cursor: str('Opaque; resume after this event with it'),
      seq: int('Strictly increasing per member', 0),
      node_id: str('The member the event happened on'),
      time: dateTime(),
      type: str('<domain>.<what> (vms.state, tasks.progress ...), activity, or bookmark/reset/lagged/closed'),
      domain: str(),
      resource: str('Resource path, e.g. vms/101'),
      actor: str('Token name, or admin'),
      summary: str(),
      data: anyObject('What the event says beside its summary'),
    },
    ['cursor', 'seq', 'node_id', 'time', 'type', 'domain', 'resource', 'actor', 'summary', 'data'],
    { title: 'Event' },
  );

export const operations = [
  {
    name: 'events_list',
    domain: 'events',
    method: 'GET',
    path: '/events',
    scopes: [],
    hints: ['RO'],
    summary: 'List events after a cursor (long poll with timeout_seconds).',
    category: 'system',
    params: {},
    args: {
      ...filters,
      limit: int('Maximum number of events, 1-1000; default 100', 1, 1000),
      timeout_seconds: int('Wait up to this long for a first matching event, 0-60; default 0', 0, 60),
    },
    result: object({ events: arrayOf(eventRecord()), next_cursor: str('Resume after this page with it') }, ['events', 'next_cursor']),
  },
  {
    name: 'events_stream',
    domain: 'events',
    method: 'GET',
    path: '/events/stream',
    scopes: [],
    hints: ['RO'],
    summary: 'Stream events (Server-Sent Events with Accept: text/event-stream, or a WebSocket upgrade).',
    category: 'system',
    params: {},
    args: { ...filters, members: oneOf(['all'] as const, "'all': every member's events on one stream") },
    mcp: false,
  },
] as const satisfies readonly OperationSpec[];
