/**
 * The handler table type: one handler per registry operation. Building a
 * `HandlerTable` fails to compile when an operation has none.
 */
import type { OperationName, DomainOperationName } from './registry/index.js';
import { operationsOfDomain } from './registry/index.js';
import type { Domain } from './registry/types.js';
import type { Handler } from '../daemon/context.js';
import { notImplemented } from './errors.js';

export type HandlerTable = { readonly [K in OperationName]: Handler };
export type DomainHandlers<D extends Domain> = { readonly [K in DomainOperationName<D>]: Handler };

const NOT_IMPLEMENTED = Symbol('not implemented');

/** Handlers for a domain not built yet: 501 after auth and validation, and the catalog says so. */
export function notImplementedDomain<D extends Domain>(domain: D): DomainHandlers<D> {
  const out: Record<string, Handler> = {};
  for (const op of operationsOfDomain(domain)) {
    const h: Handler = async () => {
      throw notImplemented(op.name);
    };
    (h as unknown as Record<symbol, boolean>)[NOT_IMPLEMENTED] = true;
    out[op.name] = h;
  }
  return out as DomainHandlers<D>;
}

export function isImplemented(h: Handler): boolean {
  return !(h as unknown as Record<symbol, boolean>)[NOT_IMPLEMENTED];
}
