/**
 * postgres.js's bridge (effectively-once/postgres-js) on postgres.js 4 and a real
 * Postgres: the checks every bridge passes (bridge-checks.ts), and what postgres.js does
 * of its own that the claim's driver must allow for.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import postgres, { type TransactionSql } from 'postgres';
import { postgresLayer } from '../../../adapters/postgres-js/index.js';
import { describeBridgeChecks } from './bridge-checks.js';
import { createBridgeDatabase, type BridgeDatabase } from './bridge-database.js';
import type { OpenedLayer } from './fixture.js';
import { postgresJsFixture } from './postgres-js.fixture.js';

describeBridgeChecks(postgresJsFixture);

describe('postgres-js bridge, postgres.js of its own', () => {
  let db: BridgeDatabase;
  let opened: OpenedLayer<TransactionSql>;
  beforeAll(async () => {
    db = await createBridgeDatabase('postgres_js_own');
    opened = await postgresJsFixture.open(db.url);
  });
  afterAll(async () => {
    await opened?.close();
    await db?.drop();
  });

  it('rejects the transaction once its connection closes, while the body still runs', async () => {
    const { layer } = opened;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let bodyDone = false;
    const transaction = layer.transaction({ timeoutMs: 0, acquireTimeoutMs: 0 }, async (tx) => {
      const { rows } = await layer.sql(tx).query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await db.terminate(rows[0]!.pid);
      // Waits for the transaction to settle first: it does, with the body unfinished.
      await released;
      bodyDone = true;
    });
    const error = await transaction.then(
      () => undefined,
      (rejection: unknown) => rejection,
    );
    expect(bodyDone).toBe(false);
    expect(layer.serverError(error)).toMatchObject({ code: '57P01', severity: 'FATAL' });
    release();
  });

  it("bounds the wait for one of postgres.js's connections by acquireTimeoutMs", async () => {
    const single = postgres(db.url, { max: 1 });
    const layer = postgresLayer(single);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const holding = new Promise<void>((resolve) => (started = resolve));
    try {
      // The only connection, held by a transaction until the second one gave up.
      const first = layer.transaction({ timeoutMs: 0, acquireTimeoutMs: 0 }, async () => {
        started();
        await held;
      });
      await holding;
      let ran = false;
      const second = await layer
        .transaction({ timeoutMs: 0, acquireTimeoutMs: 50 }, async () => {
          ran = true;
        })
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      // Taken out of the queue, never sent: postgres.js's own 57014, no server answer.
      expect(second).toMatchObject({ code: '57014' });
      expect(layer.serverError(second)).not.toHaveProperty('severity');
      expect(ran).toBe(false);
      release();
      await first;
    } finally {
      release();
      await single.end({ timeout: 5 });
    }
  });

  it("reads the library's columns as named on an instance with transform: postgres.camel", async () => {
    const camel = postgres(db.url, { max: 1, transform: postgres.camel });
    try {
      const layer = postgresLayer(camel);
      const rows = await layer.transaction({ timeoutMs: 0, acquireTimeoutMs: 0 }, async (tx) => {
        // The app's own queries on that instance are renamed, as it asked.
        expect(await tx`SELECT 1 AS app_column`).toEqual([{ appColumn: 1 }]);
        return (await layer.sql(tx).query('SELECT 1 AS claim_state')).rows;
      });
      expect(rows).toEqual([{ claim_state: 1 }]);
    } finally {
      await camel.end({ timeout: 5 });
    }
  });
});
