/** The events domain: pages of the event log (events_list); the stream itself is served by the transports (api/http/events.ts). */
import { defineDomain } from '../domain.js';
import { ApiError } from '../lib/errors.js';
import type { EventService } from './service.js';
import { requireSomeRead } from './filter.js';

export const eventsDomain = (events: EventService) =>
  defineDomain({
    name: 'events',
    ops: ['events_list', 'events_stream'] as const,
    async open() {
      return {
        handlers: {
          events_list: async (args, ctx) => events.list(ctx.caller, args),
          // Reached only by a request that is neither SSE nor a WebSocket upgrade.
          events_stream: async (_args, ctx) => {
            // 403 before 406, as every refusal of the caller comes before one of the request.
            requireSomeRead(ctx.caller);
            throw new ApiError(
              406,
              'events_stream is a stream: send Accept: text/event-stream (Server-Sent Events) or a WebSocket upgrade; events_list answers pages',
            );
          },
        },
        info: async () => ({ name: 'events', built: true, runtimes: [] }),
        close: async () => events.close(),
      };
    },
  });
