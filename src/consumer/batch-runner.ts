import { admit } from './admission.js';
import type { ConsumerConfig } from './config.js';
import {
  ClaimBusyError,
  type EffectivelyOnceError,
  HandlerTimeoutError,
  PayloadMismatchError,
} from '../errors.js';
import type { Lifecycle } from './lifecycle.js';
import { holdsOrder } from './ordering.js';
import type { Settler } from './settle.js';
import { runAdapterHook } from './steps.js';
import { deadlinePassed, workTimeoutMs } from './work-deadline.js';
import { BatchClaimStatements } from '../store/batch-claim.js';
import type { RouteTarget } from '../routing/options.js';
import type {
  ClaimTransaction,
  ClaimTransactions,
  FailedAttempt,
  Released,
  WorkResult,
} from '../tx/claim-transaction.js';
import { retryConflicts } from '../tx/conflicts.js';
import { type ClaimPlan, driveTransaction, runWork, type Steps } from '../tx/drive.js';
import type { BatchItem, Delivery, DeliveryOutcome } from '../types.js';

interface Item<T> {
  index: number;
  delivery: Delivery<T>;
  key: string;
  hash: Buffer | null;
}

/** Per-item result of a committed batch. */
type ItemVerdict =
  { kind: 'processed' } | { kind: 'duplicate' } | { kind: 'mismatch'; error: PayloadMismatchError };

/** What the batch's claim found: the keys it claimed (and its xid), the hashes of those seen before. */
interface BatchClaimed {
  claim: { claimed: Set<string>; xid: string | null };
  stored: Map<string, Buffer | null>;
}

type BatchVerdict =
  | {
      kind: 'committed';
      verdicts: ItemVerdict[];
      durationMs: number;
      warning: EffectivelyOnceError | undefined;
    }
  | FailedAttempt
  | Released;

/**
 * Batch mode: one transaction claims every key of the batch with one statement, runs
 * the handler on the new messages only, commits once, then acks everything. A failing
 * batch is bisected (first half, then second half, so order holds) until the failing
 * delivery is alone and takes the per-message retry / dead-letter path.
 */
export class BatchRunner<T, Tx> {
  private readonly claims: BatchClaimStatements;

  constructor(
    private readonly cfg: ConsumerConfig<T, Tx>,
    private readonly settler: Settler<T>,
    private readonly transactions: ClaimTransactions<Tx>,
    private readonly lifecycle: Lifecycle,
  ) {
    this.claims = new BatchClaimStatements(
      cfg.table,
      cfg.isolationLevel,
      cfg.retention?.olderThanMs,
    );
  }

  /**
   * `held[i]`: delivery i follows one of its ordering key that went back to the broker,
   * so it is released. `hold(key)` is told when a delivery of this batch goes back.
   */
  process(
    deliveries: ReadonlyArray<Delivery<T>>,
    held: readonly boolean[],
    hold: (key: string) => void,
  ): Promise<DeliveryOutcome[]> {
    return this.settler.tracing.batch(deliveries, () => this.processBatch(deliveries, held, hold));
  }

  private async processBatch(
    deliveries: ReadonlyArray<Delivery<T>>,
    held: readonly boolean[],
    hold: (key: string) => void,
  ): Promise<DeliveryOutcome[]> {
    const outcomes: DeliveryOutcome[] = new Array<DeliveryOutcome>(deliveries.length).fill(
      'unsettled',
    );
    const items: Array<Item<T>> = [];
    const opened = new Set<string>();
    /** Keys whose delivery went back at admission: their followers here are held back. */
    const refused = new Set<string>();
    for (let index = 0; index < deliveries.length; index++) {
      const delivery = deliveries[index]!;
      if (held[index] === true) {
        outcomes[index] = await this.settler.holdBack(delivery);
        continue;
      }
      const k = delivery.orderingKey;
      if (k !== undefined && refused.has(k)) {
        outcomes[index] = await this.settler.holdBack(delivery);
        continue;
      }
      const admission = admit(this.cfg, this.settler, this.lifecycle, delivery);
      if ('outcome' in admission) {
        // Refused before its claim and gone back (its dead letter failed): it comes again,
        // so what follows it (here, and in batches already dispatched) must not overtake
        // it. What came before it runs.
        const outcome = await admission.outcome;
        outcomes[index] = outcome;
        if (k !== undefined && holdsOrder(outcome)) {
          refused.add(k);
          hold(k);
        }
      } else items.push({ index, delivery, key: admission.key, hash: admission.hash });
    }
    for (const run of await this.byDatabase(items, outcomes, opened, hold))
      await this.run(run, outcomes, opened, hold);
    return outcomes;
  }

