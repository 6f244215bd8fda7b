import { performance, type EventLoopUtilization } from 'node:perf_hooks';

/**
 * Tracks one scenario's drain: when its code first saw a message, and when every
 * id 0..N-1 was done (committed and acked, as the scenario defines it). Ids done
 * twice (at-least-once redeliveries) are counted, not double-counted.
 */
export class Drain {
  private readonly doneIds: Uint8Array;
  /** Latencies recorded by scenarios without a database effect (d), in ms. */
  readonly latencies: number[] = [];
  private remaining: number;
  private firstAt: number | undefined;
  private lastAt: number | undefined;
  private resolveFinished!: () => void;
  private failure: Error | undefined;
  /** Ids done more than once. */
  repeats = 0;
  readonly finished: Promise<void>;
  private readonly abort = new AbortController();
  /** Aborts when the drain finished: loops and pollers stop on it. */
  readonly signal = this.abort.signal;

  constructor(readonly total: number) {
    this.doneIds = new Uint8Array(total);
    this.remaining = total;
    this.finished = new Promise((resolve) => (this.resolveFinished = resolve));
  }

  private progressStep = 0;
  private nextProgress = Infinity;
  private progressListener: ((done: number) => void) | undefined;

  /** Calls `listener` each time another `fraction` of the messages is done (the memory run's samples). */
  onProgress(fraction: number, listener: (done: number) => void): void {
    this.progressStep = Math.max(1, Math.round(this.total * fraction));
    this.nextProgress = this.progressStep;
    this.progressListener = listener;
  }

  private cpuAtStart: NodeJS.CpuUsage | undefined;
  private eluAtStart: EventLoopUtilization | undefined;
  /** This process's CPU time (user + system) and event-loop utilization over the drain. */
  cpuMs = NaN;
  eventLoopUtilization = NaN;

  /** The clock starts (first call wins): the scenario got its first message, or joined its group. */
  start(): void {
    if (this.firstAt !== undefined) return;
    this.firstAt = performance.now();
    this.cpuAtStart = process.cpuUsage();
    this.eluAtStart = performance.eventLoopUtilization();
  }

  /** Message `id` is done; `latencyMs` only from scenarios whose latency is not in the effect table. */
  done(id: number, latencyMs?: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.total)
      throw new Error(`bench: unexpected message id ${id}`);
    this.start();
    if (latencyMs !== undefined) this.latencies.push(latencyMs);
    if (this.doneIds[id] === 1) {
      this.repeats++;
      return;
    }
    this.doneIds[id] = 1;
    this.remaining--;
    if (this.doneCount >= this.nextProgress) {
      this.nextProgress += this.progressStep;
      this.progressListener?.(this.doneCount);
    }
    if (this.remaining === 0) {
      this.lastAt = performance.now();
      const cpu = process.cpuUsage(this.cpuAtStart);
      this.cpuMs = (cpu.user + cpu.system) / 1000;
      this.eventLoopUtilization = performance.eventLoopUtilization(this.eluAtStart).utilization;
      this.abort.abort();
      this.resolveFinished();
    }
  }

  /** A scenario hit something that makes its figures meaningless: stop and report it. */
  fail(error: unknown): void {
    if (this.failure !== undefined || this.remaining === 0) return;
    this.failure =
      error instanceof Error ? error : new Error(`bench: scenario failed: ${String(error)}`);
    this.abort.abort();
    this.resolveFinished();
  }

  get doneCount(): number {
    return this.total - this.remaining;
  }

  /** `performance.now()` when the clock started, and when the last message was done. */
  get startedAt(): number | undefined {
    return this.firstAt;
  }
  get finishedAt(): number | undefined {
    return this.lastAt;
  }

  /** First message seen → last message done, in ms. */
  get elapsedMs(): number {
    if (this.firstAt === undefined || this.lastAt === undefined)
      throw new Error('bench: drain not finished');
    return this.lastAt - this.firstAt;
  }

  /** Resolves when every id is done; rejects on `fail` or when nothing progresses for `stallMs`. */
  async wait(stallMs: number): Promise<void> {
    let last = -1;
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        this.finished.then(() => 'done' as const),
        new Promise<'tick'>((resolve) => (timer = setTimeout(resolve, stallMs, 'tick'))),
      ]);
      clearTimeout(timer);
      if (this.failure !== undefined) throw this.failure;
      if (outcome === 'done') return;
      if (this.doneCount === last) {
        throw new Error(
          `bench: drain stalled at ${this.doneCount}/${this.total} for ${stallMs} ms`,
        );
      }
      last = this.doneCount;
    }
  }
}
