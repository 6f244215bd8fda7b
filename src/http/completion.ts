/**
 * When a framework handler's work is done: the one rule both adapters (Express,
 * Fastify) use to end the key's transaction. The work is done once the handler has
 * settled AND answered:
 *
 * - settled: its promise settled, or, for a handler that returned no promise, it
 *   returned;
 * - answered: its one answer, as the adapter sees it (`res.end()`, `reply.send()`), or a
 *   value it returned that the framework sends itself (Fastify).
 *
 * So an async handler that answers and keeps working is done when its promise settles;
 * a callback-style handler (no promise) is done at its answer, however late; an async
 * one that resolved before answering is done at its answer. A response call on the way
 * (`flushHeaders`, `write`, `writeHead`) is never the end. A throw or rejection before
 * the work is done fails the run, whatever was answered; after it, there is nothing
 * left to fail (a promise that settled cannot reject).
 *
 * The moment the work is done, `workDone` runs synchronously (the engine revokes
 * `ctx.tx` there), so a statement the handler sends right after its answer, in the
 * same tick, is already refused.
 */

/** How a handler's run ended. */
export type RunOutcome<A> =
  /** Its work is done; `answer` is what it answered with. */
  | { kind: 'answered'; answer: A }
  /** It threw, rejected, or answered with an error, before its work was done. */
  | { kind: 'threw'; error: unknown };

/** What a value the handler returned (or resolved with) means, per framework. */
export type Returned<A> =
  /** The value is an answer (if the handler has not answered yet, this is its answer). */
  | { answer: A }
  /** The value answers nothing: wait for the handler's own answer. */
  | 'wait';

export interface HandlerRunRules<A> {
  /** What the handler's return value means; `async`: it came from a promise. */
  returned(value: unknown, async: boolean): Returned<A>;
  /** Called once, synchronously, when the run is over (done or failed). */
  workDone(): void;
}

/**
 * One run of a framework handler, and the moment its work is done. The adapter calls
 * {@link start} with the handler, reports the handler's answers with {@link answer}
 * (and errors sent as answers with {@link fail}), and awaits {@link done}.
 */
export class HandlerRun<A> {
  /** Resolves when the run is over: its work done, or failed. Never rejects. */
  readonly done: Promise<RunOutcome<A>>;
  /** Resolves at the handler's first answer, or when the run is over without one. */
  readonly answered: Promise<void>;
  private settle!: (outcome: RunOutcome<A>) => void;
  private markAnswered!: () => void;
  private first: { answer: A } | undefined;
  private returned = false;
  private state: 'running' | 'over' | 'abandoned' = 'running';

  constructor(private readonly rules: HandlerRunRules<A>) {
    this.done = new Promise((resolve) => (this.settle = resolve));
    this.answered = new Promise((resolve) => (this.markAnswered = resolve));
  }

  /** The handler's (first) answer so far, if any. */
  get given(): { answer: A } | undefined {
    return this.first;
  }

  /** Whether the handler may still answer: not over, not abandoned. */
  get running(): boolean {
    return this.state === 'running';
  }

  /** Whether the adapter stopped waiting for it (see {@link abandon}). */
  get abandoned(): boolean {
    return this.state === 'abandoned';
  }

  /** Calls the handler (at once) and follows what it returns. */
  start(handler: () => unknown): this {
    let value: unknown;
    try {
      value = handler();
    } catch (error) {
      this.fail(error);
      return this;
    }
    if (isThenable(value))
      // Both outcomes are handled: an abandoned handler's rejection is not unhandled.
      Promise.resolve(value).then(
        (resolved) => this.settled(resolved, true),
        (error: unknown) => this.fail(error),
      );
    else this.settled(value, false);
    return this;
  }

  /**
   * The handler answered. Returns false when the answer is not taken: the handler had
   * answered already, or its run is over or abandoned (a late call, to be ignored).
   */
  answer(answer: A): boolean {
    if (this.state !== 'running' || this.first !== undefined) return false;
    this.first = { answer };
    this.markAnswered();
    if (this.returned) this.finish({ kind: 'answered', answer });
    return true;
  }

  /** The handler failed (threw, or answered with an error): the run fails, unless over. */
  fail(error: unknown): void {
    if (this.state !== 'running') return;
    this.finish({ kind: 'threw', error });
  }

  /**
   * The adapter stopped waiting (timeout, shutdown): whatever the handler does from now
   * on is ignored. Does not end `ctx.tx` (the engine does, as it ends the transaction).
   */
  abandon(): void {
    if (this.state !== 'running') return;
    this.state = 'abandoned';
    this.markAnswered();
  }

  private settled(value: unknown, async: boolean): void {
    if (this.state !== 'running') return;
    this.returned = true;
    const meaning = this.rules.returned(value, async);
    if (meaning !== 'wait' && this.first === undefined) {
      this.first = meaning;
      this.markAnswered();
    }
    if (this.first !== undefined) this.finish({ kind: 'answered', answer: this.first.answer });
  }

  private finish(outcome: RunOutcome<A>): void {
    this.state = 'over';
    this.markAnswered();
    this.rules.workDone();
    this.settle(outcome);
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}
