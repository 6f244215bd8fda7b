import type { Answer, PaymentLog } from '../http/clients.js';
import type { DbEffects } from './db.js';
import type { Operation } from './plan.js';

/** A flow's key row as the library left it. */
export interface FlowRow {
  key: string;
  /** The stored final answer; null while the flow is unfinished. */
  status: number | null;
}

/** One charge in the provider's own record. */
export interface ProviderCharge {
  id: string;
  /** The Idempotency-Key it was created with. */
  idempotencyKey: string;
  /** The operation it was made for (the charge's metadata). */
  op: string;
  amountCents: number;
}

export interface StepsVerdict {
  /** Operations ended with a stored 201 whose charge and rows all agree. */
  completed: number;
  /** Operations ended with a stored 402 (declined card): no charge, no record. */
  declined: number;
  /** Abandoned operations that never reached the server: no key row, no effect anywhere. */
  neverArrived: number;
  /** Operations with a provider charge, an order or a record applied more than once. */
  doubles: number;
  /** Operations whose client got a success, or whose stored answer says charged, with the charge or a row missing. */
  lost: number;
  /** Operations whose key row has no final answer (after the completer ran). */
  unfinished: number;
  /** Answers that disagree with the stored one, or a stored answer with the provider / the rows. */
  mismatched: number;
  /** Operations whose direct replay after the run was a replay of the stored answer. */
  replaysChecked: number;
  /** Final answers the callers got with `Idempotent-Replayed: true`. */
  replays: number;
  inProgress: number;
  gaveUp: number;
  /** Retrying callers without a final answer at the deadline. */
  unanswered: number;
  problems: string[];
}

export interface StepsCheckInput {
  ops: Operation[];
  /** The retrying callers' logs, by key. */
  logs: Map<string, PaymentLog>;
  /** What each abandoned operation's one attempt got (none: no answer at all). */
  abandoned: Map<string, Answer>;
  effects: DbEffects;
  /** The provider's charges, and its record after the direct replay (which must change nothing). */
  charges: ProviderCharge[];
  chargesAfter: ProviderCharge[];
  /** The flows' table after the completer ran. */
  flows: FlowRow[];
  /** The direct replay of each operation that has a key row. */
  replayed: Map<string, Answer>;
  /** Whether the flows' tables were the same before and after the direct replay. */
  effectsUnchanged: boolean;
}

/**
 * The verdict over the final state, from the database and the provider's own record:
 * each operation's effects at most once (order, record, provider charge); every key row
 * finished; a stored 201 names the operation's one order and the provider's one charge
 * for it, with the amount asked, recorded once; a stored 402 only for a declined card,
 * with no charge and no record; every final answer a caller got is the stored one; an
 * abandoned operation that left no key row left nothing anywhere.
 */