  /**
   * Routing: one transaction reaches one database, so the batch is cut where the next
   * delivery's key lives in another database than the one before it (runs of
   * consecutive deliveries, in delivery order: an ordering key's deliveries keep their
   * order). A delivery the route fails on fails alone, and its followers go back with it.
   */
  private async byDatabase(
    items: ReadonlyArray<Item<T>>,
    outcomes: DeliveryOutcome[],
    opened: Set<string>,
    hold: (key: string) => void,
  ): Promise<Array<Array<Item<T>>>> {
    const at = this.transactions.at?.bind(this.transactions);
    if (at === undefined) return [items.slice()];
    const runs: Array<Array<Item<T>>> = [];
    let current: { database: ClaimTransactions<Tx>; items: Array<Item<T>> } | undefined;
    for (const item of items) {
      const routed = at(this.target(item));
      if ('kind' in routed) {
        outcomes[item.index] = await this.settler.fail(
          item.delivery,
          item.key,
          routed.error,
          routed.infrastructure,
        );
        this.holdIfOpened(item.delivery, outcomes[item.index]!, opened, hold);
        continue;
      }
      if (current?.database !== routed) {
        current = { database: routed, items: [] };
        runs.push(current.items);
      }
      current.items.push(item);
    }
    return runs;
  }

