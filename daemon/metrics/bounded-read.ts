/**
 * A read of runtime figures for a scrape that never holds the scrape for
 * long: a value younger than `freshMs` is served as is; otherwise one read
 * starts (never two at once: a hung runtime holds one read, not one per
 * scrape) and the scrape waits for it at most `waitMs`. A read still under
 * way then leaves the last value in place while it is younger than
 * `staleMs`, and nothing after that; a failed read leaves nothing.
 */
export interface BoundedReadOptions {
  freshMs: number;
  waitMs: number;
  staleMs: number;
  /** A scrape stopped waiting for the read. */
  onLate?(): void;
  onError?(err: unknown): void;
}

export class BoundedRead<T> {
  private last: { value: T; at: number } | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly read: () => Promise<T>,
    private readonly opts: BoundedReadOptions,
  ) {}

  async get(): Promise<T | null> {
    if (this.last && Date.now() - this.last.at < this.opts.freshMs) return this.last.value;
    if (!this.running) {
      this.running = this.read()
        .then(
          (value) => void (this.last = { value, at: Date.now() }),
          (err) => {
            this.last = null;
            this.opts.onError?.(err);
          },
        )
        .finally(() => (this.running = null));
    }
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), this.opts.waitMs)));
    const wasLate = await Promise.race([this.running.then(() => false), late]);
    clearTimeout(timer);
    if (wasLate) {
      this.opts.onLate?.();
      if (this.last && Date.now() - this.last.at >= this.opts.staleMs) this.last = null;
    }
    return this.last?.value ?? null;
  }
}
