import type { ConsumerSettings } from './config.js';
import {
  BrokerError,
  ClaimBusyError,
  DatabaseError,
  type DeliveryExpiredError,
  EffectivelyOnceError,
  type PayloadMismatchError,
  ShutdownError,
} from '../errors.js';
import { settlesBefore } from '../deadline.js';
import type { ConsumerEventHub } from './events.js';
import type { Lifecycle } from './lifecycle.js';
import type { Tracing } from './tracing.js';
import type { FailedAttempt } from '../tx/claim-transaction.js';
import { infra } from '../tx/claim-transaction.js';
import type { ConsumerStats, Delivery, DeliveryOutcome } from '../types.js';

/**
 * The broker side of a delivery's end, shared by the per-message and batch runners:
 * ack, retry, dead-letter or release, with the matching counters and events. Broker
 * failures here are reported, never thrown: the broker's redelivery is the safety net.
 */
export class Settler<T> {
  constructor(
    private readonly cfg: ConsumerSettings<T>,
    private readonly hub: ConsumerEventHub,
    readonly stats: ConsumerStats,
    private readonly lifecycle: Lifecycle,
    /** Told of failures and mismatches; the runners run their steps through it. */
    readonly tracing: Tracing,
  ) {}

  /** Releases a delivery held back to keep its ordering key's order (it never ran). */
  async holdBack(delivery: Delivery<T>): Promise<DeliveryOutcome> {
    this.stats.received++;
    return this.release(delivery, delivery.key);
  }

  async processed(
    delivery: Delivery<T>,
    key: string,
    durationMs: number,
  ): Promise<DeliveryOutcome> {
    await this.ack(key, this.committed(delivery, key, 'processed', durationMs));
    return 'processed';
  }

  async duplicate(delivery: Delivery<T>, key: string): Promise<DeliveryOutcome> {
    await this.ack(key, this.committed(delivery, key, 'duplicate', 0));
    return 'duplicate';
  }

  /**
   * The synchronous part of {@link processed} and {@link duplicate}: counts, emits the
   * event (its payload only built when someone listens) and starts the ack, which it
   * returns; a failed ack goes to {@link ackFailed}. Batch mode settles a committed
   * batch with it and waits for all its acks at once, without a promise chain per delivery.
   */
  committed(
    delivery: Delivery<T>,
    key: string,
    kind: 'processed' | 'duplicate',
    durationMs: number,
  ): Promise<void> {
    if (kind === 'processed') {
      this.stats.processed++;
      if (this.hub.listens('processed'))
        this.hub.emit('processed', { key, attempt: delivery.attempt, durationMs });
    } else {
      this.stats.duplicates++;
      if (this.hub.listens('duplicate'))
        this.hub.emit('duplicate', { key, attempt: delivery.attempt });
    }
    return this.bounded('ack', key, () => delivery.ack());
  }

  /** A failed ack after COMMIT loses nothing: the redelivery will be a duplicate. */
  ackFailed(cause: unknown, key: string): void {
    this.stats.ackFailures++;
    this.reportBroker('ack', cause, key);
  }

  async mismatch(
    delivery: Delivery<T>,
    key: string,
    error: PayloadMismatchError,
  ): Promise<DeliveryOutcome> {
    this.stats.mismatches++;
    this.tracing.mismatch(delivery, error);
    const { storedHash, payloadHash } = error.details as {
      storedHash: string;
      payloadHash: string;
    };
    this.hub.emit('mismatch', { key, storedHash, payloadHash });
    if (this.cfg.onMismatch === 'ack') {
      await this.ack(
        key,
        this.bounded('ack', key, () => delivery.ack()),
      );
      return 'duplicate';
    }
    return this.deadLetter(delivery, key, error);
  }

  /** Refused by the admission floor (see admission.ts): counted, told, then dead-lettered. */
  async expired(
    delivery: Delivery<T>,
    key: string,
    error: DeliveryExpiredError,
  ): Promise<DeliveryOutcome> {
    this.stats.expired++;
    this.tracing.expired(delivery, error);
    if (this.hub.listens('expired')) {
      const { ageMs, lifetimeMs } = error.details as { ageMs: number; lifetimeMs: number };
      this.hub.emit('expired', {
        key,
        attempt: delivery.attempt,
        firstSentAt: delivery.firstSentAt!,
        ageMs,
        lifetimeMs,
      });
    }
    return this.deadLetter(delivery, key, error);
  }

