/**
 * The daemon's one LevelDB (classic-level through `level`), split into sublevels
 * per concern. Values are JSON. Multi-key changes go through `batch` so that a
 * crash leaves either all or none of them.
 */
import { Level } from 'level';
import type { AbstractSublevel, AbstractBatchOperation } from 'abstract-level';

/**
 * Write options: SYNC makes the write wait until LevelDB has synced its log to
 * the disk (it survives a power loss); LAZY does not (a crash of the process
 * loses nothing, a power loss may lose the last seconds). The sublevel
 * option types do not declare classic-level's `sync`, hence the casts.
 */
export const SYNC = Object.freeze({ sync: true }) as {};
export const LAZY = Object.freeze({ sync: false }) as {};

export type Sub<V> = AbstractSublevel<Level<string, unknown>, string | Buffer | Uint8Array, string, V>;
/** Any sublevel of the store, whatever its value encoding. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnySub = AbstractSublevel<Level<string, unknown>, string | Buffer | Uint8Array, string, any>;

export class Store {
  private readonly subs = new Map<string, Sub<unknown>>();
  private readonly closing: Array<() => Promise<void> | void> = [];

  private constructor(readonly db: Level<string, unknown>) {}

  static async open(dir: string): Promise<Store> {
    const db = new Level<string, unknown>(dir, { valueEncoding: 'json' });
    await db.open();
    return new Store(db);
  }

  /** A named sublevel with JSON values; the same instance is returned for the same name. */
  sub<V>(name: string): Sub<V> {
    let s = this.subs.get(name);
    if (!s) {
      s = this.db.sublevel<string, unknown>(name, { valueEncoding: 'json' }) as Sub<unknown>;
      this.subs.set(name, s);
    }
    return s as Sub<V>;
  }

  /** Atomic writes across sublevels: each op names its sublevel. `options`: SYNC or LAZY. */
  async batch(ops: Array<{ type: 'put'; sub: AnySub; key: string; value: unknown } | { type: 'del'; sub: AnySub; key: string }>, options?: {}): Promise<void> {
    const mapped = ops.map((o) =>
      o.type === 'put'
        ? { type: 'put' as const, sublevel: o.sub, key: o.key, value: o.value }
        : { type: 'del' as const, sublevel: o.sub, key: o.key },
    ) as unknown as AbstractBatchOperation<Level<string, unknown>, string, unknown>[];
    await this.db.batch(mapped, options ?? {});
  }

  /** Runs `fn` when the store is closing, before the database closes (writers flush their last rows). */
  beforeClose(fn: () => Promise<void> | void): void {
    this.closing.push(fn);
  }

  async close(): Promise<void> {
    for (const fn of this.closing.splice(0).reverse()) {
      try {
        await fn();
      } catch {
        /* a writer's failure to flush must not keep the store open */
      }
    }
    await this.db.close();
  }
}

/** All values of a sublevel, in key order. */
export async function allValues<V>(sub: Sub<V>): Promise<V[]> {
  return sub.values().all();
}
