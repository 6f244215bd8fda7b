/**
 * The chaos harness's handler-fault plan and checker (chaos/consumer/handler-faults.ts,
 * chaos/consumer/plan.ts, chaos/consumer/checker.ts): every planned fault has an expected end, and the
 * checker calls a key lost when it ends neither applied nor dead-lettered with its code.
 */
import { describe, expect, it } from '@jest/globals';
import { check, type FinalState } from '../../../chaos/consumer/checker.js';
import { faultLabel, HANDLER_FAULT_KINDS } from '../../../chaos/consumer/handler-faults.js';
import { makePlan, type ChaosBody, type Plan } from '../../../chaos/consumer/plan.js';
import { Rng } from '../../../kit/rng.js';

const plan = (count: number, seed = 7): Plan =>
  makePlan(new Rng(seed), 400, 0.25, 4, { count, kinds: HANDLER_FAULT_KINDS });

/** The state of a perfect run of `p`: every logical key once, every dead letter with its first code. */
function perfect(p: Plan): FinalState {
  const counters = new Map(p.keys.map((k) => [k, 1]));
  return {
    counters,
    ledger: new Map(counters),
    ledgerRows: p.keys.length,
    deadLetters: [...p.deadLetters].map(([key, d]) => ({ key, code: d.codes[0] })),
    hotTotal: 2 * p.hotKeys,
    quiescent: true,
  };
}

describe('handler fault plan', () => {
  it('spreads the faults evenly over every kind, transient and permanent, with whole hot pairs', () => {
    const p = plan(16);
    const labels = p.faults.map((f) => faultLabel(f.fault)).sort();
    expect(labels).toEqual(
      [
        'backend-killed/other-swallow',
        'backend-killed/self-throw',
        'deferred/permanent',
        'deferred/permanent',
        'deferred/transient',
        'deferred/transient',
        'downstream/permanent',
        'downstream/transient',
        'floating/permanent',
        'floating/transient',
        'serialization/swallow',
        'serialization/throw',
        'swallow/permanent',
        'swallow/permanent',
        'swallow/transient',
        'swallow/transient',
      ].sort(),
    );
    expect(p.hotKeys).toBe(2);
  });

  it('expects permanent faults dead-lettered with the spec codes and everything else applied', () => {
    const p = plan(16);
    const expected = Object.fromEntries(
      p.faults.map((f) => [
        faultLabel(f.fault),
        f.expected.end === 'applied' ? 'applied' : f.expected.codes.join('|'),
      ]),
    );
    expect(expected).toEqual({
      'swallow/transient': 'applied',
      'swallow/permanent': 'EO_TX_ABORTED',
      'deferred/transient': 'applied',
      'deferred/permanent': 'EO_COMMIT_FAILED',
      'downstream/transient': 'applied',
      'downstream/permanent': 'EO_HANDLER',
      'floating/transient': 'applied',
      'floating/permanent': 'EO_TX_CONTROL',
      'backend-killed/self-throw': 'applied',
      'backend-killed/other-swallow': 'applied',
      'serialization/throw': 'applied',
      'serialization/swallow': 'applied',
    });
    // Applied ones are logical keys; dead-lettered ones are keys of their own, expected there.
    const logical = new Set(p.keys);
    for (const f of p.faults) {
      if (f.expected.end === 'applied') expect(logical.has(f.key)).toBe(true);
      else expect(p.deadLetters.get(f.key)?.codes).toEqual(f.expected.codes);
    }
    expect(p.deadLetters.size).toBe(4 + 6);
  });

  it('puts each fault in the body of every send of its key, duplicates included', () => {
    const p = plan(24);
    const faults = new Map(p.faults.map((f) => [f.key, f.fault]));
    for (const send of p.sends) {
      if (send.key.startsWith('poison-')) continue;
      const body = JSON.parse(send.body) as ChaosBody;
      expect(body.fault).toEqual(faults.get(send.key));
    }
  });

  it('sends the two members of a hot pair close together, in opposite or the same order', () => {
    const p = plan(40);
    const hot = p.faults.filter((f) => f.fault.kind === 'serialization');
    const pairs = new Map<number, typeof hot>();
    for (const f of hot)
      if (f.fault.kind === 'serialization')
        pairs.set(f.fault.pair, [...(pairs.get(f.fault.pair) ?? []), f]);
    expect(pairs.size).toBeGreaterThanOrEqual(2);
    for (const [pair, [a, b]] of pairs) {
      if (a?.fault.kind !== 'serialization' || b?.fault.kind !== 'serialization')
        throw new Error('pair of two');
      const reversed = [...a.fault.rows].reverse();
      expect(b.fault.rows).toEqual(pair % 2 === 0 ? reversed : a.fault.rows);
      expect([a.fault.order, b.fault.order]).toEqual(
        pair % 2 === 0 ? ['opposite', 'opposite'] : ['same', 'same'],
      );
      expect([a.fault.then, b.fault.then]).toEqual(['throw', 'swallow']);
      // The first sends (original or duplicate) of the two members are close together.
      const first = (key: string) => p.sends.findIndex((s) => s.key === key);
      expect(first(b.key) - first(a.key)).toBeGreaterThan(0);
      expect(first(b.key) - first(a.key)).toBeLessThanOrEqual(20);
    }
  });

  it('plans nothing with a count of 0 and keeps the poison expectations', () => {
    const p = plan(0);
    expect(p.faults).toEqual([]);
    expect([...p.deadLetters.values()].map((d) => d.codes[0])).toEqual([
      'EO_HANDLER',
      'EO_BODY_PARSE',
      'EO_HANDLER',
      'EO_BODY_PARSE',
    ]);
  });
});

