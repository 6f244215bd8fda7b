/** A client of the test provider (provider.ts), as a flow's `run.call` uses it. */
import type { Charge } from './provider.js';

/** The provider's non-2xx answer, or no answer in time: `status` is 0 for no answer. */
export class ProviderError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
  ) {
    super(`provider answered ${status} (${code})`);
    this.name = 'ProviderError';
  }
}

/** Options of {@link createCharge}. */
export interface ChargeCallOptions {
  /** Sent as `Idempotency-Key`: the flow's derived key. */
  idempotencyKey: string;
  /** Give up after this many ms (throws ProviderError 0 'timeout'). Default 5 000. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * POST /charges. A 2xx resolves with the charge; anything else throws a ProviderError
 * carrying the status (a 402 decline is final under steps' default classifier; a 5xx,
 * a timeout or a dropped answer are transient: the flow retries with the same key).
 */
export async function createCharge(
  providerUrl: string,
  request: { amount: number } & Record<string, unknown>,
  options: ChargeCallOptions,
): Promise<Charge> {
  const timeout = AbortSignal.timeout(options.timeoutMs ?? 5_000);
  const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
  let response: Response;
  try {
    response = await fetch(`${providerUrl}/charges`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': options.idempotencyKey },
      body: JSON.stringify(request),
      signal,
    });
  } catch (error) {
    throw Object.assign(new ProviderError(0, timeout.aborted ? 'timeout' : 'network'), {
      cause: error,
    });
  }
  const body = (await response.json().catch(() => ({}))) as {
    error?: { code?: string };
  } & Partial<Charge>;
  if (!response.ok) throw new ProviderError(response.status, body.error?.code ?? 'unknown');
  return body as Charge;
}
