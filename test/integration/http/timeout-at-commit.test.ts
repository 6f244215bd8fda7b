/**
 * The request side of a session timeout whose FATAL is COMMIT's answer: the handler
 * holds the event loop until the server has ended its session for idling in the
 * transaction (idle_in_transaction_session_timeout, 25P03), so pg reads the FATAL only
 * as the answer to the COMMIT round trip. Settled by the claim's xid, that is a known
 * rollback: the request is answered as every other rollback it caused (500
 * rolled-back, nothing applied), not 503 outcome-unknown; the key is free, so a retry
 * runs afresh (and here times out the same way).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { blockUntilNoneIdleInTransaction } from '../../helpers/block-until-backend-gone.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { databaseUrl } from '../../helpers/env.js';
import { FRAMEWORKS, startPaymentServer } from '../../../kit/payments/payments.js';
import { post } from './support.js';

const APP = 'eo-http-idle-commit';

let db: TestDatabase;
/** Sessions that the server ends after 300 ms idle in a transaction. */
let timed: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase('http_idle_commit');
  timed = new pg.Pool({
    connectionString: databaseUrl(),
    max: 5,
    application_name: APP,
    options: `-c search_path=${db.schema} -c idle_in_transaction_session_timeout=300`,
  });
  timed.on('error', () => undefined);
});
afterAll(async () => {
  await timed.end();
  await db.close();
});

describe.each(FRAMEWORKS)('%s: a session timeout whose FATAL answers COMMIT', (framework) => {
  it('is answered as a known rollback (500 rolled-back), nothing applied', async () => {
    const server = await startPaymentServer({
      framework,
      pool: timed,
      schema: db.schema,
      hooks: {
        // After the effect's INSERT, the handler's last statement: the next is the COMMIT.
        raise: () => {
          blockUntilNoneIdleInTransaction(APP);
          return undefined;
        },
      },
    });
    try {
      const key = randomUUID();
      const answer = await post(`${server.url}/charges`, key, { customerId: 'c', amountCents: 3 });
      expect({ status: answer.status, rolledBack: answer.body.includes('rolled-back') }).toEqual({
        status: 500,
        rolledBack: true,
      });
      const { rows } = await db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM charges WHERE idem_key = $1',
        [key],
      );
      expect(rows[0]?.n).toBe(0);
    } finally {
      await server.close();
    }
  });
});
