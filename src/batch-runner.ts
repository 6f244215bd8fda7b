import type { PoolClient } from 'pg';
import type { ConsumerConfig } from './config.js';
import { isUnavailable, type DatabaseHealth } from './db-health.js';
import {
  ClaimBusyError,
  DatabaseError,
  type EffectivelyOnceError,
  HandlerTimeoutError,
  PayloadMismatchError,
} from './errors.js';
import { guardedCall } from './guarded-call.js';
import { payloadHash } from './hash.js';
import type { Lifecycle } from './lifecycle.js';
import { holdsOrder } from './ordering.js';
import {
  claimFailure,
  classifyHandlerError,
  endTransaction,
  pgCode,
  rollback,
  runAdapterHook,
  toError,
} from './runner.js';
import type { Settler } from './settle.js';
import { BatchClaimStatements } from './store/batch-claim.js';
import { LOCK_NOT_AVAILABLE } from './store/claim.js';
import type { BatchItem, Delivery, DeliveryOutcome } from './types.js';

interface Item<T> {
  index: number;
  delivery: Delivery<T>;
  key: string;
  hash: Buffer | null;
}

/** Per-item result of a committed batch. */
type ItemVerdict =
  { kind: 'processed' } | { kind: 'duplicate' } | { kind: 'mismatch'; error: PayloadMismatchError };

type BatchVerdict =
  | { kind: 'committed'; verdicts: ItemVerdict[]; durationMs: number }
  | { kind: 'failed'; error: EffectivelyOnceError; infrastructure: boolean }
  | { kind: 'released' };

/**
 * Batch mode: one transaction claims every key of the batch with one statement, runs
 * the handler on the new messages only, commits once, then acks everything. A failing
 * batch is bisected (first half, then second half, so order holds) until the failing
 * delivery is alone and takes the per-message retry / dead-letter path.
 */
export class BatchRunner<T> {
  private readonly claims: BatchClaimStatements;

  constructor(
    private readonly cfg: ConsumerConfig<T>,
    private readonly settler: Settler<T>,
    private readonly health: DatabaseHealth,
    private readonly lifecycle: Lifecycle,
  ) {
    this.claims = new BatchClaimStatements(cfg.table);
  }

  /**
   * `held[i]`: delivery i follows one of its ordering key that went back to the broker,
   * so it is released. `hold(key)` is told when a delivery of this batch goes back.
   */
  async process(
    deliveries: ReadonlyArray<Delivery<T>>,
    held: readonly boolean[],
    hold: (key: string) => void,
  ): Promise<DeliveryOutcome[]> {
    const outcomes: DeliveryOutcome[] = new Array<DeliveryOutcome>(deliveries.length).fill(
      'unsettled',
    );
    const items: Array<Item<T>> = [];
    const opened = new Set<string>();
    for (const [index, delivery] of deliveries.entries()) {
      if (held[index] === true) {
        outcomes[index] = await this.settler.holdBack(delivery);
        continue;
      }
      const admission = this.settler.admit(delivery);
      if ('outcome' in admission) outcomes[index] = await admission.outcome;
      else {
        const hash = this.cfg.payloadHash ? payloadHash(delivery.payload, delivery.body) : null;
        items.push({ index, delivery, key: admission.key, hash });
      }
    }
    await this.run(items, outcomes, opened, hold);
    return outcomes;
  }

  /** `opened`: keys whose delivery in this batch went back to the broker; their followers here are released. */
  private async run(
    all: ReadonlyArray<Item<T>>,
    outcomes: DeliveryOutcome[],
    opened: Set<string>,
    hold: (key: string) => void,
  ): Promise<void> {
    const items: Array<Item<T>> = [];
    for (const item of all) {
      const k = item.delivery.orderingKey;
      if (k !== undefined && opened.has(k))
        outcomes[item.index] = await this.settler.release(item.delivery, item.key);
      else items.push(item);
    }
    if (items.length === 0) return;
    const verdict = await this.transact(items);
    if (verdict.kind === 'committed') {
      await Promise.all(
        items.map(async (item, i) => {
          const v = verdict.verdicts[i]!;
          outcomes[item.index] =
            v.kind === 'processed'
              ? await this.settler.processed(item.delivery, item.key, verdict.durationMs)
              : v.kind === 'duplicate'
                ? await this.settler.duplicate(item.delivery, item.key)
                : await this.settler.mismatch(item.delivery, item.key, v.error);
        }),
      );
      return;
    }
    if (verdict.kind === 'released') {
      for (const item of items)
        outcomes[item.index] = await this.settler.release(item.delivery, item.key);
      return;
    }
    // A database outage fails every half alike: retry all rather than bisect into the void.
    const bisect =
      items.length > 1 && !(verdict.infrastructure && !(verdict.error instanceof ClaimBusyError));
    if (!bisect) {
      for (const item of items) {
        outcomes[item.index] = await this.settler.fail(
          item.delivery,
          item.key,
          verdict.error,
          verdict.infrastructure,
        );
        const k = item.delivery.orderingKey;
        if (k !== undefined && holdsOrder(outcomes[item.index]!)) {
          opened.add(k);
          hold(k);
        }
      }
      return;
    }
    const middle = Math.ceil(items.length / 2);
    await this.run(items.slice(0, middle), outcomes, opened, hold);
    await this.run(items.slice(middle), outcomes, opened, hold);
  }

