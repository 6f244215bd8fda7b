/**
 * The HTTP chaos target's handler faults (chaos/http/fault-plan.ts, fault-checker.ts,
 * args.ts): the plan is the seed's, covers every kind with whole pairs, and the checker
 * calls each violation by its name (a double, a loss, a stray effect, an answer made for
 * another operation, a late answer) and passes a perfect run.
 */
import { describe, expect, it } from '@jest/globals';
import { Rng } from '../../../kit/rng.js';
import { parseHttpChaosArgs } from '../../../chaos/http/args.js';
import type { Answer, Call } from '../../../chaos/http/clients.js';
import { checkFaultOps, type FaultState } from '../../../chaos/http/fault-checker.js';
import type { EffectRow } from '../../../chaos/http/fault-db.js';
import {
  FAULT_TIMEOUT_MS,
  HTTP_FAULT_KINDS,
  interleave,
  planFaultOps,
  streamBody,
  type FaultOp,
} from '../../../chaos/http/fault-plan.js';

const plan = (count = 20, seed = 7): FaultOp[] =>
  planFaultOps(new Rng(seed), count, HTTP_FAULT_KINDS, 0.1);

/** The answer a correct server gives `op` for its committed run `run`. */
function answer(op: FaultOp, run: number, replayed = false): Answer {
  const stream = op.kind === 'stream';
  return {
    status: op.status,
    body: stream ? (replayed ? '' : streamBody(op.id, run)) : JSON.stringify({ op: op.id, run }),
    location: null,
    contentType: null,
    chaos: `${op.id} ${run}`,
    omitted: stream && replayed ? 'stream' : null,
    replayed,
  };
}

/** The state of a perfect run of `ops`: op i committed by run i + 1, in transaction i. */
function perfect(ops: FaultOp[]): FaultState {
  const effects: EffectRow[] = ops.flatMap((op, i) =>
    op.parts.map((part) => ({ op: op.id, run: i + 1, part, tx: String(1000 + i) })),
  );
  return {
    ops,
    logs: new Map(
      ops.map((op, i) => [
        op.id,
        { answers: [answer(op, i + 1)], attempts: 1, inProgress: 0, gaveUp: 0, unanswered: 0 },
      ]),
    ),
    effects,
    effectsAfter: effects,
    // Each op's fault fired on a run that rolled back (numbered past the committed ones).
    fired: new Map(ops.map((op, i) => [op.id, new Set([100 + i])])),
    replayed: new Map(ops.map((op, i) => [op.id, answer(op, i + 1, true)])),
    timings: [],
  };
}

describe('HTTP handler fault plan', () => {
  it('covers every kind, at least twice, pairs whole, on the frameworks each kind is about', () => {
    const ops = plan(20);
    const perKind = new Map<string, number>();
    for (const op of ops) perKind.set(op.kind, (perKind.get(op.kind) ?? 0) + 1);
    for (const kind of HTTP_FAULT_KINDS) expect(perKind.get(kind)).toBeGreaterThanOrEqual(2);
    for (const op of ops.filter((o) => o.partner !== undefined))
      expect(ops.find((o) => o.id === op.partner)?.partner).toBe(op.id);
    expect(new Set(ops.filter((o) => o.kind === 'callback').map((o) => o.framework))).toEqual(
      new Set(['fastify']),
    );
    expect(new Set(ops.filter((o) => o.kind === 'stream').map((o) => o.framework))).toEqual(
      new Set(['express']),
    );
    expect(new Set(ops.filter((o) => o.kind === 'deferred').map((o) => o.framework))).toEqual(
      new Set(['express', 'fastify']),
    );
    // A long-names pair: the same key and bytes on two endpoints; a webhook pair: one
    // delivery id from two tenants.
    const [alpha, bravo] = ops.filter((o) => o.kind === 'long-names');
    expect(alpha?.call.key).toBe(bravo?.call.key);
    expect(alpha?.call.json).toEqual(bravo?.call.json);
    expect(alpha?.call.path).not.toBe(bravo?.call.path);
    const [acme, bolt] = ops.filter((o) => o.kind === 'webhook-scope');
    expect(acme?.call.headers['x-delivery-id']).toBe(bolt?.call.headers['x-delivery-id']);
    expect(acme?.call.headers['x-tenant']).not.toBe(bolt?.call.headers['x-tenant']);
  });

  it('is the seed’s: the same seed, the same operations in the same order', () => {
    const payments: Call[] = Array.from({ length: 50 }, (_, i) => ({
      id: `pay-${i}`,
      key: `pay-${i}`,
      server: 'payments',
      path: '/charges',
      headers: {},
      json: {},
      duplicated: false,
    }));
    const order = (seed: number): string[] => {
      const rng = new Rng(seed);
      return interleave(rng, payments, planFaultOps(rng, 20, HTTP_FAULT_KINDS, 0.1)).map(
        (c) => c.id,
      );
    };
    expect(order(3)).toEqual(order(3));
    expect(order(3)).not.toEqual(order(4));
    const mixed = order(3);
    expect(mixed.filter((id) => id.startsWith('pay-'))).toEqual(payments.map((p) => p.id));
    // A pair's two operations go out one after the other.
    const first = mixed.indexOf('long-names-0-alpha');
    expect(mixed[first + 1]).toBe('long-names-0-bravo');
  });

  it('plans nothing with --handler-faults 0, and parses --fault-kinds', () => {
    expect(planFaultOps(new Rng(1), 0, HTTP_FAULT_KINDS, 0)).toEqual([]);
    const args = (...more: string[]) => parseHttpChaosArgs(['--target', 'http', ...more]);
    expect(args().faultKinds).toEqual(HTTP_FAULT_KINDS);
    expect(args('--payments', '500').handlerFaults).toBe(50);
    expect(args('--fault-kinds', 'stream,long-names').faultKinds).toEqual(['stream', 'long-names']);
    expect(() => args('--fault-kinds', 'stream,nope')).toThrow(/--fault-kinds/);
  });
});

