/**
 * A job that charges a customer through a payment API that honours Idempotency-Key
 * (effectively-once/http, Stripe …). The key was minted when the job was created and
 * is stored with it, so a retry of the whole job, even from another process tomorrow,
 * is the same operation; idempotentFetch retries the call itself on network errors,
 * timeouts, 408, 409, 429 and 5xx with that key and the same bytes.
 *
 *   PAYMENTS_URL=http://localhost:3000 npx tsx examples/client-retry.ts
 */
import { pathToFileURL } from 'node:url';
import { idempotentFetch, RetriesExhaustedError } from 'effectively-once/client';

/** A job as it sits in your queue or table: its key was minted once, when it was created. */
export interface ChargeJob {
  id: string;
  customerId: string;
  amountCents: number;
  idempotencyKey: string;
}

/** How the job ended. */
export type ChargeOutcome =
  | { status: 'charged'; chargeId: string; attempts: number; replayed: boolean }
  | { status: 'rejected'; httpStatus: number; problem: string }
  | { status: 'unknown'; attempts: number; key: string };

export interface ClientExampleOptions {
  /** Cancels the call, waits between attempts included. */
  signal: AbortSignal;
  /** Where PAYMENTS_URL comes from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** The job to run. Default: a new one. */
  job?: ChargeJob;
}

export async function main({
  signal,
  env = process.env,
  job = newJob('cus_42', 1999),
}: ClientExampleOptions): Promise<ChargeOutcome> {
  const url = new URL('/charges', required(env, 'PAYMENTS_URL'));
  try {
    const { response, attempts, replayed } = await idempotentFetch(
      url,
      { method: 'POST', headers: { accept: 'application/json' }, signal },
      {
        key: job.idempotencyKey,
        // Serialised once. Only what defines the charge: no timestamp or attempt number,
        // which would make a retry a different request (the server answers 422).
        json: { customerId: job.customerId, amountCents: job.amountCents, reference: job.id },
        attempts: 6,
        deadlineMs: 120_000, // well below the server's key lifetime (24 h)
        attemptTimeoutMs: 10_000,
        onRetry: ({ attempt, delayMs, status, error }) =>
          console.log(
            `job ${job.id}: attempt ${attempt} failed (${status ?? String(error)}), retrying in ${delayMs} ms`,
          ),
      },
    );
    if (!response.ok) {
      // 400, 422 …: the server's final word; retrying cannot change it.
      return { status: 'rejected', httpStatus: response.status, problem: await response.text() };
    }
    const charge = (await response.json()) as { id: string };
    console.log(
      `job ${job.id}: charged ${charge.id} after ${attempts} attempt(s)${replayed ? ', a replay of an earlier attempt' : ''}`,
    );
    return { status: 'charged', chargeId: charge.id, attempts, replayed };
  } catch (error) {
    // The charge may or may not exist: keep the job and its key, and run it again later.
    if (error instanceof RetriesExhaustedError)
      return { status: 'unknown', attempts: error.attempts, key: error.key };
    throw error;
  }
}

/** Mint the key with the job, before any attempt, and store both together. */
export function newJob(customerId: string, amountCents: number): ChargeJob {
  return { id: `job-${Date.now()}`, customerId, amountCents, idempotencyKey: crypto.randomUUID() };
}

function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  console.log(await main({ signal: stop.signal }));
}
