/**
 * What a driver reports about its host program, once at start and when asked:
 * the domain's host-status shows it, and a call that needs a missing runtime
 * answers 503 with the reason.
 */
import { unavailable } from './errors.js';

export interface Availability {
  /** The program or service, e.g. `qemu-system-x86_64`, `dockerd`, `caddy`. */
  name: string;
  /** Its version as it reports it; null when it could not be run. */
  version: string | null;
  available: boolean;
  /** Why it is unavailable (what is missing and what to install); null when available. */
  reason: string | null;
}

export const availableAs = (name: string, version: string | null): Availability => ({ name, version, available: true, reason: null });
export const missing = (name: string, reason: string): Availability => ({ name, version: null, available: false, reason });

/** Throws 503 naming the first unavailable runtime of `list`. */
export function requireAvailable(...list: Availability[]): void {
  const gone = list.find((a) => !a.available);
  if (gone) throw unavailable(`${gone.name} is not available: ${gone.reason ?? 'unknown reason'}`);
}