describe('checker with handler faults', () => {
  const p = plan(16);
  const transient = p.faults.find((f) => faultLabel(f.fault) === 'swallow/transient')!.key;
  const permanent = p.faults.find((f) => faultLabel(f.fault) === 'swallow/permanent')!.key;

  it('passes a perfect run', () => {
    const v = check(p, perfect(p));
    expect(v).toMatchObject({ problems: [], lost: 0, doubles: 0, deadLettered: 10 });
  });

  it('calls a swallowed transient fault acked without its effect lost', () => {
    const state = perfect(p);
    state.counters.delete(transient);
    state.ledger.delete(transient);
    state.ledgerRows--;
    const v = check(p, state);
    expect(v.lost).toBe(1);
    expect(v.problems.join('\n')).toContain(
      `never applied (acked without its effect): 1 (${transient})`,
    );
  });

  it('calls a permanent fault acked without a dead letter lost', () => {
    const state = perfect(p);
    state.deadLetters = state.deadLetters.filter((d) => d.key !== permanent);
    const v = check(p, state);
    expect({ lost: v.lost, deadLettered: v.deadLettered }).toEqual({ lost: 1, deadLettered: 9 });
  });

  it('rejects a dead letter with another code than the expected one', () => {
    const state = perfect(p);
    state.deadLetters = state.deadLetters.map((d) =>
      d.key === permanent ? { key: d.key, code: 'EO_HANDLER' } : d,
    );
    const v = check(p, state);
    expect(v.wrongCode).toBe(1);
    expect(v.problems.join('\n')).toContain('expected EO_TX_ABORTED');
  });

  it('counts missing keys of a run that timed out as unsettled, not lost', () => {
    const state = { ...perfect(p), quiescent: false };
    state.deadLetters = state.deadLetters.filter((d) => d.key !== permanent);
    expect(check(p, state)).toMatchObject({ lost: 0, unsettled: 1 });
  });

  it('calls a logical key dead-lettered instead of applied lost and misrouted', () => {
    const state = perfect(p);
    state.counters.delete(transient);
    state.ledger.delete(transient);
    state.ledgerRows--;
    state.deadLetters.push({ key: transient, code: 'EO_TX_ABORTED' });
    expect(check(p, { ...state, quiescent: false })).toMatchObject({ lost: 1, misrouted: 1 });
  });

  it('flags hot rows that do not add up to two per applied hot effect', () => {
    const v = check(p, { ...perfect(p), hotTotal: 2 * p.hotKeys + 1 });
    expect(v.problems.join('\n')).toContain('hot rows add up to');
  });

  it('flags a floating query that ran outside the transaction that applied its key', () => {
    const v = check(p, { ...perfect(p), floatingOutside: [transient] });
    expect(v.problems.join('\n')).toContain(`outside the transaction that applied its key: 1`);
  });

  it('reports order violations only when order was checked, and fails the run on one', () => {
    expect(check(p, perfect(p)).orderViolations).toBeUndefined();
    const ordered = check(p, { ...perfect(p), order: { violations: 0, examples: [] } });
    expect(ordered).toMatchObject({ orderViolations: 0, problems: [] });
    const order = { violations: 1, examples: ['partition 0: offset 3 after 7'] };
    const v = check(p, { ...perfect(p), order });
    expect(v.orderViolations).toBe(1);
    expect(v.problems.join('\n')).toContain(
      'out of offset order: 1 (partition 0: offset 3 after 7)',
    );
  });
});
