/**
 * The relay's LISTEN through PgBouncer in transaction mode. LISTEN is session state: the
 * pooler runs it on whichever server connection the statement got, hands that
 * connection to other clients afterwards, and never delivers the notifications to the
 * relay. Without a word the relay would then only poll (a day, with a long
 * `pollIntervalMs`); instead it finds out at start and says so.
 */
import { describe, expect, it } from '@jest/globals';
import type { EffectivelyOnceError, Logger } from 'effectively-once';
import { databaseUrl, directDatabaseUrl } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import { enqueueCommitted, outboxTestBed } from '../outbox/support.js';

const bed = outboxTestBed('pgbouncer_listen');

/** A logger that keeps the warn lines' messages. */
function warnings(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const ignore = (): void => undefined;
  return {
    lines,
    logger: {
      debug: ignore,
      info: ignore,
      error: ignore,
      warn: (_fields: object, message?: string) => void lines.push(message ?? ''),
    },
  };
}

async function publishes(): Promise<void> {
  const ids = await enqueueCommitted(
    bed.db.pool,
    [
      { destination: 'effects', payload: { k: 'a', n: 0 } },
      { destination: 'effects', payload: { k: 'a', n: 1 } },
    ],
    bed.db.schema,
  );
  await waitFor(() => bed.receiver.accepted.length === 2, { what: 'both rows published' });
  expect(bed.receiver.accepted.map((a) => a.key)).toEqual(ids);
}

describe("the relay's LISTEN through PgBouncer", () => {
  it("detects the pooler on the pool's settings, says so in one warn line, and polls", async () => {
    const { logger, lines } = warnings();
    const r = bed.relay({ pollIntervalMs: 50, logger });
    await r.start();
    await publishes();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/LISTEN.*pooler.*polling every 50 ms/);
  });

  it('refuses at start a `listen` connection given explicitly that goes through the pooler', async () => {
    const r = bed.relay({ listen: { connectionString: databaseUrl() } });
    const refused = await r.start().then(
      () => undefined,
      (error: unknown) => error as EffectivelyOnceError,
    );
    expect(refused?.code).toBe('EO_LISTEN_POOLED');
    expect(refused?.message).toMatch(/direct connection/);
  });

  it('is woken by NOTIFY when `listen` is a direct connection (polling set to a day)', async () => {
    const { logger, lines } = warnings();
    const r = bed.relay({
      pollIntervalMs: 86_400_000,
      listen: { connectionString: directDatabaseUrl() },
      logger,
    });
    await r.start();
    await publishes();
    expect(lines).toEqual([]);
  });
});
