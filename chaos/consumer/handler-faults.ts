import type { Rng } from '../../kit/rng.js';

/**
 * Handler faults: handlers written the way people write them, failing the way real
 * databases and downstream services make them fail. Each faulty message carries its
 * fault in its body (so a duplicate send carries the same one), planned from the seed.
 *
 * - `swallow`: after writing its effect the handler runs a statement that fails
 *   (a unique violation, 23505), catches the error and returns normally; Postgres has
 *   aborted the transaction, so its COMMIT rolls back.
 * - `deferred`: the handler inserts a row violating a DEFERRABLE INITIALLY DEFERRED
 *   foreign key, so COMMIT itself fails (23503) on a healthy connection.
 * - `downstream`: the handler calls a loopback TCP port that refuses connections and
 *   throws the HTTP client's ECONNREFUSED error (its database connection is fine).
 * - `backend-killed`: the handler's own backend is terminated (`pg_terminate_backend`,
 *   by itself or from another connection); the handler then throws or swallows the error.
 * - `serialization`: "hot" messages, in pairs, update the same small set of rows (in
 *   opposite orders, or the same order) at REPEATABLE READ / SERIALIZABLE, so 40P01 /
 *   40001 happen under contention; the handler lets the error out or swallows it.
 * - `floating`: the handler returns while a query chain it started through `ctx.tx` is
 *   still running (`tx.query(a).then(() => tx.query(b))`, not awaited); `b` must never
 *   run outside the claim's transaction (it used to, in autocommit, behind COMMIT).
 */
export type HandlerFaultKind =
  'swallow' | 'deferred' | 'downstream' | 'backend-killed' | 'serialization' | 'floating';

export const HANDLER_FAULT_KINDS: readonly HandlerFaultKind[] = [
  'swallow',
  'deferred',
  'downstream',
  'backend-killed',
  'serialization',
  'floating',
];

/**
 * How often a fault fires: a number n is TRANSIENT, it fires on the key's first n
 * handler runs (counted in the run's fault log, so retries that spend no attempt end
 * it too), never on the last attempt; `always` is PERMANENT: it fires on every run.
 */
export type Fires = number | 'always';

/** The fault a message's handler must commit, carried in its body. */
export type HandlerFault =
  | { kind: 'swallow' | 'deferred' | 'downstream' | 'floating'; fires: Fires }
  | {
      kind: 'backend-killed';
      fires: number;
      /** `self`: `SELECT pg_terminate_backend(pg_backend_pid())`; `other`: from a second connection. */
      by: 'self' | 'other';
      /** What the handler does with the error: let it out, or catch it and return. */
      then: 'throw' | 'swallow';
    }
  | {
      kind: 'serialization';
      /** The pair's id: both members wait for each other before touching the rows. */
      pair: number;
      /** Hot rows to update, in this order. */
      rows: [number, number];
      /** The partner takes the same rows in the `opposite` order (a deadlock) or the `same` one. */
      order: 'opposite' | 'same';
      then: 'throw' | 'swallow';
    };

/** How a planned faulty message must end. */
export type ExpectedEnd =
  | { end: 'applied' }
  | {
      end: 'dead-lettered';
      /** Error codes the dead letter may carry (SQS error attribute, Kafka `eo-error-code`). */
      codes: readonly string[];
      reason: string;
    };

/**
 * What the fixed library does with each fault (see the P0 spec): transient faults and
 * retried-infrastructure ones end applied once; a permanent swallowed error is a rolled
 * back transaction (EO_TX_ABORTED), a permanent deferred violation a failed COMMIT with
 * a known outcome (EO_COMMIT_FAILED), a permanent downstream error a handler failure
 * (EO_HANDLER), a query permanently left floating a refused use of `ctx.tx` after the
 * handler settled (EO_TX_CONTROL, issue 27). A killed backend is infrastructure and
 * contention is retried: applied.
 */
export function expectedEnd(fault: HandlerFault): ExpectedEnd {
  if (fault.kind === 'backend-killed' || fault.kind === 'serialization') return { end: 'applied' };
  if (fault.fires !== 'always') return { end: 'applied' };
  switch (fault.kind) {
    case 'swallow':
      return {
        end: 'dead-lettered',
        codes: ['EO_TX_ABORTED'],
        reason: 'swallowed SQL error every time',
      };
    case 'deferred':
      return {
        end: 'dead-lettered',
        codes: ['EO_COMMIT_FAILED'],
        reason: 'deferred FK violated at every COMMIT',
      };
    case 'downstream':
      return {
        end: 'dead-lettered',
        codes: ['EO_HANDLER'],
        reason: 'downstream ECONNREFUSED every time',
      };
    case 'floating':
      return {
        end: 'dead-lettered',
        codes: ['EO_TX_CONTROL'],
        reason: 'a query chain left floating every time',
      };
  }
}

