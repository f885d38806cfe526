/**
 * One lock per resource key (`vm:101`, `ct:7`, `image:debian-12`). Ways to take it:
 * - `run` waits its turn (short critical sections, e.g. "is the name free, then create");
 * - `exclusive` refuses at once with 409 naming the operation in progress, for
 *   long work on one resource (a VM start while a clone of it runs);
 * - `exclusiveOn` is `exclusive` on a resource looked up first: an unknown one
 *   is its 404, never a 409 about nothing;
 * - `hold` takes the keys now and keeps them until the returned release is
 *   called, for work that outlives the call (a task: see locked-task.ts).
 * All register their keys at once, so there is no lock-order deadlock.
 *
 * A domain gives its keys' labels once (`new KeyedLock(lockLabels({vm: (id) =>
 * `VM ${id}`}))`), so that every 409 names the resource as users know it:
 * `VM 101 is busy: clone to VM 102 in progress`.
 */
import { conflict } from './errors.js';

/** How a key reads in a 409 message (`vm:101` -> `VM 101`). */
export type KeyLabel = (key: string) => string;

/** Ends a hold; calling it again does nothing. */
export type Release = () => void;

interface Holder {
  what: string;
  done: Promise<void>;
}

/**
 * A KeyLabel from a table of key kinds: the key `<kind>:<rest>` reads as
 * `table[kind](rest)`; a kind not in the table reads as the key itself.
 */
export function lockLabels(table: Record<string, (rest: string) => string>): KeyLabel {
  return (key) => {
    const i = key.indexOf(':');
    const f = i > 0 ? table[key.slice(0, i)] : undefined;
    return f ? f(key.slice(i + 1)) : key;
  };
}

export class KeyedLock {
  private readonly tails = new Map<string, Promise<void>>();
  private readonly holders = new Map<string, Holder>();

  constructor(private readonly label: KeyLabel = (k) => k) {}

  /** Waits for the previous holder of each key, then runs `fn` holding them all. */
  async run<T>(keys: string[], fn: () => Promise<T>, what = 'another change'): Promise<T> {
    const uniq = [...new Set(keys)];
    const free = uniq.every((k) => !this.tails.has(k));
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const before = uniq.map((k) => this.tails.get(k) ?? Promise.resolve());
    for (const k of uniq) this.tails.set(k, mine);
    // Nothing to wait for: say who holds the keys at once, so that `busy` never
    // answers "another change" for a holder that is already known.
    if (free) for (const k of uniq) this.holders.set(k, { what, done: mine });
    try {
      await Promise.all(before);
      for (const k of uniq) this.holders.set(k, { what, done: mine });
      return await fn();
    } finally {
      this.let(uniq, mine, release);
    }
  }

  /**
   * Runs `fn` holding every key, or throws 409 `<label> is busy: <what> in
   * progress` when any key is held or queued for. `label` overrides the
   * lock's own labels (for callers written before labels were given once).
   */
  async exclusive<T>(keys: string[], what: string, fn: () => Promise<T>, label?: KeyLabel): Promise<T> {
    this.refuseBusy(keys, label);
    return this.run(keys, fn, what);
  }

  /**
   * "404 before 409": looks the resource up (`find` throws its 404), then
   * takes the keys as `exclusive` does, then looks it up again inside, so that
   * `fn` sees the resource as it is under the lock (it may have changed, or
   * gone, while the keys were being taken). `keys` may depend on what was found.
   */
  async exclusiveOn<R, T>(find: () => Promise<R> | R, keys: string[] | ((found: R) => string[]), what: string, fn: (fresh: R) => Promise<T>): Promise<T> {
    const found = await find();
    return this.exclusive(typeof keys === 'function' ? keys(found) : keys, what, async () => fn(await find()));
  }

  /**
   * Takes every key now, or throws 409 as `exclusive` does; the keys stay
   * held until the returned release is called (a task's lifetime). Nothing is
   * awaited: once it returns, `busy` names `what` for each key.
   */
  hold(keys: string[], what: string): Release {
    this.refuseBusy(keys);
    const uniq = [...new Set(keys)];
    let resolve!: () => void;
    const mine = new Promise<void>((r) => (resolve = r));
    for (const k of uniq) {
      this.tails.set(k, mine);
      this.holders.set(k, { what, done: mine });
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.let(uniq, mine, resolve);
    };
  }

  /** What holds `key` now (or is queued for it), if anything. */
  busy(key: string): string | undefined {
    return this.tails.has(key) ? (this.holders.get(key)?.what ?? 'another change') : undefined;
  }

  /** The 409 for the first busy key, if any. */
  private refuseBusy(keys: string[], label: KeyLabel = this.label): void {
    for (const k of new Set(keys)) {
      if (this.tails.has(k)) throw conflict(`${label(k)} is busy: ${this.busy(k)} in progress`);
    }
  }

  private let(keys: string[], mine: Promise<void>, resolve: () => void): void {
    for (const k of keys) if (this.holders.get(k)?.done === mine) this.holders.delete(k);
    resolve();
    for (const k of keys) if (this.tails.get(k) === mine) this.tails.delete(k);
  }
}
