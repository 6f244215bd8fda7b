/**
 * Issue 11: a delivery the adapter lost (its `signal` aborted: partition revoked,
 * visibility lapsed) is released, never dead-lettered, even when it could never be
 * handled (undecodable body, no key). No database is needed: such deliveries are
 * settled before any claim. (The payload-mismatch path is in the integration suite.)
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { BodyParseError, createConsumer, type Consumer } from '../../../src/index.js';
import type { Delivery } from '../../../src/types.js';
import { ManualSource } from '../../helpers/manual-source.js';

const open: Array<{ consumer: Consumer; pool: pg.Pool }> = [];
afterEach(async () => {
  for (const { consumer, pool } of open.splice(0)) {
    await consumer.stop({ timeoutMs: 1000 });
    await pool.end();
  }
});

async function started(): Promise<{ source: ManualSource<unknown>; deadLettered: unknown[] }> {
  // Never connected: these deliveries must be settled without the database.
  const pool = new pg.Pool({ host: '127.0.0.1', port: 1, max: 20 });
  pool.on('error', () => undefined);
  const source = new ManualSource<unknown>();
  const consumer = createConsumer({
    name: 'lost',
    source,
    pool,
    migrate: false,
    handler: async () => undefined,
  });
  open.push({ consumer, pool });
  const deadLettered: unknown[] = [];
  consumer.on('dead-lettered', (e) => deadLettered.push(e));
  await consumer.start();
  return { source, deadLettered };
}

function lostSignal(): AbortSignal {
  const controller = new AbortController();
  controller.abort(new Error('partition revoked'));
  return controller.signal;
}

describe('a lost delivery that could never be handled', () => {
  const cases: Array<[string, Pick<Delivery<unknown>, 'key' | 'body' | 'rejection'>]> = [
    [
      'an undecodable body',
      { key: 'k-1', body: undefined, rejection: new BodyParseError('not JSON') },
    ],
    ['no key', { key: undefined, body: { n: 1 }, rejection: undefined }],
  ];

  it.each(cases)(
    '%s: released, no dead-lettered event, nothing sent to the dead-letter target',
    async (_what, fields) => {
      const { source, deadLettered } = await started();
      const result = await source.push({ ...fields, signal: lostSignal() });
      expect(result.calls).toEqual(['release']);
      expect(result.outcome).toBe('released');
      expect(deadLettered).toEqual([]);
    },
  );

  it.each(cases)('%s, not lost: dead-lettered as before (control)', async (_what, fields) => {
    const { source, deadLettered } = await started();
    const result = await source.push(fields);
    expect(result.calls).toEqual(['deadLetter']);
    expect(deadLettered).toHaveLength(1);
  });
});