  private async transact(items: ReadonlyArray<Item<T>>): Promise<BatchVerdict> {
    let client: PoolClient;
    try {
      client = await this.cfg.pool.connect();
    } catch (cause) {
      this.health.markDown(cause);
      return { kind: 'failed', error: new DatabaseError('connect', cause), infrastructure: true };
    }
    const onClientError = (err: Error) =>
      this.cfg.logger.warn({ err }, 'effectively-once: connection lost');
    client.on('error', onClientError);
    let broken: unknown;
    try {
      // The first delivery of a key inside the batch leads; later ones follow its fate.
      const leaders = new Map<string, Item<T>>();
      for (const item of items) if (!leaders.has(item.key)) leaders.set(item.key, item);
      let claimed: Set<string>;
      try {
        claimed = await this.claims.begin(
          client,
          this.cfg.name,
          [...leaders.values()],
          this.cfg.lockTimeoutMs,
        );
      } catch (cause) {
        broken = await rollback(client);
        if (pgCode(cause) === LOCK_NOT_AVAILABLE) {
          this.settler.stats.busy++;
          return {
            kind: 'failed',
            error: new ClaimBusyError(items[0]!.key, this.cfg.lockTimeoutMs, cause),
            infrastructure: true,
          };
        }
        broken ??= cause;
        if (isUnavailable(cause)) this.health.markDown(cause);
        // A key Postgres cannot store fails its batch; bisection isolates it.
        return claimFailure(cause, items[0]!.key);
      }
      const seenBefore = [...leaders.keys()].filter(
        (k) => !claimed.has(k) && leaders.get(k)!.hash !== null,
      );
      const stored = await this.claims.storedHashes(client, this.cfg.name, seenBefore);
      const verdicts = items.map((item): ItemVerdict => {
        const leader = leaders.get(item.key)!;
        const reference =
          leader === item
            ? claimed.has(item.key)
              ? undefined
              : stored.get(item.key)
            : leader.hash;
        if (leader === item && claimed.has(item.key)) return { kind: 'processed' };
        if (reference && item.hash && !reference.equals(item.hash)) {
          return {
            kind: 'mismatch',
            error: new PayloadMismatchError(
              item.key,
              reference.toString('hex'),
              item.hash.toString('hex'),
            ),
          };
        }
        return { kind: 'duplicate' };
      });
      const fresh = items.filter((_, i) => verdicts[i]!.kind === 'processed');
      const started = performance.now();
      const failure = await this.runHandlers(client, fresh);
      const end = await endTransaction(client, failure, items[0]!.key, this.health);
      broken = end.broken;
      if (end.failure !== undefined) return end.failure;
      return { kind: 'committed', verdicts, durationMs: performance.now() - started };
    } catch (cause) {
      broken = cause;
      if (isUnavailable(cause)) this.health.markDown(cause);
      return { kind: 'failed', error: new DatabaseError('batch', cause), infrastructure: true };
    } finally {
      client.off('error', onClientError);
      client.release(broken === undefined ? undefined : toError(broken));
    }
  }

  private async runHandlers(
    client: PoolClient,
    fresh: ReadonlyArray<Item<T>>,
  ): Promise<BatchVerdict | undefined> {
    if (fresh.length === 0) return undefined;
    const { batchHandler, handler, handlerTimeoutMs } = this.cfg;
    const first = fresh[0]!;
    const result = await guardedCall(
      async (link) => {
        const signal = link.signal;
        if (batchHandler) {
          const batch: Array<BatchItem<T>> = fresh.map((i) => ({
            message: i.delivery.body,
            key: i.key,
            attempt: i.delivery.attempt,
            delivery: i.delivery,
          }));
          await batchHandler(batch, { tx: client, signal });
        } else {
          for (const i of fresh) {
            await handler!(i.delivery.body, {
              tx: client,
              signal,
              attempt: i.delivery.attempt,
              key: i.key,
              delivery: i.delivery,
            });
          }
        }
      },
      {
        timeoutMs: handlerTimeoutMs,
        parents: [this.lifecycle.hardStop],
        timeoutReason: () => new HandlerTimeoutError(first.key, handlerTimeoutMs),
      },
    );
    if (result.kind === 'ok')
      return runAdapterHook(
        fresh.map((i) => i.delivery),
        client,
      );
    if (result.kind === 'timeout') {
      return {
        kind: 'failed',
        error: new HandlerTimeoutError(first.key, handlerTimeoutMs),
        infrastructure: false,
      };
    }
    if (this.lifecycle.hardStop.aborted) return { kind: 'released' };
    return {
      kind: 'failed',
      ...classifyHandlerError(result.error, first.key, first.delivery.attempt, this.health),
    };
  }
}
