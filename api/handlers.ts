/**
 * The handler table type: one handler per registry operation, typed with its
 * arguments. The composition root builds it from the domain modules
 * (daemon/domains.ts); building it fails to compile when an operation has none.
 */
import type { OperationName } from './registry/index.js';
import type { OpHandler } from './registry/handlers.js';

export type HandlerTable = { readonly [K in OperationName]: OpHandler<K> };