  /**
   * Infrastructure failures (database down, busy claim, unknown commit) are always
   * retried: they say nothing about the message. Handler failures spend attempts and
   * end in the dead-letter target after `maxAttempts`.
   */
  async fail(
    delivery: Delivery<T>,
    key: string,
    error: EffectivelyOnceError,
    infrastructure: boolean,
  ): Promise<DeliveryOutcome> {
    this.stats.failed++;
    if (error instanceof ClaimBusyError) this.stats.busy++;
    this.tracing.failed(delivery, error);
    if (this.lost(delivery)) {
      this.hub.emit('failed', { key, attempt: delivery.attempt, error, willRetry: true });
      return this.release(delivery, key);
    }
    const exhausted =
      !infrastructure && (!error.retryable || delivery.attempt >= this.cfg.maxAttempts);
    this.hub.emit('failed', { key, attempt: delivery.attempt, error, willRetry: !exhausted });
    if (exhausted) return this.deadLetter(delivery, key, error);
    const delayMs =
      error instanceof ClaimBusyError
        ? this.cfg.busyRetryDelayMs
        : this.cfg.backoff(delivery.attempt);
    try {
      await this.bounded('retry', key, () => delivery.retry(delayMs, error, !infrastructure));
      this.stats.retried++;
      return 'retry';
    } catch (cause) {
      this.reportBroker('retry', cause, key);
      return 'unsettled';
    }
  }

  async deadLetter(
    delivery: Delivery<T>,
    key: string | undefined,
    error: EffectivelyOnceError,
  ): Promise<DeliveryOutcome> {
    this.tracing.failed(delivery, error);
    if (this.lost(delivery)) return this.release(delivery, key);
    try {
      await this.bounded('dead-letter', key, () => delivery.deadLetter(error));
    } catch (cause) {
      this.reportBroker('dead-letter', cause, key);
      return 'unsettled';
    }
    this.stats.deadLettered++;
    this.hub.emit('dead-lettered', { key, attempt: delivery.attempt, error });
    return 'dead-lettered';
  }

  async release(delivery: Delivery<T>, key: string | undefined): Promise<DeliveryOutcome> {
    try {
      await this.bounded('release', key, () => delivery.release());
      this.stats.released++;
      return 'released';
    } catch (cause) {
      this.reportBroker('release', cause, key);
      return 'unsettled';
    }
  }

  /**
   * A throw that escaped the claim transaction (a defect of the library's or of a data
   * layer's bridge, not an outcome it knows): logged, and filed as infrastructure, so the
   * delivery is retried with a `failed` event and no attempt spent, rather than left
   * unsettled. Never an ack: if the transaction did commit, the redelivery's claim finds
   * the key done.
   */
  escaped(key: string, thrown: unknown): FailedAttempt {
    this.cfg.logger.error(
      { err: thrown, key },
      'effectively-once: an unexpected error escaped the claim transaction; the delivery is retried',
    );
    return infra(new DatabaseError('claim transaction', thrown, { key }));
  }

  /** Reports a problem that did not stop the delivery (the consumer's `error` event). */
  report(error: EffectivelyOnceError): void {
    this.hub.emit('error', error);
  }

  /**
   * Lost to another consumer (partition revoked, visibility lapsed): its new owner
   * decides; neither a retry nor a dead letter is ours to give.
   */
  private lost(delivery: Delivery<T>): boolean {
    return delivery.signal?.aborted === true && !this.lifecycle.hardStop.aborted;
  }

  /** Waits for `ack` (started by the caller); a failure is reported, not thrown. */
  private async ack(key: string, ack: Promise<void>): Promise<void> {
    try {
      await ack;
    } catch (cause) {
      this.ackFailed(cause, key);
    }
  }

  /**
   * Starts a broker settlement (`call`) and waits for it until the shutdown's hard stop:
   * one still unanswered then (a broker that never answers, a client without a request
   * timeout) is given up on, and the delivery reported unsettled, so that it cannot hold
   * `stop()` past its deadline. Its redelivery loses nothing (a committed one comes back
   * a duplicate). The source cancels the call itself (`SourceContext.hardStop`). One
   * started past the hard stop (releasing what was given up on) is the source's to
   * bound: it was told through the same signal.
   */
  private bounded(
    operation: string,
    key: string | undefined,
    call: () => Promise<void>,
  ): Promise<void> {
    const settlement = started(call);
    const hardStop = this.lifecycle.hardStop;
    if (hardStop.aborted) return settlement;
    return settlesBefore(settlement, hardStop).then((settled) => {
      if (settled) return settlement;
      settlement.catch(() => undefined); // nobody is left to hear it
      throw new BrokerError(operation, new ShutdownError(key ?? ''), {
        details: { key, reason: 'still unanswered at the stop deadline: left unsettled' },
      });
    });
  }

  private reportBroker(operation: string, cause: unknown, key: string | undefined): void {
    const error =
      cause instanceof EffectivelyOnceError
        ? cause
        : new BrokerError(operation, cause, { details: { key } });
    this.hub.emit('error', error);
  }
}

/** `call()`, with a synchronous throw turned into a rejection. */
function started(call: () => Promise<void>): Promise<void> {
  try {
    return call();
  } catch (cause) {
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- whatever it threw, as await would see it
    return Promise.reject(cause);
  }
}
