import type { Rng } from '../../kit/rng.js';
import type { Call } from './clients.js';

/**
 * Handler faults of the HTTP target: handlers written the way people write Express and
 * Fastify handlers, and endpoints configured the way people configure them. Each kind is
 * a class of its own (`--fault-kinds`), so each can be shown alone:
 *
 * - `stream` (Express): `res.flushHeaders()`, then the effect and more writes through
 *   `ctx.tx`, then `res.write()`s and `res.end()`; every other one fails its COMMIT.
 * - `callback` (Fastify): not async; `reply.send()` later, from a callback. `tx-first`
 *   starts its `ctx.tx` work at once and leaves a query running after it answers;
 *   `side-first` asks another connection first and fails its first COMMIT.
 * - `throw-after` (Express): `res.json()`, then throws (on its first runs), or writes
 *   through `ctx.tx` after answering (and fails its first COMMIT every other time).
 * - `deferred`: a DEFERRABLE INITIALLY DEFERRED foreign key violated: COMMIT fails.
 * - `backend-killed`: `pg_terminate_backend` of the handler's own backend mid-request.
 * - `ignore-signal`: sleeps past `timeoutMs`, ignoring `ctx.signal`, then writes.
 * - `saturated-pool` (Express): an endpoint whose pool has one connection, its handler
 *   stuck in `pg_sleep` past `timeoutMs`: the timeout's cancel has no free connection.
 * - `floating`: answers and returns, then writes through `ctx.tx` from a timer.
 * - `webhook-scope`: two tenants' accounts at one sender, which numbers deliveries per
 *   account: pairs with the same delivery id, scoped per tenant by the adapter.
 * - `long-names` (Express): two endpoints on two key tables whose names share 56 bytes;
 *   pairs with the same key, scope, route and bytes, one on each.
 */
export type HttpFaultKind =
  | 'stream'
  | 'callback'
  | 'throw-after'
  | 'deferred'
  | 'backend-killed'
  | 'ignore-signal'
  | 'saturated-pool'
  | 'floating'
  | 'webhook-scope'
  | 'long-names';

export const HTTP_FAULT_KINDS: readonly HttpFaultKind[] = [
  'stream',
  'callback',
  'throw-after',
  'deferred',
  'backend-killed',
  'ignore-signal',
  'saturated-pool',
  'floating',
  'webhook-scope',
  'long-names',
];

/** Kinds planned in pairs of operations that must not meet. */
const PAIRED: ReadonlySet<HttpFaultKind> = new Set(['webhook-scope', 'long-names']);
const EXPRESS_ONLY: ReadonlySet<HttpFaultKind> = new Set([
  'stream',
  'throw-after',
  'saturated-pool',
  'long-names',
]);

/**
 * What the handler does, carried in the body (the same bytes on every retry). `fires`:
 * on how many of the operation's first runs its fault fires (counted in the fault log,
 * so a retry after a kill or an outage does not reset it): for `stream`, `callback`,
 * `throw-after`/`write` and `floating` the fault is a failed COMMIT (deferred FK).
 */
export interface FaultSpec {
  kind: HttpFaultKind;
  fires: number;
  variant?: 'throw' | 'write' | 'tx-first' | 'side-first' | 'self-throw' | 'other-swallow';
}

/** One planned faulty operation. */
export interface FaultOp {
  id: string;
  kind: HttpFaultKind;
  framework: 'express' | 'fastify';
  spec: FaultSpec;
  call: Call;
  /** The answer it must end with: status, and the effect rows it must have committed. */
  status: number;
  parts: readonly string[];
  /** The other operation of a pair. */
  partner?: string;
}

/** Lines of the `stream` kind's body after its first; then `end`. */
export const STREAM_LINES = 3;

/** The body a `stream` run writes, in full. */
export function streamBody(op: string, run: number): string {
  const lines = Array.from({ length: STREAM_LINES }, (_, i) => `line ${i}\n`).join('');
  return `op=${op} run=${run}\n${lines}end\n`;
}

/** The run's handler timeout on the fault routes; `ignore-signal` sleeps past it. */
export const FAULT_TIMEOUT_MS = 1000;

/**
 * About `count` operations (at least 2 per kind, pairs whole), spread evenly over
 * `kinds`, frameworks alternating where both apply.
 */
