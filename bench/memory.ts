import v8 from 'node:v8';
import vm from 'node:vm';

/** Samples `process.memoryUsage().rss` and keeps the peak. */
export class RssSampler {
  private timer: NodeJS.Timeout | undefined;
  private peak = 0;
  readonly startRss: number;

  constructor(private readonly intervalMs = 20) {
    this.startRss = process.memoryUsage().rss;
  }

  start(): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
  }

  /** Stops sampling; returns the peak in bytes. */
  stop(): number {
    clearInterval(this.timer);
    this.sample();
    return this.peak;
  }

  private sample(): void {
    const rss = process.memoryUsage().rss;
    if (rss > this.peak) this.peak = rss;
  }
}

let gcFn: (() => void) | undefined;

/** A full GC before measuring, so one scenario's garbage does not count as the next one's peak. */
export function collectGarbage(): void {
  if (gcFn === undefined) {
    v8.setFlagsFromString('--expose-gc');
    gcFn = vm.runInNewContext('gc') as () => void;
  }
  gcFn();
}

export const mb = (bytes: number): number => Math.round((bytes / 1024 / 1024) * 10) / 10;
