import type { EffectivelyOnceError } from '../errors.js';
import type { ConsumerTelemetry, TelemetryScope, TelemetryStep } from './telemetry.js';
import type { Delivery, DeliveryOutcome } from '../types.js';

/** What the settler noted about a delivery before its outcome was known. */
interface Note {
  error: EffectivelyOnceError | undefined;
  /** Telemetry's name for the outcome, when it is more than the delivery's own. */
  outcome: 'mismatch' | 'expired' | undefined;
}

/**
 * The consumer's side of {@link ConsumerTelemetry}: finds the scope of a delivery from
 * deep inside the runners, keeps the notes the settler takes (the failure, a mismatch)
 * until the outcome is known, and keeps a throwing hook from touching a delivery. Without
 * telemetry every method is a pass-through.
 */
export class Tracing {
  private readonly scopes = new WeakMap<Delivery<unknown>, TelemetryScope>();
  private readonly notes = new WeakMap<Delivery<unknown>, Note>();

  constructor(
    private readonly telemetry: ConsumerTelemetry | undefined,
    private readonly consumer: string,
  ) {}

  /** Follows one delivery (one transaction per message) from hand-over to settlement. */
  async delivery(
    delivery: Delivery<unknown>,
    run: () => Promise<DeliveryOutcome>,
  ): Promise<DeliveryOutcome> {
    if (this.telemetry === undefined) return run();
    const scope = quietly(() => this.telemetry!.startDelivery(delivery, this.consumer));
    if (scope === undefined) return run();
    this.scopes.set(delivery, scope);
    try {
      const outcome = await run();
      this.settle(scope, delivery, outcome);
      return outcome;
    } finally {
      this.scopes.delete(delivery);
      quietly(() => scope.end());
    }
  }

  /** Follows one batch; `run` resolves with each delivery's outcome, in order. */
  async batch(
    deliveries: ReadonlyArray<Delivery<unknown>>,
    run: () => Promise<DeliveryOutcome[]>,
  ): Promise<DeliveryOutcome[]> {
    if (this.telemetry === undefined) return run();
    const scope = quietly(() => this.telemetry!.startBatch(deliveries, this.consumer));
    if (scope === undefined) return run();
    for (const d of deliveries) this.scopes.set(d, scope);
    try {
      const outcomes = await run();
      deliveries.forEach((d, i) => this.settle(scope, d, outcomes[i] ?? 'unsettled'));
      return outcomes;
    } finally {
      for (const d of deliveries) this.scopes.delete(d);
      quietly(() => scope.end());
    }
  }

  /**
   * Runs `fn` as a step of the delivery's (or its batch's) scope. `failure` tells from
   * the result whether the step failed: the runners return failures, they do not throw.
   */
  step<R>(
    delivery: Delivery<unknown>,
    name: TelemetryStep,
    fn: () => Promise<R>,
    failure?: (result: R) => unknown,
  ): Promise<R> {
    // Not async: without telemetry, a step costs no promise of its own on the hot path.
    if (this.telemetry === undefined) return fn();
    const scope = this.scopes.get(delivery);
    if (scope === undefined) return fn();
    return this.traced(scope, name, fn, failure);
  }

  private async traced<R>(
    scope: TelemetryScope,
    name: TelemetryStep,
    fn: () => Promise<R>,
    failure: ((result: R) => unknown) | undefined,
  ): Promise<R> {
    const step = quietly(() => scope.step(name));
    if (step === undefined) return fn();
    let error: unknown;
    // The step itself, once: a hook that throws around it must neither skip it nor run it
    // again (a handler twice, or a claim left open with nobody to finish it).
    let started: Promise<R> | undefined;
    const once = (): Promise<R> => (started ??= fn());
    try {
      let result: R;
      try {
        result = await step.run(once);
      } catch {
        // The hook threw before the step (which runs untraced now) or around it (the
        // step's own result stands; a failure of the step rethrows here as it would have).
        result = await once();
      }
      error = failure?.(result);
      return result;
    } catch (thrown) {
      error = thrown ?? new Error('step failed');
      throw thrown;
    } finally {
      quietly(() => step.end(error));
    }
  }

  /** The settler saw this delivery fail (retry or dead letter follows). */
  failed(delivery: Delivery<unknown>, error: EffectivelyOnceError): void {
    if (!this.scopes.has(delivery)) return;
    const note = this.note(delivery);
    note.error ??= error;
  }

  /** The delivery's key came back with another payload. */
  mismatch(delivery: Delivery<unknown>, error: EffectivelyOnceError): void {
    this.noteOutcome(delivery, 'mismatch', error);
  }

  /** The admission floor refused the delivery. */
  expired(delivery: Delivery<unknown>, error: EffectivelyOnceError): void {
    this.noteOutcome(delivery, 'expired', error);
  }

  private noteOutcome(
    delivery: Delivery<unknown>,
    outcome: 'mismatch' | 'expired',
    error: EffectivelyOnceError,
  ): void {
    if (!this.scopes.has(delivery)) return;
    const note = this.note(delivery);
    note.outcome = outcome;
    note.error = error;
  }

  private note(delivery: Delivery<unknown>): Note {
    let note = this.notes.get(delivery);
    if (note === undefined) {
      note = { error: undefined, outcome: undefined };
      this.notes.set(delivery, note);
    }
    return note;
  }

  private settle(scope: TelemetryScope, delivery: Delivery<unknown>, outcome: DeliveryOutcome) {
    const note = this.notes.get(delivery);
    this.notes.delete(delivery);
    quietly(() => scope.settled(delivery, note?.outcome ?? outcome, note?.error));
  }
}

/** Runs a telemetry hook; a throw is swallowed: observing a delivery must never change it. */
function quietly<R>(hook: () => R): R | undefined {
  try {
    return hook();
  } catch {
    return undefined;
  }
}
