import pLimit from 'p-limit';
import type { Answer } from '../http/clients.js';
import { ORDERS_PATH, type Operation } from './plan.js';

/**
 * The abandoned operations: each sent once, with its key, by a client that walks away
 * after one attempt whatever happens (an answer, a 503, a reset, a timeout), as a
 * mobile client killed mid-request would. Only the completer can finish those whose
 * flow started. Answers by key (none when the attempt got no answer at all).
 */
export async function sendAbandoned(
  ops: Operation[],
  options: { url: string; concurrency: number; timeoutMs: number; signal: AbortSignal },
): Promise<Map<string, Answer>> {
  const answers = new Map<string, Answer>();
  const limit = pLimit(options.concurrency);
  await Promise.all(
    ops.map((op) =>
      limit(async () => {
        if (options.signal.aborted) return;
        const answer = await sendOnce(op, options.url, options.timeoutMs);
        if (answer !== undefined) answers.set(op.key, answer);
      }),
    ),
  );
  return answers;
}

async function sendOnce(
  op: Operation,
  base: string,
  timeoutMs: number,
): Promise<Answer | undefined> {
  try {
    const response = await fetch(new URL(ORDERS_PATH, base), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': op.key },
      body: JSON.stringify(op.body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = await response.text();
    return {
      status: response.status,
      body,
      location: response.headers.get('location'),
      contentType: response.headers.get('content-type'),
      chaos: null,
      omitted: response.headers.get('idempotent-body-omitted'),
      replayed: response.headers.get('idempotent-replayed') === 'true',
    };
  } catch {
    return undefined;
  }
}
