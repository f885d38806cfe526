/**
 * A wait that wakes on a domain's next signal of one resource (its state
 * reports), with a bound: what wait-ready and the sandbox wait sleep on
 * instead of a poll interval. Take it before reading the resource, so that a
 * signal between the read and the wait still wakes it.
 */
import type { EventEmitter } from 'node:events';

export interface NextSignal {
  /** Resolves at the signal (at once when it already came), or after `ms`. */
  wait(ms: number): Promise<void>;
  /** Stops listening (always call it, also after `wait`). */
  cancel(): void;
}

export function nextSignal(emitter: EventEmitter, key: string): NextSignal {
  let fired = false;
  let wake: (() => void) | null = null;
  const on = () => {
    fired = true;
    wake?.();
  };
  emitter.once(key, on);
  let timer: NodeJS.Timeout | undefined;
  return {
    wait: (ms) =>
      fired
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            wake = resolve;
            timer = setTimeout(resolve, ms);
          }),
    cancel: () => {
      clearTimeout(timer);
      emitter.off(key, on);
    },
  };
}
