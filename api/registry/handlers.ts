/**
 * Handler types derived from the registry: a handler of operation N receives
 * `ArgsOf<N>` and answers `ResultOf<N>`, so no handler restates a schema or
 * casts its arguments, and one that answers something its result schema
 * does not describe fails to compile.
 */
import type { Handler } from '../../daemon/lib/caller.js';
import type { ArgsOf, OperationName, ResultOf } from './index.js';

export type OpHandler<N extends OperationName> = Handler<ArgsOf<N>, ResultOf<N>>;
export type HandlersOf<Ops extends OperationName> = { readonly [K in Ops]: OpHandler<K> };
