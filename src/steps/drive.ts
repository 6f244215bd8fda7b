/**
 * One owner's run of a flow: the `run` object its function gets (replaying recorded
 * steps by position, running and recording the rest, fenced), and how the run ended.
 */
import { EffectivelyOnceError, StateError } from '../errors.js';
import {
  FlowFencedError,
  FlowStepsChangedError,
  StepFailedError,
  StepResultNotJsonError,
} from './errors.js';
import { checkAnswer, derivedKey, FlowFailure, jsonRoundTrip } from './flow.js';
import type { FlowIdentity, FlowRow, FlowStore, OwnerMark, StepEntry } from './store.js';
import type { Flow, FlowAnswer, FlowRun } from './types.js';
import type { StepsTelemetry, StepTelemetryScope } from './telemetry.js';
import type { Logger } from '../types.js';

/** The runner's settings, resolved. */
export interface RunnerSettings {
  readonly leaseMs: number;
  readonly logger: Logger;
  readonly telemetry?: StepsTelemetry | undefined;
}

/** The scope of a step when no telemetry follows it. */
const UNOBSERVED: StepTelemetryScope = { run: (fn) => fn(), end: () => undefined };

/** How an owner's run ended: an answer stored, or stopped at a recovery point (or refused). */
export type DriveEnd =
  { kind: 'answered'; answer: FlowAnswer } | { kind: 'stopped'; error: EffectivelyOnceError };

/** One owner's run of one flow key. */
export class FlowDrive<I> {
  /** This owner's fence, for its writes. */
  readonly mark: OwnerMark;
  private readonly recorded: readonly StepEntry[];
  private readonly abort = new AbortController();
  /** The next step's position (replayed ones included). */
  private position = 0;
  /** Steps the row holds as this owner knows it (replayed and recorded by it). */
  private held = 0;
  private inStep = false;
  /** Step names this run reached (replayed or run): a call's key derives from its name. */
  private readonly names = new Set<string>();
  /** Why the run must stop, whatever the function does with the error it was thrown. */
  private stop: EffectivelyOnceError | undefined;
  /** The final answer a step's final error (or run.fail) ended the flow with. */
  private final: FlowAnswer | undefined;

  constructor(
    private readonly store: FlowStore,
    private readonly settings: RunnerSettings,
    private readonly flow: Flow<I>,
    private readonly id: FlowIdentity,
    private readonly claim: Pick<FlowRow, 'fence' | 'steps'> & { resumed: boolean },
    signal: AbortSignal | undefined,
  ) {
    this.mark = { scope: id.scope, key: id.key, fence: claim.fence, flow: flow.name };
    this.recorded = claim.steps;
    if (signal !== undefined) {
      if (signal.aborted) this.abort.abort(signal.reason);
      else signal.addEventListener('abort', () => this.abort.abort(signal.reason), { once: true });
    }
  }

  /** Runs the function to its end and stores its answer (fenced). */
  async run(input: I): Promise<DriveEnd> {
    let answer: FlowAnswer | undefined;
    let thrown: unknown;
    let threw = false;
    try {
      answer = await this.flow.fn(input, this.runObject());
    } catch (error) {
      threw = true;
      thrown = error;
    }
    // A step not awaited (a floating promise) is still running: an answer stored now
    // would be replayed while that step's fenced write rolls back (status is set).
    if (this.inStep && this.stop === undefined) {
      this.stop = new StateError('a flow ended while one of its steps was still running', {
        flow: this.flow.name,
        hint: 'await every run.step and run.call before returning',
      });
      this.abort.abort(this.stop);
    }
    if (this.stop !== undefined) return { kind: 'stopped', error: this.stop };
    if (this.final !== undefined) answer = this.final;
    else if (threw && thrown instanceof FlowFailure) answer = thrown.answer;
    else if (threw) {
      // Thrown by the flow's own code between steps: classified like a step's failure.
      const final = this.flow.finalError(thrown, '(flow)');
      if (final === undefined)
        return { kind: 'stopped', error: new StepFailedError(this.flow.name, '(flow)', thrown) };
      answer = final;
    }
    if (this.position < this.recorded.length && this.final === undefined)
      return {
        kind: 'stopped',
        error: new FlowStepsChangedError(
          this.flow.name,
          this.id.key,
          'it ended before its recorded steps',
          {
            position: this.position,
            recorded: this.recorded[this.position]?.name ?? '',
          },
        ),
      };
    let checked: FlowAnswer;
    try {
      checked = checkAnswer(answer);
    } catch (cause) {
      return {
        kind: 'stopped',
        error: new StepResultNotJsonError(this.flow.name, '(answer)', cause),
      };
    }
    try {
      await this.store.storeAnswer(this.mark, this.held, checked, this.abort.signal);
    } catch (error) {
      return { kind: 'stopped', error: asStop(error) };
    }
    return { kind: 'answered', answer: checked };
  }

