/**
 * The steps chaos target's plan and checker (chaos/steps/plan.ts, checker.ts, args.ts):
 * the plan is the seed's and keeps declines and provider faults apart; the checker
 * passes a perfect run and calls each violation by its name (a provider charge or a DB
 * effect twice, an answered success whose charge is missing, a flow left unfinished, a
 * stored answer that names another charge than the provider's, a 402 with a charge).
 */
import { describe, expect, it } from '@jest/globals';
import { Rng } from '../../../kit/rng.js';
import { parseStepsChaosArgs } from '../../../chaos/steps/args.js';
import type { Answer, PaymentLog } from '../../../chaos/http/clients.js';
import {
  checkSteps,
  type FlowRow,
  type ProviderCharge,
  type StepsCheckInput,
} from '../../../chaos/steps/checker.js';
import type { DbEffects } from '../../../chaos/steps/db.js';
import { planOperations, PROVIDER_FAULT_KINDS, type Operation } from '../../../chaos/steps/plan.js';

const OPTIONS = {
  operations: 40,
  duplicateRatio: 0.2,
  abandonRatio: 0.2,
  declines: 4,
  providerFaults: 8,
};

function answer(status: number, body: unknown, replayed = false): Answer {
  return {
    status,
    body: JSON.stringify(body),
    location: null,
    contentType: 'application/json',
    chaos: null,
    omitted: null,
    replayed,
  };
}

/** The state a correct library leaves: every operation finished, its effects once. */
function perfect(ops: Operation[]): StepsCheckInput {
  const effects: DbEffects = { orders: new Map(), records: new Map() };
  const charges: ProviderCharge[] = [];
  const flows: FlowRow[] = [];
  const logs = new Map<string, PaymentLog>();
  const replayed = new Map<string, Answer>();
  ops.forEach((op, i) => {
    const order = String(1000 + i);
    const charge = `ch_${i}`;
    const declined = op.body.card === 'declined';
    effects.orders.set(op.key, {
      ids: [order],
      chargeIds: [declined ? null : charge],
      orderIds: [order],
    });
    const final = declined
      ? answer(402, { status: 402, step: 'charge' })
      : answer(201, { order, charge });
    if (!declined) {
      effects.records.set(op.key, { ids: [String(i)], chargeIds: [charge], orderIds: [order] });
      charges.push({
        id: charge,
        idempotencyKey: `eo_${i}`,
        op: op.key,
        amountCents: op.body.amountCents,
      });
    }
    flows.push({ key: op.key, status: final.status });
    replayed.set(op.key, { ...final, replayed: true });
    if (!op.abandoned)
      logs.set(op.key, {
        answers: op.duplicated ? [final, { ...final, replayed: true }] : [final],
        attempts: 1,
        inProgress: 0,
        gaveUp: 0,
        unanswered: 0,
      });
  });
  return {
    ops,
    logs,
    abandoned: new Map(),
    effects,
    charges,
    chargesAfter: [...charges],
    flows,
    replayed,
    effectsUnchanged: true,
  };
}

const ops = planOperations(new Rng(11), OPTIONS);
const opOf = (card: 'ok' | 'declined', abandoned = false): Operation => {
  const op = ops.find((o) => o.body.card === card && o.abandoned === abandoned);
  if (op === undefined) throw new Error('the plan has no such operation');
  return op;
};

describe('the steps chaos plan', () => {
  it('is the seed’s, with declines and provider faults on distinct operations', () => {
    expect(planOperations(new Rng(11), OPTIONS)).toEqual(ops);
    expect(ops.filter((o) => o.body.card === 'declined')).toHaveLength(4);
    const faulty = ops.filter((o) => o.providerFault !== undefined);
    expect(faulty).toHaveLength(8);
    expect(faulty.some((o) => o.body.card === 'declined')).toBe(false);
    expect(new Set(faulty.map((o) => o.providerFault?.kind))).toEqual(
      new Set(PROVIDER_FAULT_KINDS),
    );
    expect(ops.some((o) => o.abandoned && o.duplicated)).toBe(false);
  });

  it('gives at least a quarter of the provider faults to abandoned operations: the completer’s work', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const faulty = planOperations(new Rng(seed), OPTIONS).filter(
        (o) => o.providerFault !== undefined,
      );
      const orphans = faulty.filter((o) => o.abandoned).length;
      expect({ seed, enough: orphans >= Math.ceil(faulty.length / 4) }).toEqual({
        seed,
        enough: true,
      });
    }
  });

  it('refuses more declines and faults than operations', () => {
    expect(() =>
      parseStepsChaosArgs([
        '--target',
        'steps',
        '--operations',
        '10',
        '--declines',
        '6',
        '--provider-faults',
        '6',
      ]),
    ).toThrow(/--declines \+ --provider-faults/);
  });
});

