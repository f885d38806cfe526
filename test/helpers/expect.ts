/** Assertions shared by the tests. */
import { expect } from 'chai';
import { ApiError } from '../../daemon/lib/errors.js';

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
