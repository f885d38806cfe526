/**
 * What a driver reports about its host programs, and the one way a service
 * asks for them. Every domain driver implements `RuntimeDriver`: the domain's
 * host-status and the domain's `info()` show `availability()`, and a service
 * calls `ensureAvailable(driver, [...programs])` before using them, which
 * answers 503 naming the program and what to install (never a 404, never a
 * failure half-way through the work).
 */
import { internal, unavailable } from './errors.js';

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

/** The availability part of every domain's driver contract (daemon/<domain>/driver.ts extends it). */
export interface RuntimeDriver {
  /**
   * Every host program or service the driver uses, as it is now. Answers from
   * a short cache (ProbeCache) unless `fresh`; never throws for a missing
   * program: that is an entry with `available: false` and the reason.
   */
  availability(opts?: { fresh?: boolean }): Promise<Availability[]>;
}

/** Throws 503 naming the first unavailable runtime of `list`. */
export function requireAvailable(...list: Availability[]): void {
  const gone = list.find((a) => !a.available);
  if (gone) throw unavailable(`${gone.name} is not available: ${gone.reason ?? 'unknown reason'}`);
}

/**
 * The call a service makes before it uses its runtime: resolves when every
 * program of `names` (every program the driver reports, when omitted) is
 * available; otherwise it asks the driver again, fresh (a program installed
 * since the last probe needs no restart), and throws 503 naming the first
 * one still missing. A name the driver does not report is a programming
 * error (500), not a missing program.
 */
export async function ensureAvailable(driver: RuntimeDriver, names?: readonly string[]): Promise<Availability[]> {
  const pick = (list: Availability[]) => {
    if (!names) return list;
    return names.map((n) => {
      const a = list.find((x) => x.name === n);
      if (!a) throw internal(`the runtime reports no program named '${n}' (it reports ${list.map((x) => x.name).join(', ') || 'none'})`);
      return a;
    });
  };
  let list = await driver.availability();
  if (pick(list).every((a) => a.available)) return list;
  list = await driver.availability({ fresh: true });
  requireAvailable(...pick(list));
  return list;
}

/**
 * A driver's probe result, kept for `ttlMs`: callers on a hot path never pay
 * for a probe, concurrent callers share one probe in flight (a `fresh` call
 * too: that probe started after the cached one), and a probe that throws is
 * not kept (the next call probes again).
 */
export class ProbeCache<T> {
  private kept: { at: number; value: T } | null = null;
  private inFlight: Promise<T> | null = null;

  constructor(
    private readonly probe: () => Promise<T>,
    private readonly ttlMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  get(opts: { fresh?: boolean } = {}): Promise<T> {
    if (!opts.fresh && this.kept && this.now() - this.kept.at < this.ttlMs) return Promise.resolve(this.kept.value);
    if (this.inFlight) return this.inFlight;
    const p = this.probe()
      .then((value) => {
        this.kept = { at: this.now(), value };
        return value;
      })
      .finally(() => {
        if (this.inFlight === p) this.inFlight = null;
      });
    this.inFlight = p;
    return p;
  }
}