describe('the steps chaos checker', () => {
  it('passes a perfect run', () => {
    const v = checkSteps(perfect(ops));
    expect(v.problems).toEqual([]);
    expect(v).toMatchObject({ doubles: 0, lost: 0, unfinished: 0, mismatched: 0 });
    expect(v.completed + v.declined).toBe(ops.length);
    expect(v.declined).toBe(4);
    expect(v.replaysChecked).toBe(ops.length);
  });

  it('counts a provider charge applied twice for one operation (an unstable derived key)', () => {
    const input = perfect(ops);
    const op = opOf('ok');
    const first = input.charges.find((c) => c.op === op.key)!;
    input.charges.push({ ...first, id: 'ch_again', idempotencyKey: 'eo_other' });
    const v = checkSteps(input);
    expect(v.doubles).toBe(1);
    expect(v.problems.join()).toMatch(/charged twice by the provider: 1/);
  });

  it('counts a DB step applied twice', () => {
    const input = perfect(ops);
    const op = opOf('ok');
    const orders = input.effects.orders.get(op.key)!;
    input.effects.orders.set(op.key, {
      ids: [...orders.ids, '9999'],
      chargeIds: [...orders.chargeIds, null],
      orderIds: [...orders.orderIds, '9999'],
    });
    expect(checkSteps(input)).toMatchObject({ doubles: 1 });
  });

  it('counts a loss: a stored 201 the provider has no charge for', () => {
    const input = perfect(ops);
    const op = opOf('ok');
    input.charges = input.charges.filter((c) => c.op !== op.key);
    input.chargesAfter = [...input.charges];
    const v = checkSteps(input);
    expect(v.lost).toBe(1);
    expect(v.problems.join()).toMatch(/a stored 201 with no provider charge/);
  });

  it('counts a flow left unfinished, and the success its caller got as lost', () => {
    const input = perfect(ops);
    const op = opOf('ok');
    input.flows = input.flows.map((f) => (f.key === op.key ? { ...f, status: null } : f));
    const v = checkSteps(input);
    expect(v.unfinished).toBe(1);
    expect(v.lost).toBe(1);
  });

  it('counts a stored answer naming another charge than the provider’s', () => {
    const input = perfect(ops);
    const op = opOf('ok');
    const charge = input.charges.find((c) => c.op === op.key)!;
    charge.id = 'ch_elsewhere';
    const v = checkSteps(input);
    expect(v.mismatched).toBe(1);
    expect(v.problems.join()).toMatch(/names another order or charge than the provider's/);
  });

  it('counts a declined card that the provider charged anyway', () => {
    const input = perfect(ops);
    const op = opOf('declined');
    input.charges.push({ id: 'ch_x', idempotencyKey: 'eo_x', op: op.key, amountCents: 1 });
    input.chargesAfter = [...input.charges];
    const v = checkSteps(input);
    expect(v.mismatched).toBe(1);
    expect(v.problems.join()).toMatch(/a stored 402 with a provider charge/);
  });

  it('counts an answer a caller got that differs from the stored one', () => {
    const input = perfect(ops);
    const op = opOf('ok');
    input.logs.get(op.key)!.answers[0] = answer(201, { order: '1', charge: 'ch_1' });
    expect(checkSteps(input).mismatched).toBe(1);
  });

  it('takes an abandoned operation that never arrived, and nothing else without a key row', () => {
    const input = perfect(ops);
    const gone = opOf('ok', true);
    input.flows = input.flows.filter((f) => f.key !== gone.key);
    input.effects.orders.delete(gone.key);
    input.effects.records.delete(gone.key);
    input.charges = input.charges.filter((c) => c.op !== gone.key);
    input.chargesAfter = [...input.charges];
    input.replayed.delete(gone.key);
    expect(checkSteps(input)).toMatchObject({ neverArrived: 1, lost: 0, mismatched: 0 });
    // The same for an operation whose client retries is a loss.
    const sent = opOf('ok');
    input.flows = input.flows.filter((f) => f.key !== sent.key);
    input.effects.orders.delete(sent.key);
    input.effects.records.delete(sent.key);
    input.charges = input.charges.filter((c) => c.op !== sent.key);
    input.chargesAfter = [...input.charges];
    expect(checkSteps(input)).toMatchObject({ neverArrived: 1, lost: 1 });
  });
});
