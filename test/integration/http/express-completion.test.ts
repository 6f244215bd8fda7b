/**
 * Express handlers written as Express's own docs show them, against a real Express 5
 * server and Postgres: the transaction ends when the handler's work is done (its
 * promise, or for a handler that returns none its `res.end()`), never at a response
 * call on the way, and no byte of the answer leaves before the verified COMMIT.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { describe, expect, it } from '@jest/globals';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Idempotency } from 'effectively-once/http';
import { idempotentExpress, type ExpressIdempotentHandler } from 'effectively-once/http/express';
import { CHARGE, completionFixture, observe } from './completion-support.js';

const fixture = completionFixture('http_express_done');

/** One route, then an error handler that answers what it caught. */
async function serve(
  idempotency: Idempotency,
  handler: ExpressIdempotentHandler,
  caught: unknown[] = [],
): Promise<string> {
  const app = express();
  app.post('/r', idempotentExpress(idempotency, handler));
  app.use((err: Error, _req: Request, res: Response, _next: NextFunction) => {
    caught.push(err);
    res.status(500).json({ caught: err.message });
  });
  return fixture.listen(http.createServer(app));
}

describe('Express: streaming after res.flushHeaders()', () => {
  // Express's streaming idiom: the head first, then the rows as they are read.
  const exportHandler: ExpressIdempotentHandler = async (req, res, { tx, key }) => {
    const { customerId } = req.body as { customerId: string };
    res.status(200).type('text/csv');
    res.flushHeaders();
    await tx.query(CHARGE, [key, customerId, 'export fee']);
    await tx.query('SELECT pg_sleep(0.05)');
    const { rows } = await tx.query<{ id: string }>('SELECT id FROM charges WHERE idem_key = $1', [
      key,
    ]);
    res.write('id\n');
    for (const row of rows) res.write(`${row.id}\n`);
    res.end();
  };

  it('COMMIT refused by a deferred constraint: the client gets an error, nothing is charged, the retry charges once', async () => {
    const idempotency = fixture.endpoint();
    const url = `${await serve(idempotency, exportHandler)}/r`;
    const key = randomUUID();
    const customer = `cus_${randomUUID()}`;
    const first = await observe(url, key, { customerId: customer }, fixture.committed);
    expect(first.status).toBe(500);
    expect(await fixture.charges(key)).toBe(0);
    await fixture.addCustomer(customer);
    const retry = await observe(url, key, { customerId: customer }, fixture.committed);
    expect(retry.status).toBe(200);
    expect(retry.committedAtHead).toBe(true);
    expect(retry.body.toString()).toMatch(/^id\n\d+\n$/);
    expect(await fixture.charges(key)).toBe(1);
  });

  it('COMMIT succeeds: the head and the whole body after it, written through ctx.tx; the replay says stream', async () => {
    const idempotency = fixture.endpoint();
    const url = `${await serve(idempotency, exportHandler)}/r`;
    const key = randomUUID();
    const first = await observe(url, key, { customerId: 'cus_ok' }, fixture.committed);
    expect(first).toMatchObject({ status: 200, committedAtHead: true });
    expect(first.headers['content-type']).toMatch(/^text\/csv/);
    expect(first.body.toString()).toMatch(/^id\n\d+\n$/);
    const replay = await observe(url, key, { customerId: 'cus_ok' }, fixture.committed);
    expect(replay.status).toBe(200);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.headers['idempotent-body-omitted']).toBe('stream');
    expect(replay.body.byteLength).toBe(0);
    expect(await fixture.charges(key)).toBe(1);
  });
});

