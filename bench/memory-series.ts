import type { Drain } from './drain.js';
import { collectGarbage, mb } from './memory.js';
import { median } from './stats.js';

/** One reading of the scenario process's memory during a memory run. */
export interface MemorySample {
  /** Messages done, % of N. */
  progressPct: number;
  /** Seconds since sampling started (just before the scenario's code; the msg/s clock starts at `clockStartS`). */
  elapsedS: number;
  rssMb: number;
  heapUsedMb: number;
  /**
   * start: after the pre-fill and a full GC; progress: another 5 % done, read after a
   * full GC (what is retained); time: the 1 s timer, no GC (the sawtooth's peaks); end:
   * after the consumer stopped.
   */
  trigger: 'start' | 'progress' | 'time' | 'end';
}

/** Median of one quarter of the drain against another's, for one measure. */
export interface QuarterGrowth {
  secondQuarterMb: number | null;
  lastQuarterMb: number | null;
  growthMb: number | null;
  flat: boolean | null;
}

export interface MemoryVerdict {
  rss: QuarterGrowth;
  heapUsed: QuarterGrowth;
  /** Both flat; null when a quarter had no samples. */
  flat: boolean | null;
}

export interface MemorySeries {
  /** RSS before the pre-fill, and after it and a full GC (the pre-fill runs in a process of its own). */
  rssBeforePrefillMb: number;
  rssAtStartMb: number;
  /** When the msg/s clock started, in the samples' seconds. */
  clockStartS: number | null;
  samples: MemorySample[];
  verdict: MemoryVerdict;
}

const PROGRESS_STEP = 0.05;
const EVERY_MS = 1000;
/** Growth from the second quarter to the last within max(this, FLAT_SHARE of the second) counts as flat. */
const FLAT_MB = 20;
const FLAT_SHARE = 0.1;

export const FLAT_CRITERION =
  `flat when, after a full GC at each 5 % of the messages, the median over the last quarter (progress 75–100 %) is at most ` +
  `${FLAT_MB} MB or ${FLAT_SHARE * 100} % (whichever is larger) above the median over the second quarter (25–50 %), ` +
  'for RSS and for heapUsed; the first quarter is warm-up (connections, fetch buffers, JIT). The 1 s samples, taken ' +
  'without a GC, show the garbage sawtooth and are not judged';

/**
 * Samples `process.memoryUsage()` at every 5 % of the messages done and every second
 * while the drain runs, so a leak shows as growth from the second quarter of the drain
 * to the last.
 */
export class MemorySampler {
  private readonly samples: MemorySample[] = [];
  private readonly startedAt = performance.now();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly drain: Drain,
    private readonly rssBeforePrefillMb: number,
  ) {}

  /** Call after the pre-fill and a full GC, just before the scenario starts. */
  start(): void {
    this.sample('start');
    // Retained memory, not the garbage of the moment: a leak is what survives a full GC.
    this.drain.onProgress(PROGRESS_STEP, () => {
      collectGarbage();
      this.sample('progress');
    });
    this.timer = setInterval(() => {
      if (this.drain.finishedAt === undefined) this.sample('time');
    }, EVERY_MS);
  }

  stop(): MemorySeries {
    clearInterval(this.timer);
    this.sample('end');
    const clock = this.drain.startedAt;
    return {
      rssBeforePrefillMb: this.rssBeforePrefillMb,
      rssAtStartMb: this.samples[0]?.rssMb ?? NaN,
      clockStartS: clock === undefined ? null : round((clock - this.startedAt) / 1000),
      samples: this.samples,
      verdict: memoryVerdict(this.samples),
    };
  }

  private sample(trigger: MemorySample['trigger']): void {
    const { rss, heapUsed } = process.memoryUsage();
    this.samples.push({
      progressPct: round((this.drain.doneCount / this.drain.total) * 100),
      elapsedS: round((performance.now() - this.startedAt) / 1000),
      rssMb: mb(rss),
      heapUsedMb: mb(heapUsed),
      trigger,
    });
  }
}

const round = (x: number): number => Math.round(x * 10) / 10;

/** The verdict of FLAT_CRITERION over the samples taken while the drain ran. */
export function memoryVerdict(samples: readonly MemorySample[]): MemoryVerdict {
  const during = samples.filter((s) => s.trigger === 'progress');
  const quarter = (from: number, to: number): MemorySample[] =>
    during.filter((s) => s.progressPct > from && s.progressPct <= to);
  const second = quarter(25, 50);
  const last = quarter(75, 100);
  const growth = (of: (s: MemorySample) => number): QuarterGrowth => {
    const a = median(second.map(of));
    const b = median(last.map(of));
    if (a === null || b === null)
      return { secondQuarterMb: a, lastQuarterMb: b, growthMb: null, flat: null };
    return {
      secondQuarterMb: a,
      lastQuarterMb: b,
      growthMb: round(b - a),
      flat: b - a <= Math.max(FLAT_MB, FLAT_SHARE * a),
    };
  };
  const rss = growth((s) => s.rssMb);
  const heapUsed = growth((s) => s.heapUsedMb);
  return {
    rss,
    heapUsed,
    flat: rss.flat === null || heapUsed.flat === null ? null : rss.flat && heapUsed.flat,
  };
}