  private runObject(): FlowRun {
    const signal = this.abort.signal;
    return {
      flow: this.flow.name,
      scope: this.id.scope,
      key: this.id.key,
      fence: this.claim.fence,
      resumed: this.claim.resumed,
      signal,
      step: (name, work) => this.step(name, work),
      call: (name, work) => this.call(name, work),
      fail: (status, body, headers) => {
        const answer: FlowAnswer = { status, ...(body !== undefined ? { body } : {}) };
        if (headers !== undefined) answer.headers = headers;
        this.final ??= answer;
        throw new FlowFailure(answer);
      },
    };
  }

  /** A database step: replayed, or run and recorded in one fenced transaction. */
  private async step<T>(
    name: string,
    work: (tx: import('pg').PoolClient) => T | Promise<T>,
  ): Promise<T> {
    const turn = this.enter(name, 'step');
    const observed = this.observe(name, 'step', turn);
    if (turn.kind === 'replay') {
      observed.end('replayed');
      return turn.value as T;
    }
    try {
      const value = await observed.run(() =>
        this.store.recordStep(
          this.mark,
          turn.position,
          { name, kind: 'step' },
          async (client) => {
            const value = await work(client);
            return this.roundTrip<T>(name, value);
          },
          this.abort.signal,
        ),
      );
      this.held++;
      observed.end('recorded');
      return value;
    } catch (error) {
      throw this.ended(observed, name, error);
    } finally {
      this.inStep = false;
    }
  }

  /** An outside call: replayed, or made with the derived key (heartbeat on), then recorded. */
  private async call<T>(
    name: string,
    work: (key: string, signal: AbortSignal) => T | Promise<T>,
  ): Promise<T> {
    const turn = this.enter(name, 'call');
    const observed = this.observe(name, 'call', turn);
    if (turn.kind === 'replay') {
      observed.end('replayed');
      return turn.value as T;
    }
    try {
      // Still the owner, here? A fenced owner does not even make the call.
      if (!(await this.store.extend(this.mark, turn.position)))
        throw new FlowFencedError(this.flow.name, this.id.key, this.mark.fence);
      const value = await this.withHeartbeat(turn.position, (signal) =>
        observed.run(() =>
          work(
            derivedKey(this.id.scope, this.id.key, this.flow.name, name, this.store.ref),
            signal,
          ),
        ),
      );
      const recorded = this.roundTrip<T>(name, value);
      const result = await this.store.recordStep(
        this.mark,
        turn.position,
        { name, kind: 'call' },
        () => Promise.resolve(recorded),
        this.abort.signal,
      );
      this.held++;
      observed.end('recorded');
      return result;
    } catch (error) {
      throw this.ended(observed, name, error);
    } finally {
      this.inStep = false;
    }
  }

  /**
   * Claims the next position for step `name`: its recorded result when there is one (it
   * must be this step's: same name and kind), or the position to run it at.
   */
  private enter(
    name: string,
    kind: 'step' | 'call',
  ): { kind: 'replay'; value: unknown; position: number } | { kind: 'run'; position: number } {
    if (this.stop !== undefined) throw this.stop;
    if (this.final !== undefined) throw new FlowFailure(this.final);
    if (this.inStep)
      throw (this.stop = new StateError(
        'steps of one flow run one at a time: await each before the next',
        {
          flow: this.flow.name,
          step: name,
        },
      ));
    if (typeof name !== 'string' || name.length === 0)
      throw new TypeError('a step needs a non-empty name');
    // Two calls of one name would send one derived key: the provider would apply the
    // second as the first. Refused before anything runs; a loop names each turn.
    if (this.names.has(name))
      throw (this.stop = new StateError(
        `step "${name}" was used already in this run: name each one once (charge-1, charge-2 in a loop)`,
        { flow: this.flow.name, step: name },
      ));
    this.names.add(name);
    const position = this.position++;
    const entry = this.recorded[position];
    if (entry !== undefined) {
      if (entry.name !== name || entry.kind !== kind) {
        this.stop = new FlowStepsChangedError(
          this.flow.name,
          this.id.key,
          `step ${position} disagrees with the recorded one`,
          {
            position,
            recorded: `${entry.kind} ${entry.name}`,
            requested: `${kind} ${name}`,
          },
        );
        throw this.stop;
      }
      this.held++;
      return {
        kind: 'replay',
        value: entry.result === null ? undefined : JSON.parse(entry.result),
        position,
      };
    }
    this.inStep = true;
    return { kind: 'run', position };
  }

