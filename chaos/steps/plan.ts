import type { Rng } from '../../kit/rng.js';
import type { Call } from '../http/clients.js';

/**
 * How a provider call of a faulty operation fails (its first 1-2 calls; then the
 * provider answers normally, and a key it applied is answered from its record):
 * - `timeout`: applied, the answer held past the flow's call timeout;
 * - `5xx-before`: 503, nothing applied;
 * - `5xx-after`: applied, then 500 (the flow cannot tell it applied);
 * - `dropped`: applied, the connection closed without an answer.
 */
export const PROVIDER_FAULT_KINDS = ['timeout', '5xx-before', '5xx-after', 'dropped'] as const;
export type ProviderFaultKind = (typeof PROVIDER_FAULT_KINDS)[number];

/** What the client sends: the same bytes on every attempt of one operation. */
export interface OrderBody {
  /** The operation's id, carried to the provider as the charge's metadata. */
  op: string;
  customerId: string;
  amountCents: number;
  /** `declined`: the provider refuses this card (a final error). */
  card: 'ok' | 'declined';
}

/** One logical operation: one key, one body for its whole life. */
export interface Operation {
  key: string;
  body: OrderBody;
  /** Sent once by a client that walks away, whatever the answer: the completer finishes it. */
  abandoned: boolean;
  /** A second caller sends it at the same time (never for an abandoned one). */
  duplicated: boolean;
  /** Its first `fires` provider calls fail this way. */
  providerFault?: { kind: ProviderFaultKind; fires: number };
}

export interface StepsPlanOptions {
  operations: number;
  duplicateRatio: number;
  abandonRatio: number;
  declines: number;
  providerFaults: number;
}

/**
 * N operations: declines and provider faults on distinct operations chosen from the
 * seed (the faults spread evenly over the kinds), abandoned and duplicated ones drawn
 * by their shares, in a shuffled send order. At least a quarter of the faults (rounded
 * up) go to abandoned operations when there are enough: their one attempt stops at a recovery
 * point (503) and nobody retries, so only the completer can finish them.
 */
export function planOperations(rng: Rng, options: StepsPlanOptions): Operation[] {
  const n = options.operations;
  const abandoned = Array.from({ length: n }, () => rng.next() < options.abandonRatio);
  const duplicated = abandoned.map((a) => !a && rng.next() < options.duplicateRatio);
  const indices = rng.shuffle(Array.from({ length: n }, (_, i) => i));
  const declined = new Set(indices.slice(0, options.declines));
  const rest = indices.slice(options.declines);
  const orphans = rest.filter((i) => abandoned[i]).slice(0, Math.ceil(options.providerFaults / 4));
  const chosen = [...orphans, ...rest.filter((i) => !orphans.includes(i))].slice(
    0,
    options.providerFaults,
  );
  const faulty = new Map(
    chosen.map((index, j) => [
      index,
      {
        kind: PROVIDER_FAULT_KINDS[j % PROVIDER_FAULT_KINDS.length] as ProviderFaultKind,
        fires: rng.int(1, 2),
      },
    ]),
  );
  const ops = Array.from({ length: n }, (_, i): Operation => {
    const fault = faulty.get(i);
    return {
      key: `op-${i}`,
      body: {
        op: `op-${i}`,
        customerId: `cus_${i % 97}`,
        amountCents: 100 + ((i * 7919) % 10_000),
        card: declined.has(i) ? 'declined' : 'ok',
      },
      abandoned: abandoned[i] === true,
      duplicated: duplicated[i] === true,
      ...(fault && { providerFault: fault }),
    };
  });
  return rng.shuffle(ops);
}

/** The steps endpoint: `POST /orders`, the body as JSON. */
export const ORDERS_PATH = '/orders';

/** An operation as chaos/http's callers send it. */
export function operationCall(op: Operation): Call {
  return {
    id: op.key,
    key: op.key,
    server: 'payments',
    path: ORDERS_PATH,
    headers: {},
    json: op.body,
    duplicated: op.duplicated,
  };
}
