/** The `EventsPort` domains receive: `<domain>.state` events, written on their own (synced). */
import type { EventsPort } from '../domain.js';
import { OPERATOR } from '../lib/operator.js';
import { stateAcl } from './filter.js';
import type { EventLog } from './log.js';

export function eventsPort(log: EventLog): EventsPort {
  return {
    publishState: (domain, resource, state, data = {}, opts = {}) =>
      log.append({
        type: `${domain}.state`, domain, resource, actor: opts.actor ?? OPERATOR,
        summary: opts.summary ?? `${resource} is ${state}`,
        data: { ...data, state },
        acl: stateAcl(domain, opts.owner),
      }),
  };
}
