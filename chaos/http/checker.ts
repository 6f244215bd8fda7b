import type pg from 'pg';
import { quoteIdentifier } from '../../src/store/identifiers.js';
import type { EffectsQuery } from '../failover/accounting.js';
import type { Answer, Payment, PaymentLog } from './clients.js';
import { faultTables } from './fault-db.js';

/** A key's charges, from the `charges` table (the effect, one row per application). */
export interface ChargeRow {
  tenant: string;
  key: string;
  ids: string[];
  amountCents: number;
}

/** A key's stored response, from the key table. */
export interface StoredRow {
  scope: string;
  key: string;
  status: number | null;
  body: Buffer | null;
}

export interface HttpVerdict {
  /** Payments whose charge exists exactly once. */
  applied: number;
  /** Payments charged more than once. */
  doubles: number;
  /** Payments with no charge at all. */
  lost: number;
  /** Of them, those `excused` (an async failover's window): counted, not failed. */
  windowLost: number;
  /** Final answers the callers got with `Idempotent-Replayed: true`. */
  replays: number;
  /** Payments whose direct replay after the run matched what their callers got. */
  replaysChecked: number;
  /** Payments whose answers differ (between callers, from the stored one, from the charge). */
  mismatched: number;
  /** Retries after 409 / 425: a caller found its original still running. */
  inProgress: number;
  /** idempotentFetch calls that gave up and were called again with the same key. */
  gaveUp: number;
  /** Callers without a final answer at the deadline. */
  unanswered: number;
  /** Every violation, with example keys. */
  problems: string[];
}

/**
 * The HTTP run's effects for the failover accounting (chaos/failover/accounting.ts):
 * the charges and the fault routes' effect rows, and the key table's rows (every claim
 * that committed wrote its key's row, whatever the handler did), keyed `tenant/key`
 * like the verdict's examples (a fault operation by its id).
 */
export function httpEffects(schema: string): EffectsQuery {
  const s = quoteIdentifier(schema);
  return `SELECT tenant || '/' || idem_key AS key, 'c|' || tenant || '|' || idem_key || '|' || id AS id, xmin::text AS xmin FROM ${s}.charges
    UNION ALL SELECT op, 'e|' || op || '|' || run || '|' || part, xmin::text FROM ${faultTables(schema).effects}
    UNION ALL SELECT scope || '/' || idempotency_key, 'k|' || scope || '|' || idempotency_key, xmin::text FROM ${s}.eo_idempotency_keys`;
}

export async function readCharges(pool: pg.Pool, schema: string): Promise<ChargeRow[]> {
  const { rows } = await pool.query<{ tenant: string; key: string; ids: string[]; amount: string }>(
    `SELECT tenant, idem_key AS key, array_agg(id::text ORDER BY id) AS ids,
            sum(amount_cents)::text AS amount
       FROM ${quoteIdentifier(schema)}.charges GROUP BY tenant, idem_key`,
  );
  return rows.map((r) => ({
    tenant: r.tenant,
    key: r.key,
    ids: r.ids,
    amountCents: Number(r.amount),
  }));
}

export async function readStored(pool: pg.Pool, schema: string): Promise<StoredRow[]> {
  const { rows } = await pool.query<StoredRow>(
    `SELECT scope, idempotency_key AS key, status, body
       FROM ${quoteIdentifier(schema)}.eo_idempotency_keys`,
  );
  return rows;
}

/**
 * The verdict over the final state: each payment's charge exactly once with its own
 * amount; every caller's answer a 201 carrying that charge, all of a payment's answers
 * (first execution and replays, both callers of a duplicate, and the direct replay
 * after the run) byte-identical to one another and to the stored response; no charge
 * or stored key that no payment asked for.
 */
