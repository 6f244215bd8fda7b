/**
 * Relays of different destination sets on one table (two services, or a rolling deploy
 * that adds a destination): each claims only the destinations it publishes, a row no
 * running relay serves waits pending (in the stats and the lag, not parked), and one
 * destination's rows never hold back another's, even under one ordering key.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  httpPublisher,
  listParked,
  outboxStats,
  type OutboxStats,
  type Relay,
} from 'effectively-once/outbox';
import type { Logger } from 'effectively-once';
import { waitFor } from '../../helpers/wait-for.js';
import { Receiver, cli, enqueueCommitted, outboxTestBed } from './support.js';

const bed = outboxTestBed('outbox_shared');
/** The payments service's receiver is the bed's; the emails service has its own. */
let payments: Receiver;
let emails: Receiver;

beforeEach(async () => {
  payments = bed.receiver;
  emails = new Receiver();
  await emails.start();
});

afterEach(async () => {
  await emails.close();
});

function relay(
  destinations: Record<string, Receiver>,
  options: { logger?: Logger; lagIntervalMs?: number } = {},
): Relay {
  return bed.relay({
    publishers: Object.fromEntries(
      Object.entries(destinations).map(([name, receiver]) => [
        name,
        httpPublisher({ url: receiver.url, fetch: { attempts: 1 } }),
      ]),
    ),
    maxAttempts: 3,
    pollIntervalMs: 50,
    ...options,
  });
}

/** Five rows of key `k` for each destination, interleaved, emails first. */
function rows(k: string) {
  return Array.from({ length: 5 }, (_, n) => [
    { destination: 'emails', orderingKey: k, payload: { k, n } },
    { destination: 'payments', orderingKey: k, payload: { k, n } },
  ]).flat();
}

async function states(destination: string) {
  const { rows: found } = await bed.db.pool.query<{ state: string; attempts: number }>(
    `SELECT state, attempts FROM ${bed.db.table('eo_outbox')} WHERE destination = $1 ORDER BY seq`,
    [destination],
  );
  return found;
}

describe('a relay claims only the destinations it publishes', () => {
  it('leaves a destination no running relay serves pending, untouched, in the stats and the lag', async () => {
    const logged: { obj: object; msg?: string }[] = [];
    const logger: Logger = {
      debug: () => undefined,
      info: (obj, msg) => logged.push({ obj, msg }),
      warn: () => undefined,
      error: () => undefined,
    };
    const only = relay({ payments }, { logger, lagIntervalMs: 100 });
    const lags: OutboxStats[] = [];
    only.on('lag', (s) => lags.push(s));
    await enqueueCommitted(bed.db.pool, rows('cust-1'), bed.db.schema);
    await only.start();
    // It says which destinations it serves.
    expect(only.destinations).toEqual(['payments']);
    expect(logged).toContainEqual({
      obj: expect.objectContaining({ owner: only.owner, destinations: ['payments'] }),
      msg: expect.stringContaining('relay started'),
    });
    // The payments rows go out in order, though older emails rows of their key wait.
    await waitFor(() => payments.accepted.length === 5, { what: 'payments published' });
    expect(payments.acceptedOf('cust-1')).toEqual([0, 1, 2, 3, 4]);
    // (The marks may trail the receiver's answers.)
    await waitFor(() => only.stats().published === 5, { what: 'payments marked' });
    lags.splice(0);
    await waitFor(() => lags.length > 0, { what: 'a lag event' });
    // The emails rows were never claimed, tried or parked.
    expect(await states('emails')).toEqual(
      Array.from({ length: 5 }, () => ({ state: 'pending', attempts: 0 })),
    );
    expect(await listParked(bed.db.pool, { schema: bed.db.schema })).toEqual([]);
    expect(only.stats()).toMatchObject({ published: 5, failed: 0, parked: 0 });
    // The stats and the lag show them, by destination.
    const emailStats = { destination: 'emails', pending: 5, parked: 0 };
    expect(lags.at(-1)).toMatchObject({
      pending: 5,
      parked: 0,
      byDestination: [expect.objectContaining(emailStats)],
    });
    expect(lags.at(-1)!.oldestPendingAgeMs).toBeGreaterThan(0);
    expect(
      await outboxStats(bed.db.pool, { schema: bed.db.schema, destination: 'emails' }),
    ).toMatchObject({
      pending: 5,
      parked: 0,
      byDestination: [expect.objectContaining(emailStats)],
    });
    const shown = await cli([
      'outbox',
      '--schema',
      bed.db.schema,
      '--destination',
      'emails',
      '--json',
    ]);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      pending: 5,
      byDestination: [expect.objectContaining(emailStats)],
      parkedRows: [],
    });
    const table = await cli(['outbox', '--schema', bed.db.schema]);
    expect(table.stdout).toMatch(/^emails +5 +0 +\d+$/m);
    expect(await only.outboxStats({ destination: 'payments' })).toEqual({
      pending: 0,
      parked: 0,
      oldestPendingAgeMs: 0,
      byDestination: [],
    });

    // The emails service's relay starts (a rolling deploy): its rows go out, in order.
    await relay({ emails }).start();
    await waitFor(() => emails.accepted.length === 5, { what: 'emails published' });
    expect(emails.acceptedOf('cust-1')).toEqual([0, 1, 2, 3, 4]);
  });

  it('two relays of two destination sets on one table never touch each other’s rows', async () => {
    const a = relay({ payments });
    const b = relay({ emails });
    await Promise.all([a.start(), b.start()]);
    await enqueueCommitted(bed.db.pool, [...rows('k1'), ...rows('k2')], bed.db.schema);
    await waitFor(() => payments.accepted.length === 10 && emails.accepted.length === 10, {
      what: 'everything published',
    });
    for (const k of ['k1', 'k2']) {
      expect(payments.acceptedOf(k)).toEqual([0, 1, 2, 3, 4]);
      expect(emails.acceptedOf(k)).toEqual([0, 1, 2, 3, 4]);
    }
    await waitFor(() => a.stats().published === 10 && b.stats().published === 10, {
      what: 'everything marked',
    });
    expect(a.stats()).toMatchObject({ failed: 0, fenced: 0 });
    expect(b.stats()).toMatchObject({ failed: 0, fenced: 0 });
  });

  it('a parked row holds back its own destination’s rows of its key, not another destination’s', async () => {
    emails.respond = (r) => (r.body.n === 0 ? 400 : 200);
    const both = relay({ payments, emails });
    await enqueueCommitted(bed.db.pool, rows('k'), bed.db.schema);
    await both.start();
    await waitFor(() => payments.accepted.length === 5, { what: 'payments published' });
    expect((await states('emails')).map((r) => r.state)).toEqual([
      'parked',
      'pending',
      'pending',
      'pending',
      'pending',
    ]);
  });
});
