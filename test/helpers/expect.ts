/** Assertions shared by the tests. */
import { expect } from 'chai';
import { ApiError } from '../../daemon/lib/errors.js';
import type { TraceLimits } from '../../daemon/lib/throttle.js';

/** The promise rejects with an ApiError of exactly this status and message. */
export async function rejectsApi(p: Promise<unknown>, status: number, message: string): Promise<void> {
  let caught: unknown;
  try {
    await p;
  } catch (err) {
    caught = err;
  }
  expect(caught, `expected ApiError ${status} '${message}'`).to.be.instanceOf(ApiError);
  expect((caught as ApiError).status, (caught as Error).message).to.equal(status);
  expect((caught as ApiError).message).to.equal(message);
}

/**
 * The most a refusal trace with `limits` (daemon/lib/throttle.ts) records
 * over `elapsedMs`: the burst, then one more per `everyMs`, and one summary
 * per window begun plus the one written at shutdown. The rule is in time, so
 * a slower run (a loaded machine) may record more one by one: a bound made
 * from the time the run took holds however long it took.
 */
export function traceAllowance(limits: TraceLimits, elapsedMs: number): { single: number; summaries: number } {
  return {
    single: limits.burst + Math.ceil(elapsedMs / limits.everyMs) + 1,
    summaries: Math.ceil(elapsedMs / limits.windowMs) + 1,
  };
}
