/**
 * Reading the JSON body of an admin-socket command (hostctl's operator
 * commands, which are not registry operations and so have no schema): the
 * same 400s the API gives for a missing or mistyped argument.
 */
import { badRequest } from './errors.js';

export function adminArgs(body: Record<string, unknown>) {
  function str(k: string, required: true): string;
  function str(k: string, required?: false): string | undefined;
  function str(k: string, required = false): string | undefined {
    const v = body[k];
    if (v === undefined || v === null) {
      if (required) throw badRequest(`argument '${k}' is required`);
      return undefined;
    }
    if (typeof v !== 'string') throw badRequest(`argument '${k}' must be a string`);
    return v;
  }
  const uint = (k: string): number | undefined => {
    const v = body[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw badRequest(`argument '${k}' must be a non-negative integer`);
    return v;
  };
  return { str, uint };
}
