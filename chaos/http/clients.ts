import pLimit from 'p-limit';
import { idempotentFetch, RetriesExhaustedError } from 'effectively-once/client';
import type { Rng } from '../rng.js';

/** One logical payment: its key, whose it is, and the bytes every attempt sends. */
export interface Payment {
  key: string;
  tenant: string;
  body: { customerId: string; amountCents: number };
  /** A second caller sends it too, at the same time (same key, same bytes). */
  duplicated: boolean;
}

/** A final answer a caller got for its payment. */
export interface Answer {
  status: number;
  body: string;
  location: string | null;
  contentType: string | null;
  replayed: boolean;
}

/** What the callers of one payment saw. */
export interface PaymentLog {
  answers: Answer[];
  /** Attempts over every idempotentFetch call, of every caller of the payment. */
  attempts: number;
  /** Retries after a 409 / 425: the original was still in progress. */
  inProgress: number;
  /** idempotentFetch calls that gave up (RetriesExhaustedError) and were called again. */
  gaveUp: number;
  /** Callers that never got a final answer before the run's deadline. */
  unanswered: number;
}

export function planPayments(rng: Rng, n: number, duplicateRatio: number): Payment[] {
  return Array.from({ length: n }, (_, i) => ({
    key: `pay-${i}`,
    tenant: `t${i % 3}`,
    body: { customerId: `cus_${i % 97}`, amountCents: 100 + ((i * 7919) % 10_000) },
    duplicated: rng.next() < duplicateRatio,
  }));
}

export interface CallerOptions {
  /** Base URL the callers use (the fault proxy's). */
  url: string;
  clients: number;
  attemptTimeoutMs: number;
  /** Callers stop retrying at this instant (ms since epoch). */
  deadline: number;
  signal: AbortSignal;
  /** Told after each payment got its answers. */
  onSettled?: () => void;
}

/**
 * Runs every payment, `clients` at a time; a duplicated payment has two callers at
 * once. A caller is a job that must get its answer: when idempotentFetch gives up, the
 * job calls it again with the same key, as a job runner retrying later would, until
 * the run's deadline.
 */
export async function runPayments(
  payments: Payment[],
  options: CallerOptions,
): Promise<Map<string, PaymentLog>> {
  const logs = new Map<string, PaymentLog>();
  const limit = pLimit(options.clients);
  await Promise.all(
    payments.map((payment) =>
      limit(async () => {
        const log: PaymentLog = {
          answers: [],
          attempts: 0,
          inProgress: 0,
          gaveUp: 0,
          unanswered: 0,
        };
        logs.set(payment.key, log);
        const callers = payment.duplicated ? 2 : 1;
        await Promise.all(Array.from({ length: callers }, () => call(payment, log, options)));
        options.onSettled?.();
      }),
    ),
  );
  return logs;
}

async function call(payment: Payment, log: PaymentLog, options: CallerOptions): Promise<void> {
  while (Date.now() < options.deadline && !options.signal.aborted) {
    try {
      const result = await idempotentFetch(
        new URL('/charges', options.url),
        { method: 'POST', headers: { 'x-tenant': payment.tenant }, signal: options.signal },
        {
          key: payment.key,
          json: payment.body,
          attempts: 20,
          deadlineMs: Math.max(1, Math.min(60_000, options.deadline - Date.now())),
          attemptTimeoutMs: options.attemptTimeoutMs,
          backoff: { initialMs: 50, maxMs: 1000 },
          onRetry: ({ status }) => {
            log.attempts++;
            if (status === 409 || status === 425) log.inProgress++;
          },
        },
      );
      log.attempts++;
      const { response } = result;
      let body: string;
      try {
        body = await response.text();
      } catch {
        // The connection died under the body (a kill mid-response): not an answer yet.
        continue;
      }
      log.answers.push({
        status: response.status,
        body,
        location: response.headers.get('location'),
        contentType: response.headers.get('content-type'),
        replayed: result.replayed,
      });
      return;
    } catch (error) {
      if (options.signal.aborted) break;
      if (!(error instanceof RetriesExhaustedError)) throw error;
      log.attempts++; // the last attempt: onRetry counted the others
      log.gaveUp++;
    }
  }
  log.unanswered++;
}
