/**
 * One lock per resource key. Two ways to take it:
 * - `run` waits its turn (short critical sections, e.g. "is the name free, then create");
 * - `exclusive` refuses at once with 409 naming the operation in progress, for
 *   long work on one resource (a VM start while a clone of it runs).
 * Both register all their keys at once, so there is no lock-order deadlock.
 */
import { conflict } from './errors.js';

interface Holder {
  what: string;
  done: Promise<void>;
}

export class KeyedLock {
  private readonly tails = new Map<string, Promise<void>>();
  private readonly holders = new Map<string, Holder>();

  /** Waits for the previous holder of each key, then runs `fn` holding them all. */
  async run<T>(keys: string[], fn: () => Promise<T>, what = 'another change'): Promise<T> {
    const uniq = [...new Set(keys)];
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const before = uniq.map((k) => this.tails.get(k) ?? Promise.resolve());
    for (const k of uniq) this.tails.set(k, mine);
    try {
      await Promise.all(before);
      for (const k of uniq) this.holders.set(k, { what, done: mine });
      return await fn();
    } finally {
      for (const k of uniq) if (this.holders.get(k)?.done === mine) this.holders.delete(k);
      release();
      for (const k of uniq) if (this.tails.get(k) === mine) this.tails.delete(k);
    }
  }

  /**
   * Runs `fn` holding every key, or throws 409 `<label> is busy: <what> in
   * progress` when any key is held or queued for.
   */
  async exclusive<T>(keys: string[], what: string, fn: () => Promise<T>, label?: (key: string) => string): Promise<T> {
    for (const k of new Set(keys)) {
      if (this.tails.has(k)) {
        const h = this.holders.get(k);
        throw conflict(`${label ? label(k) : k} is busy: ${h?.what ?? 'another change'} in progress`);
      }
    }
    return this.run(keys, fn, what);
  }

  /** What holds `key` now, if anything. */
  busy(key: string): string | undefined {
    return this.tails.has(key) ? this.holders.get(key)?.what ?? 'another change' : undefined;
  }
}
