/**
 * The test provider (kit/provider) as the steps chaos run uses it: in the harness's own
 * process, so it outlives every server kill and its record is the run's truth about
 * what was charged; its fault policy fires the plan's per operation: declines for the
 * declined cards, and the first 1-2 calls of each faulty operation fail as planned.
 *
 * The provider sees only the derived key, so the policy knows an operation by the key
 * the library derives for it (`derivedKey(scope, key, flow, 'charge', { schema })`) once `learn`
 * was given the door's scope and the flows table's schema (run.ts reads it from the first operation's key row).
 */
import { derivedKey } from 'effectively-once';
import { startProvider, type ProviderFault } from '../../kit/provider/provider.js';
import type { ProviderCharge } from './checker.js';
import { ORDER_FLOW } from './flow.js';
import type { Operation, ProviderFaultKind } from './plan.js';

/** The flow's outside call, whose derived key the provider sees. */
export const CHARGE_STEP = 'charge';

export interface ChaosProvider {
  /** Where the flows send their charges. */
  readonly url: string;
  /** The same provider: its faults are per attempt, so a later pass meets none of them. */
  readonly directUrl: string;
  /** Every charge the provider applied, one entry per application. */
  charges(): ProviderCharge[];
  /** Requests seen, and keys declined. */
  counts(): { requests: number; keys: number; declined: number };
  /** Maps every operation's derived key under the door's `scope` and flows `schema`. */
  learn(scope: string, schema: string): void;
  /** Requests with a key no operation derives (under the scope learnt): should stay 0. */
  unknownKeys(): number;
  /** Planned faults that fired: calls, operations, by kind. */
  faultsFired(): { calls: number; operations: number; byKind: Record<string, number> };
  close(): Promise<void>;
}

export async function startChaosProvider(options: {
  ops: Operation[];
  /** How long a `timeout` fault holds the answer (past the flow's call timeout). */
  holdMs: number;
}): Promise<ChaosProvider> {
  const byKey = new Map<string, Operation>();
  const unknown = new Set<string>();
  const provider = await startProvider();
  const keys = new Set<string>();
  const fired = new Map<string, number>();
  const firedByKind: Record<string, number> = {};
  let firedCalls = 0;
  const fault = (kind: ProviderFaultKind): ProviderFault => {
    switch (kind) {
      case 'timeout':
        return { kind: 'delay', delayMs: options.holdMs };
      case '5xx-before':
        return { kind: '5xx-before' };
      case '5xx-after':
        return { kind: '5xx-after' };
      case 'dropped':
        return { kind: 'drop-after' };
    }
  };
  provider.setPolicy((key, attempt) => {
    keys.add(key);
    const op = byKey.get(key);
    if (op === undefined) {
      unknown.add(key);
      return undefined;
    }
    if (op.body.card === 'declined') return { kind: 'decline' };
    const planned = op.providerFault;
    if (planned === undefined || attempt > planned.fires) return undefined;
    firedCalls++;
    fired.set(op.key, (fired.get(op.key) ?? 0) + 1);
    firedByKind[planned.kind] = (firedByKind[planned.kind] ?? 0) + 1;
    return fault(planned.kind);
  });
  return {
    url: provider.url,
    directUrl: provider.url,
    charges: () =>
      [...provider.appliedByKey()].flatMap(([key, times]) => {
        const charge = provider.charge(key);
        const entry: ProviderCharge = {
          id: charge?.id ?? '?',
          idempotencyKey: key,
          op: opOf(charge?.request) ?? '?',
          amountCents: charge?.amount ?? NaN,
        };
        // More than once under one key: deduplication broke, a double like any other.
        return Array.from({ length: times }, (_, i) => ({
          ...entry,
          id: i === 0 ? entry.id : `${entry.id}#${i + 1}`,
        }));
      }),
    counts: () => {
      let requests = 0;
      let declined = 0;
      for (const key of keys) {
        requests += provider.requests(key);
        if (provider.declined(key)) declined++;
      }
      return { requests, keys: keys.size, declined };
    },
    learn: (scope, schema) => {
      for (const op of options.ops)
        byKey.set(derivedKey(scope, op.key, ORDER_FLOW, CHARGE_STEP, { schema }), op);
    },
    unknownKeys: () => [...unknown].filter((k) => !byKey.has(k)).length,
    faultsFired: () => ({ calls: firedCalls, operations: fired.size, byKind: { ...firedByKind } }),
    close: () => provider.close(),
  };
}

/** The operation a charge request was made for: the flow's `metadata.op`. */
function opOf(request: Record<string, unknown> | undefined): string | undefined {
  const metadata = request?.['metadata'];
  if (typeof metadata !== 'object' || metadata === null) return undefined;
  const op = (metadata as Record<string, unknown>)['op'];
  return typeof op === 'string' ? op : undefined;
}
