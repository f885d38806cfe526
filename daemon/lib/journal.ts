/**
 * The intent journal: a change that touches files or processes and the store
 * writes an intent first, does the work, then writes its outcome and drops the
 * intent in one batch. A crash at any moment leaves either no intent (nothing
 * happened, or everything did) or an open intent that `recover` finishes or
 * rolls back at the next start by what the disk and the process table show.
 *
 * Structural types keep this module free of the daemon's store: the store's
 * `batch` and a sublevel fit them.
 */

/** One write of an atomic batch; `sub` is the sublevel it goes to. */
export type JournalOp = { type: 'put'; sub: any; key: string; value: unknown } | { type: 'del'; sub: any; key: string };

export interface JournalDb {
  batch(ops: JournalOp[]): Promise<void>;
}

export interface JournalTable<I> {
  put(key: string, value: I): Promise<void>;
  del(key: string): Promise<void>;
  iterator(): { all(): Promise<Array<[string, I]>> };
}

export interface IntentRun<T> {
  /** The store writes that make the change true, given what the work returned. */
  commit(value: T): JournalOp[];
  /**
   * Puts back whatever the failed work did. When it throws too, the intent
   * stays open and the next start's recovery deals with it.
   */
  rollback?(err: unknown): Promise<void>;
}

export class IntentJournal<I> {
  constructor(
    private readonly db: JournalDb,
    private readonly table: JournalTable<I>,
  ) {}

  /** Records an intent; the work may start once this resolves. */
  begin(key: string, intent: I): Promise<void> {
    return this.table.put(key, intent);
  }

  /** Writes the outcome and drops the intent in one batch. */
  commit(key: string, ops: JournalOp[]): Promise<void> {
    return this.db.batch([...ops, { type: 'del', sub: this.table, key }]);
  }

  /** Drops an intent whose work left nothing behind. */
  drop(key: string): Promise<void> {
    return this.table.del(key);
  }

  /** Intent, work, then outcome and drop in one batch; on failure, rollback then drop. */
  async run<T>(key: string, intent: I, work: () => Promise<T>, how: IntentRun<T>): Promise<T> {
    await this.begin(key, intent);
    let value: T;
    try {
      value = await work();
    } catch (err) {
      if (how.rollback) {
        try {
          await how.rollback(err);
        } catch {
          throw err; // the intent stays open: recovery finishes the rollback
        }
      }
      await this.drop(key);
      throw err;
    }
    await this.commit(key, how.commit(value));
    return value;
  }

  /** Open intents, oldest key first. */
  async open(): Promise<Array<[string, I]>> {
    return this.table.iterator().all();
  }

  /**
   * At start: for each open intent, `settle` finishes or undoes it and returns
   * the store writes of the outcome (none when it was undone); they are
   * committed with the intent's drop in one batch.
   */
  async recover(settle: (key: string, intent: I) => Promise<JournalOp[]>): Promise<number> {
    const open = await this.open();
    for (const [key, intent] of open) await this.commit(key, await settle(key, intent));
    return open.length;
  }
}