/** One planned faulty key. */
export interface PlannedFault {
  key: string;
  fault: HandlerFault;
  expected: ExpectedEnd;
}

/** Label of a fault for logs: `swallow/transient`, `deferred/permanent`, ... */
export function faultLabel(fault: HandlerFault): string {
  if (fault.kind === 'backend-killed') return `backend-killed/${fault.by}-${fault.then}`;
  if (fault.kind === 'serialization') return `serialization/${fault.then}`;
  return `${fault.kind}/${fault.fires === 'always' ? 'permanent' : 'transient'}`;
}

/** Hot rows the serialization pairs fight over. */
export const HOT_ROWS = 4;

/**
 * The slots `count` faulty keys are spread over, evenly and in this order: one pair
 * of hot messages, a killed backend, then each kind transient and permanent.
 */
type Slot =
  | { kind: 'serialization' }
  | { kind: 'backend-killed' }
  | { kind: 'swallow' | 'deferred' | 'downstream' | 'floating'; permanent: boolean };

function slots(kinds: readonly HandlerFaultKind[]): Slot[] {
  const all: Slot[] = [];
  if (kinds.includes('serialization')) all.push({ kind: 'serialization' });
  if (kinds.includes('backend-killed')) all.push({ kind: 'backend-killed' });
  for (const kind of ['swallow', 'deferred', 'downstream', 'floating'] as const) {
    if (kinds.includes(kind)) all.push({ kind, permanent: false }, { kind, permanent: true });
  }
  return all;
}

/**
 * Plans about `count` faulty keys of the chosen `kinds`. Transient and hot faults go on
 * logical keys (`pickLogical` draws a fresh one: they must still be applied once);
 * permanent faults get keys of their own (`f-<kind>-<j>`, like poison: never applied,
 * dead-lettered). Serialization slots are rounded up to whole pairs.
 */
export function planHandlerFaults(
  rng: Rng,
  count: number,
  kinds: readonly HandlerFaultKind[],
  pickLogical: () => string,
): PlannedFault[] {
  const all = slots(kinds);
  if (count === 0 || all.length === 0) return [];
  const perSlot = all.map(
    (_, i) => Math.floor(count / all.length) + (i < count % all.length ? 1 : 0),
  );
  const planned: PlannedFault[] = [];
  const add = (key: string, fault: HandlerFault): void => {
    planned.push({ key, fault, expected: expectedEnd(fault) });
  };
  all.forEach((slot, s) => {
    const n = perSlot[s] ?? 0;
    if (slot.kind === 'serialization') {
      // Even pairs take the rows in opposite orders (a deadlock, 40P01); odd pairs in the
      // same order, so the second waits for the first and, at REPEATABLE READ or above,
      // fails when it commits (40001). One member lets the error out, one swallows it.
      for (let pair = 0; pair < Math.ceil(n / 2); pair++) {
        const a = rng.int(1, HOT_ROWS);
        const b = ((a - 1 + rng.int(1, HOT_ROWS - 1)) % HOT_ROWS) + 1;
        const order = pair % 2 === 0 ? 'opposite' : 'same';
        add(pickLogical(), { kind: 'serialization', pair, rows: [a, b], order, then: 'throw' });
        const rows: [number, number] = order === 'opposite' ? [b, a] : [a, b];
        add(pickLogical(), { kind: 'serialization', pair, rows, order, then: 'swallow' });
      }
    } else if (slot.kind === 'backend-killed') {
      for (let j = 0; j < n; j++) {
        add(pickLogical(), {
          kind: 'backend-killed',
          fires: 1 + (j % 2),
          // self-throw, other-swallow, other-throw, self-swallow: two keys cover both axes.
          by: j % 4 === 0 || j % 4 === 3 ? 'self' : 'other',
          then: j % 2 === 0 ? 'throw' : 'swallow',
        });
      }
    } else {
      for (let j = 0; j < n; j++) {
        const fault = { kind: slot.kind, fires: slot.permanent ? 'always' : 1 + (j % 2) } as const;
        add(slot.permanent ? `f-${slot.kind}-${j}` : pickLogical(), fault);
      }
    }
  });
  return planned;
}
