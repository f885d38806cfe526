/**
 * The locations operations as dispatch handlers, typed from the registry:
 * each names the file that holds its operation. Arguments arrive
 * schema-validated.
 */
import type { DomainOperationName } from '../../api/registry/index.js';
import type { HandlersOf } from '../../api/registry/handlers.js';
import { disconnect, reconnect } from './connection.js';
import type { LocationsContext } from './context.js';
import { discover } from './discover.js';
import { create, get, list, remove } from './service.js';

export function locationHandlers(c: LocationsContext): HandlersOf<DomainOperationName<'locations'>> {
  return {
    locations_list: () => list(c),
    locations_create: (args, ctx) => create(c, args, ctx),
    locations_discover: (args) => discover(c, args),
    locations_get: (args) => get(c, args.location_id),
    locations_disconnect: (args, ctx) => disconnect(c, args.location_id, ctx),
    locations_reconnect: (args, ctx) => reconnect(c, args.location_id, ctx),
    locations_delete: (args, ctx) => remove(c, args.location_id, ctx),
  };
}
