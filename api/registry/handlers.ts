/**
 * Handler types derived from the registry: a handler of operation N receives
 * `ArgsOf<N>`, so no handler restates a schema or casts its arguments.
 */
import type { Handler } from '../../daemon/lib/caller.js';
import type { ArgsOf, OperationName } from './index.js';

export type OpHandler<N extends OperationName> = Handler<ArgsOf<N>>;
export type HandlersOf<Ops extends OperationName> = { readonly [K in Ops]: OpHandler<K> };
