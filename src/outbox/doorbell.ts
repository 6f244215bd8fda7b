/**
 * The relay loop's doorbell: a ring (a NOTIFY, `wake()`) while the loop is busy is
 * remembered, so the loop looks again at once instead of sleeping through it.
 */
export class Doorbell {
  private rung = false;
  private answer: (() => void) | undefined;

  /** Rings: ends the current nap now, or the next one before it starts. */
  ring(): void {
    this.rung = true;
    this.answer?.();
  }

  /** Ends the current nap without leaving a ring behind (stopping). */
  interrupt(): void {
    this.answer?.();
  }

  /** Sleeps `ms`, or not at all when rung meanwhile (or when `skip` says so). */
  nap(ms: number, skip = false): Promise<void> {
    if (this.rung || skip) {
      this.rung = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.answer = undefined;
        this.rung = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.answer = done;
    });
  }
}