describe('Express: the handler’s completion ends the transaction', () => {
  it('a throw after res.json(): next(err) gets it, nothing is committed, the retry runs again', async () => {
    const idempotency = fixture.endpoint();
    const caught: unknown[] = [];
    let runs = 0;
    const url = `${await serve(
      idempotency,
      async (_req, res, { tx, key }) => {
        runs++;
        await tx.query(CHARGE, [key, 'cus_ok', 'charge']);
        res.status(201).json({ charged: key });
        if (runs === 1) throw new Error('the ledger said no after the answer');
      },
      caught,
    )}/r`;
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first.status).toBe(500);
    expect(JSON.parse(first.body.toString())).toEqual({
      caught: 'the ledger said no after the answer',
    });
    expect(caught).toHaveLength(1);
    expect(await fixture.charges(key)).toBe(0);
    const retry = await observe(url, key, {}, fixture.committed);
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(runs).toBe(2);
    expect(await fixture.charges(key)).toBe(1);
  });

  it('an async handler that answers, then keeps writing through ctx.tx: both writes commit with the answer', async () => {
    const idempotency = fixture.endpoint();
    const url = `${await serve(idempotency, async (_req, res, { tx, key }) => {
      await tx.query(CHARGE, [key, 'cus_ok', 'charge']);
      res.status(201).json({ charged: key });
      // Sent once the answer is given, after a round trip: not a query already on its way.
      await tx.query('SELECT pg_sleep(0.02)');
      await tx.query(CHARGE, [key, 'cus_ok', 'audit']);
    })}/r`;
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first).toMatchObject({ status: 201, committedAtHead: true });
    expect(await fixture.charges(key)).toBe(2);
  });

  it('a sync callback-style handler answering from a .then: stored and replayed; a failed COMMIT never shows its 201', async () => {
    const idempotency = fixture.endpoint();
    const url = `${await serve(idempotency, (req, res, { tx, key }) => {
      const { customerId } = req.body as { customerId: string };
      void tx.query<{ id: string }>(CHARGE, [key, customerId, 'charge']).then(
        ({ rows }) => res.status(201).json({ id: rows[0]?.id }),
        (err: Error) => res.status(400).json({ error: err.message }),
      );
    })}/r`;
    const key = randomUUID();
    const first = await observe(url, key, { customerId: 'cus_ok' }, fixture.committed);
    expect(first).toMatchObject({ status: 201, committedAtHead: true });
    const replay = await observe(url, key, { customerId: 'cus_ok' }, fixture.committed);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.equals(first.body)).toBe(true);
    expect(await fixture.charges(key)).toBe(1);

    const refused = randomUUID();
    const failed = await observe(url, refused, { customerId: 'cus_missing' }, fixture.committed);
    expect(failed.status).toBe(500);
    expect(failed.body.toString()).not.toContain('"id"');
    expect(await fixture.charges(refused)).toBe(0);
  });

  it('ctx.tx used after the handler completed is refused: nothing commits, the error reaches next', async () => {
    const idempotency = fixture.endpoint();
    const caught: unknown[] = [];
    const url = `${await serve(
      idempotency,
      (_req, res, { tx, key }) => {
        void tx
          .query(CHARGE, [key, 'cus_ok', 'charge'])
          .then(() => {
            res.status(201).json({ charged: key });
            // After the answer of a handler that returned no promise: its work is over.
            return tx.query(CHARGE, [key, 'cus_ok', 'late']);
          })
          .catch(() => undefined);
      },
      caught,
    )}/r`;
    const key = randomUUID();
    const answer = await observe(url, key, {}, fixture.committed);
    expect(answer.status).toBe(500);
    expect(caught).toEqual([expect.objectContaining({ code: 'EO_TX_CONTROL' })]);
    expect(await fixture.charges(key)).toBe(0);
  });

  it('abandoned on timeout, its late res.write()/res.end() reach nothing and crash nothing', async () => {
    const idempotency = fixture.endpoint({ handlerTimeoutMs: 150 });
    let late: unknown = 'not yet';
    const url = `${await serve(idempotency, (_req, res) => {
      setTimeout(() => {
        try {
          res.status(201);
          res.write('late ');
          res.end('answer');
          late = undefined;
        } catch (error) {
          late = error;
        }
      }, 400);
    })}/r`;
    const first = await observe(url, randomUUID(), {}, fixture.committed);
    expect(first.status).toBe(503);
    expect(first.body.toString()).not.toContain('late');
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(late).toBeUndefined();
    // The process is still serving.
    const next = await observe(url, randomUUID(), {}, fixture.committed);
    expect(next.status).toBe(503);
  });
});