export function checkHttp(input: {
  payments: Payment[];
  logs: Map<string, PaymentLog>;
  /** The charges once every caller had its answer, and after the direct replay (which must change nothing). */
  charges: ChargeRow[];
  chargesAfter: ChargeRow[];
  stored: StoredRow[];
  /** The direct replay of each payment after the run. */
  replayed: Map<string, Answer>;
  /**
   * `tenant/key` of payments whose charge vanished with a dead primary under async
   * replication: when lost they count, and nothing else about them is checked (their
   * callers had a 201 for a charge that is gone, the direct replay charged afresh).
   */
  excused?: ReadonlySet<string>;
}): HttpVerdict {
  const v: HttpVerdict = {
    applied: 0,
    doubles: 0,
    lost: 0,
    windowLost: 0,
    replays: 0,
    replaysChecked: 0,
    mismatched: 0,
    inProgress: 0,
    gaveUp: 0,
    unanswered: 0,
    problems: [],
  };
  const examples = new Map<string, string[]>();
  const flag = (what: string, key: string): void => {
    const list = examples.get(what) ?? [];
    list.push(key);
    examples.set(what, list);
  };
  const id = (tenant: string, key: string): string => `${tenant}/${key}`;
  const charges = new Map(input.charges.map((c) => [id(c.tenant, c.key), c]));
  const after = new Map(input.chargesAfter.map((c) => [id(c.tenant, c.key), c]));
  const stored = new Map(input.stored.map((s) => [id(s.scope, s.key), s]));
  const planned = new Set(input.payments.map((p) => id(p.tenant, p.key)));
  for (const c of input.charges)
    if (!planned.has(id(c.tenant, c.key)))
      flag('a charge no payment asked for', id(c.tenant, c.key));
  for (const s of input.stored)
    if (!planned.has(id(s.scope, s.key))) flag('a stored key no payment sent', id(s.scope, s.key));

  for (const payment of input.payments) {
    const name = id(payment.tenant, payment.key);
    const log = input.logs.get(payment.key);
    const charge = charges.get(name);
    if (charge === undefined && input.excused?.has(name) === true) {
      v.lost++;
      v.windowLost++;
      continue;
    }
    if (charge?.ids.join() !== after.get(name)?.ids.join())
      flag('the direct replay after the run changed its charges', name);
    v.inProgress += log?.inProgress ?? 0;
    v.gaveUp += log?.gaveUp ?? 0;
    v.unanswered += log?.unanswered ?? 0;
    v.replays += log?.answers.filter((a) => a.replayed).length ?? 0;
    if (charge === undefined) {
      v.lost++;
      flag('no charge (lost)', name);
      continue;
    }
    if (charge.ids.length > 1) {
      v.doubles++;
      flag('charged more than once', name);
      continue;
    }
    v.applied++;
    if (charge.amountCents !== payment.body.amountCents) flag('charged another amount', name);
    const row = stored.get(name);
    const answers = log?.answers ?? [];
    const direct = input.replayed.get(payment.key);
    const reference = answers[0];
    let consistent = row !== undefined && row.status === 201 && reference !== undefined;
    if (reference !== undefined) {
      if (reference.status !== 201) flag('a final answer other than 201', name);
      const body = parseCharge(reference.body);
      if (body?.id !== charge.ids[0] || body?.key !== payment.key) {
        consistent = false;
        flag('an answer that names another charge', name);
      }
      if (row?.body && !row.body.equals(Buffer.from(reference.body))) {
        consistent = false;
        flag('an answer that differs from the stored response', name);
      }
      for (const other of answers.slice(1))
        if (!sameAnswer(reference, other)) {
          consistent = false;
          flag("two callers' answers differ", name);
        }
    }
    if (
      direct === undefined ||
      !direct.replayed ||
      reference === undefined ||
      !sameAnswer(reference, direct)
    ) {
      consistent = false;
      flag('the direct replay after the run differs (or was not a replay)', name);
    } else v.replaysChecked++;
    if (!consistent) v.mismatched++;
  }
  for (const [what, keys] of examples)
    v.problems.push(`${what}: ${keys.length} (e.g. ${keys.slice(0, 5).join(', ')})`);
  return v;
}

/** Status, body bytes and the stored headers the payment API sets (Location, Content-Type). */
function sameAnswer(a: Answer, b: Answer): boolean {
  return (
    a.status === b.status &&
    a.body === b.body &&
    a.location === b.location &&
    a.contentType === b.contentType
  );
}

function parseCharge(text: string): { id?: string; key?: string } | undefined {
  try {
    return JSON.parse(text) as { id?: string; key?: string };
  } catch {
    return undefined;
  }
}