  /** What the route sees of a delivery of the batch. */
  private target(item: Item<T>): RouteTarget {
    return { key: item.key, scope: this.cfg.name, delivery: item.delivery };
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
      else if (deadlinePassed(item.delivery)) {
        // Past its source's deadline (a half bisected late): not started, handed back.
        outcomes[item.index] = await this.settler.release(item.delivery, item.key);
        this.holdIfOpened(item.delivery, outcomes[item.index]!, opened, hold);
      } else items.push(item);
    }
    if (items.length === 0) return;
    const verdict = await this.transact(items).catch((thrown: unknown) =>
      this.settler.escaped(items[0]!.key, thrown),
    );
    if (verdict.kind === 'committed') {
      if (verdict.warning !== undefined) this.settler.report(verdict.warning);
      await this.settleCommitted(items, verdict.verdicts, verdict.durationMs, outcomes, (d, o) =>
        this.holdIfOpened(d, o, opened, hold),
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
        // Once the first of a key went back, its followers here go back untouched (released,
        // as at the start of run()) and follow it; retried each on its own backoff, they
        // would come back in any order.
        const k = item.delivery.orderingKey;
        if (k !== undefined && opened.has(k)) {
          outcomes[item.index] = await this.settler.release(item.delivery, item.key);
          continue;
        }
        outcomes[item.index] = await this.settler.fail(
          item.delivery,
          item.key,
          verdict.error,
          verdict.infrastructure,
        );
        this.holdIfOpened(item.delivery, outcomes[item.index]!, opened, hold);
      }
      return;
    }
    const middle = Math.ceil(items.length / 2);
    await this.run(items.slice(0, middle), outcomes, opened, hold);
    await this.run(items.slice(middle), outcomes, opened, hold);
  }

  /**
   * A delivery of this batch went back to the broker (`outcome`): its ordering key is
   * opened, so its followers in this batch are released (`opened`) and those already
   * dispatched to later batches too (`hold`).
   */
  private holdIfOpened(
    delivery: Delivery<T>,
    outcome: DeliveryOutcome,
    opened: Set<string>,
    hold: (key: string) => void,
  ): void {
    const k = delivery.orderingKey;
    if (k === undefined || !holdsOrder(outcome)) return;
    opened.add(k);
    hold(k);
  }

  /**
   * Acks a committed batch: every ack started at once and waited for together (one
   * promise per delivery, the ack's own, instead of a chain of them); a mismatch takes
   * the settler's own path, and `wentBack` hears its outcome (its dead letter may fail).
   */
  private async settleCommitted(
    items: ReadonlyArray<Item<T>>,
    verdicts: readonly ItemVerdict[],
    durationMs: number,
    outcomes: DeliveryOutcome[],
    wentBack: (delivery: Delivery<T>, outcome: DeliveryOutcome) => void,
  ): Promise<void> {
    const acks: Array<Promise<unknown>> = new Array<Promise<unknown>>(items.length);
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      const v = verdicts[i]!;
      if (v.kind === 'mismatch') {
        acks[i] = this.settler.mismatch(item.delivery, item.key, v.error).then((outcome) => {
          outcomes[item.index] = outcome;
          wentBack(item.delivery, outcome);
        });
        continue;
      }
      outcomes[item.index] = v.kind;
      acks[i] = this.settler.committed(item.delivery, item.key, v.kind, durationMs);
    }
    const results = await Promise.allSettled(acks);
    for (let i = 0; i < results.length; i++) {
      const result = results[i]!;
      // A mismatch's settlement never rejects; a rejection here is a failed ack.
      if (result.status === 'rejected') this.settler.ackFailed(result.reason, items[i]!.key);
    }
  }

  /**
   * The batch's claim transaction, run again in place while it loses serialization
   * races (bounded; past that an attempt is spent). Not stopped by a delivery's signal:
   * the batch is one transaction for all its deliveries.
   */
  private transact(items: ReadonlyArray<Item<T>>): Promise<BatchVerdict> {
    const { settler } = this;
    // Every delivery of the batch shares its scope: the first one finds it.
    const lead = items[0]!.delivery;
    const steps: Steps = {
      step: (name, fn, failure) => settler.tracing.step(lead, name, fn, failure),
    };
    return retryConflicts<BatchVerdict>(
      () => driveTransaction(this.transactions, this.plan(items), steps),
      {
        retries: this.cfg.serializationRetries,
        exhausted: 'spend-attempt',
        onRetry: () => settler.stats.serializationRetries++,
      },
      this.lifecycle.hardStop,
      items[0]!.key,
    );
  }

  /** One transaction: claim every key, run the handler on the new ones, verified COMMIT. */
  private plan(items: ReadonlyArray<Item<T>>): ClaimPlan<BatchClaimed, BatchVerdict, Tx> {
    const { cfg } = this;
    // The first delivery of a key inside the batch leads; later ones follow its fate.
    const leaders = new Map<string, Item<T>>();
    for (const item of items) if (!leaders.has(item.key)) leaders.set(item.key, item);
    let verdicts: ItemVerdict[] = [];
    let fresh: Array<Item<T>> = [];
    return {
      key: items[0]!.key,
      // Every key of the batch routes to this one's database (see byDatabase).
      target: this.target(items[0]!),
      claimWaitMs: cfg.lockTimeoutMs,
      // A key Postgres cannot store fails its batch (claimFailed); bisection isolates it.
      claim: async (session) => {
        const claim = await this.claims.begin(
          session,
          cfg.name,
          [...leaders.values()],
          cfg.lockTimeoutMs,
        );
        const seenBefore = [...leaders.keys()].filter(
          (k) => !claim.claimed.has(k) && leaders.get(k)!.hash !== null,
        );
        const stored = await this.claims.storedHashes(session.sql, cfg.name, seenBefore);
        return { claim, stored };
      },
      claimed: async ({ claim, stored }, conn) => {
        verdicts = items.map((item) => itemVerdict(item, leaders, claim.claimed, stored));
        fresh = items.filter((_, i) => verdicts[i]!.kind === 'processed');
        if (claim.xid !== null && fresh.length > 0) return { kind: 'run', xid: claim.xid };
        await conn.rollback();
        return {
          kind: 'done',
          verdict: { kind: 'committed', verdicts, durationMs: 0, warning: undefined },
        };
      },
      work: (conn) => this.runHandlers(conn, fresh),
      ended: async (end, _work, durationMs) =>
        end.kind === 'committed'
          ? { kind: 'committed', verdicts, durationMs, warning: end.warning }
          : end,
    };
  }

  private async runHandlers(
    conn: ClaimTransaction<Tx>,
    fresh: ReadonlyArray<Item<T>>,
  ): Promise<WorkResult> {
    const first = fresh[0]!;
    const timeoutMs = workTimeoutMs(
      this.cfg.handlerTimeoutMs,
      fresh.map((i) => i.delivery),
    );
    if (timeoutMs === 'passed')
      return { kind: 'timeout', error: new HandlerTimeoutError(first.key, 0) };
    const work = await runWork(
      conn,
      {
        timeoutMs,
        hardStop: this.lifecycle.hardStop,
        attempt: first.delivery.attempt,
      },
      (tx, link) => this.callHandlers(fresh, tx, link),
    );
    if (work.kind !== 'ok') return work;
    return runAdapterHook(
      fresh.map((i) => i.delivery),
      conn,
    );
  }

  /**
   * The user's code for the new deliveries: the batch handler, or the handler per
   * message. The signal is read through `link` only when the handler reads it: most
   * never do, and an AbortController linked to its parents per batch showed in the profile.
   */
  private async callHandlers(
    fresh: ReadonlyArray<Item<T>>,
    tx: Tx,
    link: { readonly signal: AbortSignal },
  ): Promise<void> {
    const { batchHandler, handler } = this.cfg;
    if (batchHandler) {
      const batch: Array<BatchItem<T>> = fresh.map((i) => ({
        message: i.delivery.body,
        key: i.key,
        attempt: i.delivery.attempt,
        delivery: i.delivery,
      }));
      await batchHandler(batch, {
        tx,
        get signal() {
          return link.signal;
        },
      });
      return;
    }
    for (const i of fresh) {
      await handler!(i.delivery.body, {
        tx,
        get signal() {
          return link.signal;
        },
        attempt: i.delivery.attempt,
        key: i.key,
        delivery: i.delivery,
      });
    }
  }
}

const PROCESSED: ItemVerdict = { kind: 'processed' };
const DUPLICATE: ItemVerdict = { kind: 'duplicate' };

/** A delivery's fate in a batch whose claim went through. */
function itemVerdict<T>(
  item: Item<T>,
  leaders: ReadonlyMap<string, Item<T>>,
  claimed: ReadonlySet<string>,
  stored: ReadonlyMap<string, Buffer | null>,
): ItemVerdict {
  const leader = leaders.get(item.key)!;
  if (leader === item && claimed.has(item.key)) return PROCESSED;
  const reference = leader === item ? stored.get(item.key) : leader.hash;
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
  return DUPLICATE;
}
