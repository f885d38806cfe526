/** Root hooks: whatever daemons a test started are stopped and their dirs removed. */
import { stopAll } from './daemon.js';

export const mochaHooks = {
  async afterAll(): Promise<void> {
    await stopAll();
  },
};
