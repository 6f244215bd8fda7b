/**
 * The flow's client of the test provider (kit/provider): one charge per request, with
 * the derived key as its Idempotency-Key and the operation as its metadata. An answer
 * other than 2xx throws a {@link ProviderError} carrying the status, which the
 * library's default classifier reads: 402 (declined) is final, 5xx transient.
 */
import type { OrderBody } from './plan.js';

/** What the flow records of a charge. */
export interface CreatedCharge {
  id: string;
}

/** The provider answered other than 2xx. */
export class ProviderError extends Error {
  constructor(
    readonly status: number,
    text: string,
  ) {
    super(`provider answered ${status}: ${text.slice(0, 200)}`);
    this.name = 'ProviderError';
  }
}

/** The header the provider fault proxy keys its per-operation faults on. */
export const OP_HEADER = 'x-chaos-op';

export async function createCharge(
  base: string,
  key: string,
  input: OrderBody,
  options: { signal: AbortSignal },
): Promise<CreatedCharge> {
  const response = await fetch(new URL('/charges', base), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key, [OP_HEADER]: input.op },
    body: JSON.stringify({
      amountCents: input.amountCents,
      customerId: input.customerId,
      card: input.card,
      metadata: { op: input.op },
    }),
    signal: options.signal,
  });
  const text = await response.text();
  if (!response.ok) throw new ProviderError(response.status, text);
  const body = JSON.parse(text) as { id?: unknown };
  if (typeof body.id !== 'string' && typeof body.id !== 'number')
    throw new Error(`provider answered without a charge id: ${text.slice(0, 200)}`);
  return { id: String(body.id) };
}
