/**
 * The daemon's one LevelDB (classic-level through `level`), split into sublevels
 * per concern. Values are JSON. Multi-key changes go through `batch` so that a
 * crash leaves either all or none of them.
 *
 * Durability (docs/durability.md): every write is synced to the disk before
 * it resolves (LevelDB `sync: true`: its log is fsynced), unless the writer
 * says LAZY. A synced write survives a power loss; a lazy one survives a crash
 * of the process (it is in the OS's cache) but may be lost with the power,
 * with anything else written lazily just before it. Writers choose LAZY only
 * for what can be lost: a token's last use, task progress and log lines,
 * pruning, bulk imports. Concurrent synced writes share one fsync (LevelDB
 * groups them).
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

/** One write of a `Store.batch`. */
export type BatchOp = { type: 'put'; sub: AnySub; key: string; value: unknown } | { type: 'del'; sub: AnySub; key: string };

/**
 * A writer that adds its own ops to another writer's batch, so that what it
 * records and what caused it are stored together or not at all (the event
 * log joins the activity log's and the task runner's batches). `write` gets
 * the participant's ops, must include them in one batch, and resolves once
 * that batch is written; `join` answers what `write` answered.
 */
export interface BatchParticipant<Item> {
  join<T>(item: Item, write: (ops: BatchOp[]) => Promise<T>): Promise<T>;
}

export class Store {
  private readonly subs = new Map<string, Sub<unknown>>();
  private readonly closing: Array<() => Promise<void> | void> = [];

  private constructor(readonly db: Level<string, unknown>) {}

  /**
   * Opens the store. `sync: false` (or HOSTD_STORE_SYNC=0) syncs nothing, not
   * even SYNC writes: for measuring what syncing costs, never for a real host.
   * `onWrite` sees every write with the sublevels it touches and whether it
   * is synced (tests).
   */
  static async open(dir: string, opts: { sync?: boolean; onWrite?: (w: WriteSeen) => void } = {}): Promise<Store> {
    const db = new Level<string, unknown>(dir, { valueEncoding: 'json' });
    syncByDefault(db, opts.sync ?? process.env.HOSTD_STORE_SYNC !== '0', opts.onWrite);
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
  async batch(ops: BatchOp[], options?: {}): Promise<void> {
    const mapped = ops.map((o) =>
      o.type === 'put' ? { type: 'put' as const, sublevel: o.sub, key: o.key, value: o.value } : { type: 'del' as const, sublevel: o.sub, key: o.key },
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

/** One write as the store passed it to LevelDB. */
export interface WriteSeen {
  /** The top-level sublevel of each key written (`tokens`, `activity` ...). */
  sublevels: string[];
  sync: boolean;
}

/**
 * Makes every write of `db` synced unless its options say `sync: false`
 * (LAZY). The wrappers sit on classic-level's private write methods, which
 * every put, del and batch of every sublevel reaches with its options.
 */
function syncByDefault(db: Level<string, unknown>, enabled: boolean, onWrite?: (w: WriteSeen) => void): void {
  type Opts = { sync?: boolean } | undefined;
  const decide = (o: Opts): { sync: boolean } => ({ ...o, sync: enabled && o?.sync !== false });
  const sublevel = (key: unknown) => String(key).split('!')[1] ?? '';
  const target = db as unknown as Record<string, (...args: any[]) => any>;
  const put = target._put.bind(db);
  const del = target._del.bind(db);
  const batch = target._batch.bind(db);
  const chained = target._chainedBatch.bind(db);
  target._put = (key: unknown, value: unknown, o: Opts) => {
    const opts = decide(o);
    onWrite?.({ sublevels: [sublevel(key)], sync: opts.sync });
    return put(key, value, opts);
  };
  target._del = (key: unknown, o: Opts) => {
    const opts = decide(o);
    onWrite?.({ sublevels: [sublevel(key)], sync: opts.sync });
    return del(key, opts);
  };
  target._batch = (ops: Array<{ key: unknown }>, o: Opts) => {
    const opts = decide(o);
    onWrite?.({ sublevels: [...new Set(ops.map((op) => sublevel(op.key)))], sync: opts.sync });
    return batch(ops, opts);
  };
  target._chainedBatch = () => {
    const b = chained() as Record<string, (...args: any[]) => any>;
    const write = b._write.bind(b);
    b._write = (o: Opts) => {
      const opts = decide(o);
      onWrite?.({ sublevels: ['(chained batch)'], sync: opts.sync });
      return write(opts);
    };
    return b;
  };
}
