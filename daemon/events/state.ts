/**
 * The `EventsPort` domains receive: `<domain>.state` events, written on their
 * own (synced), or joined to the batch that stores the change they report
 * (`writeWithState`), so that a crash leaves both or neither.
 */
import type { EventsPort, StateEventOpts } from '../domain.js';
import { OPERATOR } from '../lib/operator.js';
import { SYNC, type BatchOp, type Store } from '../store/store.js';
import { stateAcl } from './filter.js';
import type { EventLog } from './log.js';
import type { NewEvent } from './types.js';

function stateEvent(domain: string, resource: string, state: string, data: Record<string, unknown> = {}, opts: StateEventOpts = {}): NewEvent {
  return {
    type: `${domain}.state`,
    domain,
    resource,
    actor: opts.actor ?? OPERATOR,
    summary: opts.summary ?? `${resource} is ${state}`,
    data: { ...data, state },
    acl: stateAcl(domain, opts.owner),
  };
}

export function eventsPort(log: EventLog): Required<EventsPort> {
  return {
    publishState: (domain, resource, state, data = {}, opts = {}) => log.append(stateEvent(domain, resource, state, data, opts)),
    joinState: (domain, resource, state, data, opts, write) => log.join(stateEvent(domain, resource, state, data, opts), write),
  };
}

/**
 * Stores `ops` (the change) and its `<domain>.state` event in one synced
 * batch of `store`: the one helper a domain uses for "a state event in the
 * same batch as its change" (docs/events.md, "Guarantees"). `sync` LAZY only
 * for a call whose activity row follows, synced, before it answers
 * (`NoteSink.rowSyncs`): the batch is then on disk by the answer all the same.
 */
export async function writeWithState(
  port: EventsPort,
  store: Store,
  ops: BatchOp[],
  ev: { domain: string; resource: string; state: string; data?: Record<string, unknown> } & StateEventOpts,
  sync: {} = SYNC,
): Promise<void> {
  const { domain, resource, state, data = {}, ...opts } = ev;
  if (port.joinState) {
    await port.joinState(domain, resource, state, data, opts, (evOps: BatchOp[]) => store.batch([...ops, ...evOps], sync));
    return;
  }
  await store.batch(ops, sync);
  await port.publishState(domain, resource, state, data, opts);
}
