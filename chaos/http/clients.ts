import pLimit from 'p-limit';
import { idempotentFetch, RetriesExhaustedError } from 'effectively-once/client';
import type { Rng } from '../../kit/rng.js';

/** One logical payment: its key, whose it is, and the bytes every attempt sends. */
export interface Payment {
  key: string;
  tenant: string;
  body: { customerId: string; amountCents: number };
  /** A second caller sends it too, at the same time (same key, same bytes). */
  duplicated: boolean;
}

/**
 * One logical operation as its callers send it: the same key, headers and bytes on
 * every attempt, to the payment API or to the handler-fault routes (fault-plan.ts).
 */
export interface Call {
  /** Unique per operation: the payment's key, or the fault operation's id. */
  id: string;
  /** The idempotency key (two fault operations may share one, on two endpoints). */
  key: string;
  server: 'payments' | 'faults';
  path: string;
  headers: Record<string, string>;
  json: unknown;
  duplicated: boolean;
  /** idempotentFetch's attemptTimeoutMs, when not the run's. */
  attemptTimeoutMs?: number;
}

/** A final answer a caller got for its operation. */
export interface Answer {
  status: number;
  body: string;
  location: string | null;
  contentType: string | null;
  /** `x-chaos-answer`: the fault operation and handler run that made the answer. */
  chaos: string | null;
  /** `Idempotent-Body-Omitted` of a replay. */
  omitted: string | null;
  replayed: boolean;
}

/** What the callers of one operation saw. */
export interface PaymentLog {
  answers: Answer[];
  /** Attempts over every idempotentFetch call, of every caller of the operation. */
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

/** A payment as its callers send it: `POST /charges`, scoped by `x-tenant`. */
export function paymentCall(payment: Payment): Call {
  return {
    id: payment.key,
    key: payment.key,
    server: 'payments',
    path: '/charges',
    headers: { 'x-tenant': payment.tenant },
    json: payment.body,
    duplicated: payment.duplicated,
  };
}

export interface CallerOptions {
  /** Base URLs the callers use (the fault proxies'). */
  urls: Record<Call['server'], string>;
  clients: number;
  attemptTimeoutMs: number;
  /** Callers stop retrying at this instant (ms since epoch). */
  deadline: number;
  signal: AbortSignal;
  /** Told after each operation got its answers. */
  onSettled?: () => void;
}

/**
 * Runs every operation, `clients` at a time; a duplicated one has two callers at once.
 * A caller is a job that must get its answer: when idempotentFetch gives up, the job
 * calls it again with the same key, as a job runner retrying later would, until the
 * run's deadline. Logs by operation id.
 */
export async function runPayments(
  calls: Call[],
  options: CallerOptions,
): Promise<Map<string, PaymentLog>> {
  const logs = new Map<string, PaymentLog>();
  const limit = pLimit(options.clients);
  await Promise.all(
    calls.map((c) =>
      limit(async () => {
        const log: PaymentLog = {
          answers: [],
          attempts: 0,
          inProgress: 0,
          gaveUp: 0,
          unanswered: 0,
        };
        logs.set(c.id, log);
        const callers = c.duplicated ? 2 : 1;
        await Promise.all(Array.from({ length: callers }, () => call(c, log, options)));
        options.onSettled?.();
      }),
    ),
  );
  return logs;
}

async function call(c: Call, log: PaymentLog, options: CallerOptions): Promise<void> {
  while (Date.now() < options.deadline && !options.signal.aborted) {
    try {
      const answer = await send(c, options.urls[c.server], {
        attempts: 20,
        deadlineMs: Math.max(1, Math.min(60_000, options.deadline - Date.now())),
        attemptTimeoutMs: c.attemptTimeoutMs ?? options.attemptTimeoutMs,
        signal: options.signal,
        onRetry: (status) => {
          log.attempts++;
          if (status === 409 || status === 425) log.inProgress++;
        },
      });
      log.attempts++;
      // The connection died under the body (a kill mid-response): not an answer yet.
      if (answer === undefined) continue;
      log.answers.push(answer);
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

interface SendOptions {
  attempts: number;
  deadlineMs: number;
  attemptTimeoutMs?: number;
  signal?: AbortSignal;
  onRetry?: (status: number | undefined) => void;
}

/** One idempotentFetch call; undefined when the body could not be read to its end. */
async function send(c: Call, base: string, options: SendOptions): Promise<Answer | undefined> {
  const { response, replayed } = await idempotentFetch(
    new URL(c.path, base),
    {
      method: 'POST',
      headers: c.headers,
      ...(options.signal ? { signal: options.signal } : {}),
    },
    {
      key: c.key,
      json: c.json,
      attempts: options.attempts,
      deadlineMs: options.deadlineMs,
      ...(options.attemptTimeoutMs ? { attemptTimeoutMs: options.attemptTimeoutMs } : {}),
      backoff: { initialMs: 50, maxMs: 1000 },
      onRetry: ({ status }) => options.onRetry?.(status),
    },
  );
  let body: string;
  try {
    body = await response.text();
  } catch {
    return undefined;
  }
  return {
    status: response.status,
    body,
    location: response.headers.get('location'),
    contentType: response.headers.get('content-type'),
    chaos: response.headers.get('x-chaos-answer'),
    omitted: response.headers.get('idempotent-body-omitted'),
    replayed,
  };
}

/**
 * Each operation once more, from a fresh caller with the same key and bytes, straight to
 * the server (`urls`: no proxy): it must be a replay of what the run's callers got.
 */
export async function replayAll(
  calls: Call[],
  urls: Record<Call['server'], string>,
  say: (line: string) => void,
): Promise<Map<string, Answer>> {
  const answers = new Map<string, Answer>();
  const limit = pLimit(16);
  await Promise.all(
    calls.map((c) =>
      limit(async () => {
        try {
          const answer = await send(c, urls[c.server], {
            attempts: 10,
            deadlineMs: 30_000,
            ...(c.attemptTimeoutMs ? { attemptTimeoutMs: c.attemptTimeoutMs } : {}),
          });
          if (answer !== undefined) answers.set(c.id, answer);
        } catch (error) {
          say(`replay of ${c.id} failed: ${String(error)}`);
        }
      }),
    ),
  );
  return answers;
}
