/**
 * The `EventsPort` domains receive: `<domain>.state` events, written on their
 * own (synced), or joined to the batch that stores the change they report
 * (`writeWithState`), so that a crash leaves both or neither.
 */
import type { EventsPort } from '../domain.js';
import { OPERATOR } from '../lib/operator.js';
import { SYNC, type BatchOp, type Store } from '../store/store.js';
import { stateAcl } from './filter.js';
import type { EventLog } from './log.js';
import type { NewEvent } from './types.js';

export type StateOpts = { actor?: string; summary?: string; owner?: string };

/**
 * The port with the batch join: `joinState` hands `write` the event's store
 * ops to put in the domain's own batch (Store.batch, synced). A port without
 * it (a domain built by hand in a test) writes the event after the batch.
 */
export interface JoiningEventsPort extends EventsPort {
  joinState<T>(domain: string, resource: string, state: string, data: Record<string, unknown>, opts: StateOpts, write: (ops: BatchOp[]) => Promise<T>): Promise<T>;
}

function stateEvent(domain: string, resource: string, state: string, data: Record<string, unknown> = {}, opts: StateOpts = {}): NewEvent {
  return {
    type: `${domain}.state`, domain, resource, actor: opts.actor ?? OPERATOR,
    summary: opts.summary ?? `${resource} is ${state}`,
    data: { ...data, state },
    acl: stateAcl(domain, opts.owner),
  };
}

export function eventsPort(log: EventLog): JoiningEventsPort {
  return {
    publishState: (domain, resource, state, data = {}, opts = {}) => log.append(stateEvent(domain, resource, state, data, opts)),
    joinState: (domain, resource, state, data, opts, write) => log.join(stateEvent(domain, resource, state, data, opts), write),
  };
}

/**
 * Stores `ops` (the change) and its `<domain>.state` event in one synced
 * batch of `store`: the one helper a domain uses for "a state event in the
 * same batch as its change" (docs/events.md, "Guarantees").
 */
export async function writeWithState(
  port: EventsPort, store: Store, ops: BatchOp[],
  ev: { domain: string; resource: string; state: string; data?: Record<string, unknown> } & StateOpts,
): Promise<void> {
  const { domain, resource, state, data = {}, ...opts } = ev;
  const joining = (port as Partial<JoiningEventsPort>).joinState;
  if (joining) {
    await joining.call(port, domain, resource, state, data, opts, (evOps: BatchOp[]) => store.batch([...ops, ...evOps], SYNC));
    return;
  }
  await store.batch(ops, SYNC);
  await port.publishState(domain, resource, state, data, opts);
}
