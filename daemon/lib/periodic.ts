/** A background job run now and then every interval until stopped (unref'd: it never keeps the process alive). */
export class Periodic {
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly job: () => Promise<unknown>,
    private readonly onError: (err: unknown) => void,
  ) {}

  start(intervalMs: number): void {
    if (this.timer) return;
    const tick = () => {
      this.job().catch(this.onError);
    };
    tick();
    this.timer = setInterval(tick, intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