export function planFaultOps(
  rng: Rng,
  count: number,
  kinds: readonly HttpFaultKind[],
  duplicateRatio: number,
): FaultOp[] {
  if (count === 0 || kinds.length === 0) return [];
  const perKind = Math.max(2, Math.ceil(count / kinds.length));
  const ops: FaultOp[] = [];
  for (const kind of kinds) {
    if (PAIRED.has(kind)) {
      for (let j = 0; j < Math.ceil(perKind / 2); j++) ops.push(...pair(kind, j));
      continue;
    }
    for (let j = 0; j < perKind; j++) {
      const framework = EXPRESS_ONLY.has(kind)
        ? 'express'
        : kind === 'callback'
          ? 'fastify'
          : j % 2 === 0
            ? 'express'
            : 'fastify';
      const spec = specOf(kind, j);
      const id = `${kind}-${j}`;
      const timed = kind === 'ignore-signal' || kind === 'saturated-pool';
      ops.push({
        id,
        kind,
        framework,
        spec,
        status: kind === 'stream' ? 200 : 201,
        parts: partsOf(spec),
        call: {
          id,
          key: id,
          server: 'faults',
          path: `/${framework}/${kind}`,
          headers: { 'x-tenant': `t${j % 3}`, 'x-chaos-op': id },
          json: { spec, amountCents: 100 + j },
          duplicated: rng.next() < duplicateRatio,
          // Its answer must come at timeoutMs; the check needs the caller to wait for it.
          ...(timed ? { attemptTimeoutMs: 10_000 } : {}),
        },
      });
    }
  }
  return ops;
}

function specOf(kind: HttpFaultKind, j: number): FaultSpec {
  const fires = 1 + (j % 2);
  switch (kind) {
    case 'stream':
    case 'floating':
      return { kind, fires: j % 2 };
    case 'callback':
      return j % 2 === 0
        ? { kind, fires: 0, variant: 'tx-first' }
        : { kind, fires: 1, variant: 'side-first' };
    case 'throw-after':
      // Every pair of operations: a throw (on 1 or 2 runs), a write (failing 0 or 1 COMMIT).
      return j % 2 === 0
        ? { kind, fires: 1 + ((j >> 1) % 2), variant: 'throw' }
        : { kind, fires: (j >> 1) % 2, variant: 'write' };
    case 'backend-killed':
      return { kind, fires, variant: j % 2 === 0 ? 'self-throw' : 'other-swallow' };
    case 'saturated-pool':
      return { kind, fires: 1 };
    default:
      return { kind, fires };
  }
}

/** Effect rows a committed run writes (`main` first); `floating` may add one more. */
function partsOf(spec: FaultSpec): readonly string[] {
  if (spec.kind === 'stream') return ['main', 'tail'];
  if (spec.kind === 'throw-after' && spec.variant === 'write') return ['main', 'after-answer'];
  return ['main'];
}

/**
 * Two operations that share what the endpoints must keep apart: a webhook delivery id
 * from two tenants' accounts, or a key (same scope, route and bytes) on two key tables.
 */
function pair(kind: HttpFaultKind, j: number): FaultOp[] {
  const sides = kind === 'webhook-scope' ? ['acme', 'bolt'] : ['alpha', 'bravo'];
  const ids = sides.map((side) => `${kind}-${j}-${side}`);
  return sides.map((side, s) => {
    const id = ids[s]!;
    const framework = kind === 'long-names' || j % 2 === 0 ? 'express' : 'fastify';
    const spec: FaultSpec = { kind, fires: 0 };
    const headers: Record<string, string> =
      kind === 'webhook-scope'
        ? {
            'x-tenant': side,
            'x-chaos-op': id,
            'x-delivery-id': `evt-${j}`,
            'x-test-signature': 'ok',
          }
        : { 'x-tenant': 't0', 'x-chaos-op': id };
    return {
      id,
      kind,
      framework,
      spec,
      status: kind === 'webhook-scope' ? 200 : 201,
      parts: ['main'],
      partner: ids[1 - s]!,
      call: {
        id,
        // Webhooks key on the delivery id; the header only names the operation.
        key: kind === 'webhook-scope' ? id : `order-${j}`,
        server: 'faults',
        path: kind === 'webhook-scope' ? `/${framework}/hooks` : `/express/long/${side}`,
        headers,
        json: { spec, amountCents: 500 + j + (kind === 'webhook-scope' ? s : 0) },
        duplicated: false,
      },
    };
  });
}

/**
 * The operations in the order the callers take them: the payments as planned, each
 * fault operation at a seeded place in the first half of them (their retries take
 * seconds: not at the very end, where nothing else runs meanwhile), a pair's second
 * right after its first, so they meet while both are fresh.
 */
export function interleave(rng: Rng, payments: Call[], ops: FaultOp[]): Call[] {
  const last = Math.floor(payments.length * 0.5);
  const at: number[] = [];
  ops.forEach((op, i) => {
    const second = i > 0 && op.partner === ops[i - 1]?.id;
    at.push(second ? at[i - 1]! : rng.int(0, last));
  });
  const sorted = ops
    .map((op, i) => ({ at: at[i]!, i, call: op.call }))
    .sort((a, b) => a.at - b.at || a.i - b.i);
  const out: Call[] = [];
  let next = 0;
  for (let p = 0; p <= payments.length; p++) {
    while (next < sorted.length && sorted[next]!.at === p) out.push(sorted[next++]!.call);
    if (p < payments.length) out.push(payments[p]!);
  }
  return out;
}