  private roundTrip<T>(name: string, value: unknown): { value: T; text: string | null } {
    try {
      const round = jsonRoundTrip(value);
      return { value: round.value as T, text: round.text ?? null };
    } catch (cause) {
      this.stop = new StepResultNotJsonError(this.flow.name, name, cause);
      throw this.stop;
    }
  }

  /** `work` with the lease extended every third of it; a fenced heartbeat aborts `work`'s signal. */
  private async withHeartbeat<T>(
    position: number,
    work: (signal: AbortSignal) => T | Promise<T>,
  ): Promise<T> {
    const fenced = new AbortController();
    // Set once `work` settled: an extend still in flight then may land after the result
    // is recorded (one step further, rowCount 0) and must not fence the live owner.
    let done = false;
    const every = Math.max(5, Math.floor(this.settings.leaseMs / 3));
    const timer = setInterval(() => {
      this.store.extend(this.mark, position).then(
        (owned) => {
          if (owned || done || fenced.signal.aborted) return;
          this.stop ??= new FlowFencedError(this.flow.name, this.id.key, this.mark.fence);
          fenced.abort(this.stop);
        },
        (err: unknown) =>
          this.settings.logger.warn(
            { err, key: this.id.key },
            'effectively-once: flow heartbeat failed',
          ),
      );
    }, every);
    try {
      return await work(AbortSignal.any([fenced.signal, this.abort.signal]));
    } finally {
      done = true;
      clearInterval(timer);
    }
  }

  /** The telemetry scope of the step at `turn` (a no-op one without telemetry, or when its hook threw). */
  private observe(
    name: string,
    kind: 'step' | 'call',
    turn: { position: number },
  ): StepTelemetryScope {
    const { telemetry, logger } = this.settings;
    if (telemetry === undefined) return UNOBSERVED;
    const warn = (err: unknown): void =>
      logger.warn({ err, step: name }, 'effectively-once: a steps telemetry hook threw');
    let scope: StepTelemetryScope;
    try {
      scope = telemetry.startStep({
        flow: this.flow.name,
        step: name,
        kind,
        position: turn.position,
        attempt: this.claim.fence,
        resumed: this.claim.resumed,
      });
    } catch (err) {
      warn(err);
      return UNOBSERVED;
    }
    return {
      run: (fn) => {
        let entered = false;
        try {
          return scope.run(() => {
            entered = true;
            return fn();
          });
        } catch (err) {
          if (entered) throw err; // the step's own error
          warn(err);
          return fn();
        }
      },
      end: (outcome, error) => {
        try {
          scope.end(outcome, error);
        } catch (err) {
          warn(err);
        }
      },
    };
  }

  /** A failed step's end: told to its telemetry as final or stopped; what to throw on. */
  private ended(observed: StepTelemetryScope, name: string, error: unknown): unknown {
    const thrown = this.failed(name, error);
    // A final error as the step threw it (the user's); a stop as the library's error.
    if (thrown instanceof FlowFailure) observed.end('final', error);
    else observed.end('stopped', thrown);
    return thrown;
  }

  /**
   * What a failed step throws on: the library's own stops as they are (remembered), a
   * final answer (`run.fail`, or the flow's classifier) as a FlowFailure, anything else
   * as a transient StepFailedError (remembered: the run stops at this recovery point).
   */
  private failed(name: string, error: unknown): unknown {
    if (this.stop !== undefined) return this.stop;
    if (error instanceof FlowFailure) {
      this.final ??= error.answer;
      return error;
    }
    if (isStop(error)) {
      this.stop = error;
      return error;
    }
    const final = this.flow.finalError(error, name);
    if (final !== undefined) {
      this.final ??= final;
      return new FlowFailure(final);
    }
    this.stop = new StepFailedError(this.flow.name, name, error);
    return this.stop;
  }
}

/** The library's errors that stop a run wherever they are thrown. */
function isStop(error: unknown): error is EffectivelyOnceError {
  return error instanceof EffectivelyOnceError;
}

function asStop(error: unknown): EffectivelyOnceError {
  return error instanceof EffectivelyOnceError
    ? error
    : new StepFailedError('(flow)', '(answer)', error);
}