describe('HTTP handler fault checker', () => {
  it('passes a perfect run', () => {
    const v = checkFaultOps(perfect(plan()));
    expect(v.problems).toEqual([]);
    const n = plan().length;
    expect([v.applied, v.replaysChecked]).toEqual([n, n]);
    const violations = [v.doubles, v.lost, v.crossScope, v.strayEffects, v.lateAnswers];
    expect([...violations, v.mismatched]).toEqual([0, 0, 0, 0, 0, 0]);
  });

  it('calls a missing effect or part lost, and rows of two runs a double', () => {
    const ops = plan();
    const state = perfect(ops);
    const stream = ops.find((o) => o.kind === 'stream')!;
    const deferred = ops.find((o) => o.kind === 'deferred')!;
    const floating = ops.find((o) => o.kind === 'floating')!;
    const main = state.effects.find((r) => r.op === floating.id)!;
    state.effects = [
      ...state.effects.filter(
        (r) => r.op !== deferred.id && !(r.op === stream.id && r.part === 'tail'),
      ),
      { ...main, run: main.run + 50, tx: '9' },
    ];
    state.effectsAfter = state.effects;
    const v = checkFaultOps(state);
    expect({ lost: v.lost, doubles: v.doubles }).toEqual({ lost: 2, doubles: 1 });
  });

  it('calls an effect of a run whose fault fired, or written outside its transaction, stray', () => {
    const ops = plan();
    const state = perfect(ops);
    const [a, b] = ops.filter((o) => o.kind === 'throw-after');
    state.fired.set(a!.id, new Set([state.effects.find((r) => r.op === a!.id)!.run]));
    // b's second part committed on its own (autocommit after the claim's COMMIT).
    state.effects = state.effects.map((r) =>
      r.op === b!.id && r.part !== 'main' ? { ...r, tx: '77' } : r,
    );
    state.effectsAfter = state.effects;
    expect(b!.parts.length).toBe(2);
    expect(checkFaultOps(state).strayEffects).toBe(2);
  });

  it('counts an answer made for another operation as cross-scope, once per operation', () => {
    const ops = plan();
    const state = perfect(ops);
    const [acme, bolt] = ops.filter((o) => o.kind === 'webhook-scope');
    const stolen = state.logs.get(acme!.id)!.answers[0]!;
    state.logs.get(bolt!.id)!.answers = [stolen];
    state.replayed.set(bolt!.id, { ...stolen, replayed: true });
    const v = checkFaultOps(state);
    expect(v.crossScope).toBe(1);
    expect(v.mismatched).toBe(1);
  });

  it('wants a stream whole, or as a replay the stored nothing', () => {
    const ops = plan();
    const stream = ops.find((o) => o.kind === 'stream')!;
    const state = perfect(ops);
    const got = state.logs.get(stream.id)!.answers[0]!;
    expect(checkFaultOps(state).mismatched).toBe(0);
    got.body = got.body.replace('end\n', '');
    expect(checkFaultOps(state).mismatched).toBe(1);
  });

  it('flags answers from a run that did not commit, and a replay that ran the handler again', () => {
    const ops = plan();
    const state = perfect(ops);
    const op = ops.find((o) => o.kind === 'callback')!;
    state.logs.get(op.id)!.answers = [{ ...answer(op, 999), status: 200, chaos: null }];
    const after = ops.find((o) => o.kind === 'deferred')!;
    state.effectsAfter = [...state.effects, { op: after.id, run: 555, part: 'main', tx: '5' }];
    const v = checkFaultOps(state);
    expect(v.mismatched).toBe(1);
    expect(v.problems.join('\n')).toMatch(/a final answer 200, not 201/);
    expect(v.problems.join('\n')).toMatch(/the direct replay changed its effect: 1/);
  });

  it('calls a timed-out run answered past timeoutMs + 2 s late, answered or not', () => {
    const state = perfect(plan());
    state.timings = [
      { op: 'ignore-signal-0', run: 1, status: 503, answered: true, ms: FAULT_TIMEOUT_MS + 300 },
      { op: 'saturated-pool-0', run: 2, status: 503, answered: true, ms: FAULT_TIMEOUT_MS + 5000 },
      {
        op: 'saturated-pool-1',
        run: 3,
        status: null,
        answered: false,
        ms: FAULT_TIMEOUT_MS + 9000,
      },
    ];
    expect(checkFaultOps(state).lateAnswers).toBe(2);
  });
});
