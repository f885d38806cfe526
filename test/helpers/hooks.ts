/**
 * Root hooks. A test file's daemons are stopped when the next file's tests
 * begin, so that daemons a file leaves running do not pile up (memory, timers,
 * CPU) under the files that follow; whatever is left is stopped, and the
 * temporary directories removed, at the end of the run.
 */
import type { Context } from 'mocha';
import { claimDaemons, stopAll, stopDaemonsOf } from './daemon.js';

/** The file of the test that ran last. */
let currentFile: string | undefined;

export const mochaHooks = {
  async beforeEach(this: Context): Promise<void> {
    const file = this.currentTest?.file;
    if (!file || file === currentFile) return;
    const previous = currentFile;
    currentFile = file;
    if (previous) await stopDaemonsOf(previous);
  },
  afterEach(this: Context): void {
    const file = this.currentTest?.file;
    if (file) claimDaemons(file);
  },
  async afterAll(): Promise<void> {
    await stopAll();
  },
};
