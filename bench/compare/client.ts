import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { ARM_HEADER, type ArmMode } from './contenders.js';

/** How long a client keeps retrying one key before it gives up (a payment page's patience). */
export const GIVE_UP_MS = 5000;

/** One payment's outcome as its client saw it. */
export interface PaymentOutcome {
  key: string;
  /** The status of the last attempt, or 0 when the connection failed. */
  status: number;
  answered2xx: boolean;
  attempts: number;
}

/**
 * One POST /charges on a fresh connection (no keep-alive: a pooled socket to a killed
 * server would fail an attempt that never reached the new one). Resolves with the
 * status, 0 when the connection failed or was cut.
 */
export function post(port: number, key: string, body: string, arm?: ArmMode): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: '/charges',
        method: 'POST',
        agent: false,
        timeout: 10_000,
        headers: {
          'content-type': 'application/json',
          'idempotency-key': key,
          ...(arm ? { [ARM_HEADER]: arm } : {}),
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', () => resolve(0));
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

/**
 * A client paying once: the same key and body until a 2xx or {@link GIVE_UP_MS} after
 * its first attempt (after the restart, for a killed one), backing off 100 ms doubling
 * to 1 s. `beforeRetry` runs after the first attempt (the
 * supervisor restarts a killed server there); `arm` goes on the first attempt only.
 */
export async function payOnce(
  port: () => number,
  key: string,
  arm?: ArmMode,
  beforeRetry?: () => Promise<void>,
): Promise<PaymentOutcome> {
  const body = JSON.stringify({ customerId: `cus_${key}`, amountCents: 1999 });
  let status = await post(port(), key, body, arm);
  let attempts = 1;
  await beforeRetry?.();
  // The client's patience starts once the server is back: a restart slowed by a busy
  // machine must not pass for a key that stayed stuck.
  const started = Date.now();
  let pause = 100;
  while (!isSuccess(status) && Date.now() - started < GIVE_UP_MS) {
    await sleep(pause);
    pause = Math.min(pause * 2, 1000);
    status = await post(port(), key, body);
    attempts++;
  }
  return { key, status, answered2xx: isSuccess(status), attempts };
}

function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}
