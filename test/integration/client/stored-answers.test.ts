/**
 * What a server stored is its final word, whatever its status: idempotentFetch against
 * a real effectively-once/http endpoint (node:http, Postgres) whose handler answers a
 * business 409 ("already exists"), stored with the key and replayed. The replay is the
 * answer; retrying it can only replay it again.
 */
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { idempotentFetch } from 'effectively-once/client';
import { toNodeListener } from 'effectively-once/http';
import { CHARGE, completionFixture } from '../http/completion-support.js';
import { FAST } from './support.js';

const fixture = completionFixture('client_stored_answers');

describe('idempotentFetch and a stored answer', () => {
  it('a replayed 409 is final: returned with replayed, not retried into RetriesExhaustedError', async () => {
    let runs = 0;
    const endpoint = fixture.endpoint();
    const charges = endpoint.handler(async (request, { tx, key }) => {
      runs++;
      const { customerId } = (await request.json()) as { customerId: string };
      if (customerId !== 'cus_ok')
        // The handler's own conflict: a 4xx, stored with the key like any answer.
        return Response.json({ error: 'customer is frozen' }, { status: 409 });
      await tx.query(CHARGE, [key, customerId, 'charge']);
      return Response.json({ charged: key }, { status: 201 });
    });
    const url = await fixture.listen(http.createServer(toNodeListener(charges)));
    const key = randomUUID();
    const retried: Array<number | undefined> = [];
    const result = await idempotentFetch(
      url,
      { method: 'POST' },
      {
        ...FAST,
        key,
        json: { customerId: 'cus_frozen' },
        attempts: 5,
        onRetry: ({ status }) => retried.push(status),
      },
    );
    // The first 409 is ambiguous to a client (in progress, or the handler's own); its
    // retry is a replay of the stored answer, which ends the operation.
    expect(result.response.status).toBe(409);
    expect(result.replayed).toBe(true);
    expect(result.attempts).toBe(2);
    expect(retried).toEqual([409]);
    expect(await result.response.json()).toEqual({ error: 'customer is frozen' });
    expect(runs).toBe(1);
    expect(await fixture.charges(key)).toBe(0);
  });
});