export function checkSteps(input: StepsCheckInput): StepsVerdict {
  const v: StepsVerdict = {
    completed: 0,
    declined: 0,
    neverArrived: 0,
    doubles: 0,
    lost: 0,
    unfinished: 0,
    mismatched: 0,
    replaysChecked: 0,
    replays: 0,
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
  const planned = new Set(input.ops.map((o) => o.key));
  const chargesOf = groupBy(input.charges, (c) => c.op);
  const flows = new Map(input.flows.map((f) => [f.key, f]));
  for (const c of input.charges)
    if (!planned.has(c.op)) flag('a provider charge no operation asked for', c.op);
  for (const table of ['orders', 'records'] as const)
    for (const op of input.effects[table].keys())
      if (!planned.has(op)) flag(`a row in ${table} no operation asked for`, op);
  for (const f of input.flows) if (!planned.has(f.key)) flag('a key row nobody sent', f.key);
  if (input.charges.length !== input.chargesAfter.length)
    flag('the direct replay after the run changed the provider charges', '*');
  if (!input.effectsUnchanged) flag('the direct replay after the run changed the tables', '*');

  for (const op of input.ops) {
    const key = op.key;
    const log = input.logs.get(key);
    v.inProgress += log?.inProgress ?? 0;
    v.gaveUp += log?.gaveUp ?? 0;
    v.unanswered += log?.unanswered ?? 0;
    v.replays += log?.answers.filter((a) => a.replayed).length ?? 0;
    const charges = chargesOf.get(key) ?? [];
    const orders = input.effects.orders.get(key);
    const records = input.effects.records.get(key);
    const flow = flows.get(key);
    // The final answers callers got: every retrying caller's, and an abandoned attempt's if final.
    const answers = [...(log?.answers ?? [])];
    const once = input.abandoned.get(key);
    if (once !== undefined && (once.status === 201 || once.status === 402)) answers.push(once);
    const clientSuccess = answers.some((a) => a.status === 201);

    if (charges.length > 1 || (orders?.ids.length ?? 0) > 1 || (records?.ids.length ?? 0) > 1) {
      v.doubles++;
      if (charges.length > 1) flag('charged twice by the provider', key);
      if ((orders?.ids.length ?? 0) > 1) flag("'order' applied twice", key);
      if ((records?.ids.length ?? 0) > 1) flag("'record' applied twice", key);
      continue;
    }
    const charge = charges[0];
    if (flow === undefined) {
      if (charge === undefined && orders === undefined && records === undefined) {
        if (op.abandoned && answers.length === 0) {
          v.neverArrived++;
          continue;
        }
        v.lost++;
        flag(op.abandoned ? 'answered, but no key row' : 'no key row (never executed)', key);
        continue;
      }
      v.lost++;
      flag('effects without a key row', key);
      continue;
    }
    if (flow.status === null) {
      v.unfinished++;
      flag('unfinished after the completer', key);
      if (clientSuccess) v.lost++;
      continue;
    }
    const direct = input.replayed.get(key);
    let consistent = true;
    if (direct === undefined || !direct.replayed || direct.status !== flow.status) {
      consistent = false;
      flag(
        'the direct replay after the run differs from the stored status (or was not a replay)',
        key,
      );
    } else v.replaysChecked++;
    for (const a of answers)
      if (direct !== undefined && (a.status !== direct.status || a.body !== direct.body)) {
        consistent = false;
        flag('an answer a caller got differs from the stored one', key);
        break;
      }
    if (flow.status === 201) {
      const body = parseAnswer(direct?.body);
      const order = orders?.ids[0];
      const record = records?.ids.length === 1 ? records : undefined;
      if (charge === undefined || order === undefined || record === undefined) {
        v.lost++;
        if (charge === undefined) flag('a stored 201 with no provider charge (lost)', key);
        if (order === undefined) flag('a stored 201 with no order row (lost)', key);
        if (record === undefined) flag('a stored 201 with no record row (lost)', key);
        continue;
      }
      if (op.body.card === 'declined') {
        consistent = false;
        flag('a declined card ended charged', key);
      }
      if (charge.amountCents !== op.body.amountCents) {
        consistent = false;
        flag('charged another amount', key);
      }
      if (body?.charge !== charge.id || body?.order !== order) {
        consistent = false;
        flag("a stored answer that names another order or charge than the provider's", key);
      }
      if (record.chargeIds[0] !== charge.id || record.orderIds[0] !== order) {
        consistent = false;
        flag("a record that names another charge than the provider's", key);
      }
      if (orders?.chargeIds[0] !== charge.id) {
        consistent = false;
        flag("an order whose charge is not the provider's", key);
      }
      if (consistent) v.completed++;
      else v.mismatched++;
      continue;
    }
    if (flow.status === 402) {
      if (clientSuccess) {
        v.lost++;
        flag('a caller got 201, the stored answer is 402', key);
        continue;
      }
      if (op.body.card !== 'declined') {
        consistent = false;
        flag('a 402 for a card the provider accepts', key);
      }
      if (charge !== undefined) {
        consistent = false;
        flag('a stored 402 with a provider charge', key);
      }
      if (records !== undefined) {
        consistent = false;
        flag('a stored 402 with a record row', key);
      }
      if (orders === undefined) {
        consistent = false;
        flag("a stored 402 with no order (the 'order' step committed before the call)", key);
      }
      if (consistent) v.declined++;
      else v.mismatched++;
      continue;
    }
    v.mismatched++;
    if (clientSuccess) v.lost++;
    flag(`a final answer other than 201 or 402 (${flow.status})`, key);
  }
  for (const [what, keys] of examples)
    v.problems.push(`${what}: ${keys.length} (e.g. ${keys.slice(0, 5).join(', ')})`);
  return v;
}

function groupBy<T>(items: T[], by: (item: T) => string): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const item of items) {
    const list = map.get(by(item)) ?? [];
    list.push(item);
    map.set(by(item), list);
  }
  return map;
}

/** The flow's 201 body: `{ order, charge }`. */
function parseAnswer(text: string | undefined): { order?: string; charge?: string } | undefined {
  if (text === undefined) return undefined;
  try {
    const body = JSON.parse(text) as { order?: unknown; charge?: unknown };
    return { order: String(body.order), charge: String(body.charge) };
  } catch {
    return undefined;
  }
}
