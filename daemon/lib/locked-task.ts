/**
 * A task that holds resource locks for its whole run: a conflicting call made
 * while it runs gets the lock's 409 (`container 7 is busy: move in progress`),
 * and the keys are let go when the work ends, however it ends.
 *
 * Two shapes:
 * - `lockedTask(lock, tasks, keys, what, start, work)`: take the keys, start the task;
 * - `hold` first, check and prepare under the keys (journal an intent, write a
 *   `creating` record), then `startHolding(tasks, release, start, work)` hands
 *   the release to the task. Until the task has started, releasing is the
 *   caller's job (in its catch).
 */
import type { KeyedLock, Release } from './lock.js';
import type { TaskRecord, TaskStart, TaskWork, Tasks } from './tasks.js';

/** Takes `keys` (409 when any is busy) and starts a task that holds them until its work ends. */
export function lockedTask(lock: KeyedLock, tasks: Tasks, keys: string[], what: string, start: TaskStart, work: TaskWork): TaskRecord {
  return startHolding(tasks, lock.hold(keys, what), start, work);
}

/**
 * Starts a task that calls `release` when its work ends. If the task cannot
 * be started, `release` is called before the error goes on, so the keys are
 * never left held by work that never ran.
 */
export function startHolding(tasks: Tasks, release: Release, start: TaskStart, work: TaskWork): TaskRecord {
  try {
    return tasks.start(start, async (t) => {
      try {
        return await work(t);
      } finally {
        release();
      }
    });
  } catch (err) {
    release();
    throw err;
  }
}
