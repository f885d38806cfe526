/**
 * The locations operations as dispatch handlers, typed from the registry.
 * Arguments arrive schema-validated; the service does the rest.
 */
import type { HandlersOf } from '../../api/registry/handlers.js';
import type { LocationsService } from './service.js';

export type LocationOperation =
  | 'locations_list'
  | 'locations_create'
  | 'locations_discover'
  | 'locations_get'
  | 'locations_disconnect'
  | 'locations_reconnect'
  | 'locations_delete';

export function locationHandlers(svc: LocationsService): HandlersOf<LocationOperation> {
  return {
    locations_list: () => svc.list(),
    locations_create: (args, ctx) => svc.create(args, ctx),
    locations_discover: (args) => svc.discover(args),
    locations_get: (args) => svc.get(args.location_id),
    locations_disconnect: (args, ctx) => svc.disconnect(args.location_id, ctx),
    locations_reconnect: (args, ctx) => svc.reconnect(args.location_id, ctx),
    locations_delete: (args, ctx) => svc.delete(args.location_id, ctx),
  };
}
