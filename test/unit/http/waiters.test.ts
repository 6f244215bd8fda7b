import { describe, expect, it } from '@jest/globals';
import type { StoredRecord } from '../../../src/http/store.js';
import { KeyFlights, type Turn } from '../../../src/http/waiters.js';

const record: StoredRecord = {
  method: 'POST',
  route: '/r',
  fingerprint: Buffer.from('fp'),
  status: 201,
  headers: {},
  body: Buffer.from('{}'),
  bodyOmitted: null,
};

/** Whether `turn` has settled yet, after the microtasks in flight ran. */
async function settled(turn: Promise<Turn>): Promise<Turn | 'pending'> {
  return Promise.race([turn, new Promise<'pending'>((r) => setImmediate(() => r('pending')))]);
}

function claimOf(turn: Turn | 'pending'): Extract<Turn, { kind: 'claim' }> {
  if (turn === 'pending' || turn.kind !== 'claim')
    throw new Error(`not a claim turn: ${JSON.stringify(turn)}`);
  return turn;
}

describe('KeyFlights: one request of a key at the database, the rest wait in memory', () => {
  it('a committed row answers every waiter at once; the next request claims again', async () => {
    const flights = new KeyFlights(new AbortController().signal);
    const first = claimOf(await settled(flights.enter('t', 'k', 60_000)));
    const waiters = Array.from({ length: 50 }, () => flights.enter('t', 'k', 60_000));
    for (const w of waiters) expect(await settled(w)).toBe('pending');
    first.done(record);
    for (const w of waiters) expect(await w).toEqual({ kind: 'stored', record });
    // The flight is over: a later request goes to the database (a replay, if committed).
    expect((await flights.enter('t', 'k', 60_000)).kind).toBe('claim');
  });

  it('without a row (rolled back), the waiters claim one at a time, in arrival order', async () => {
    const flights = new KeyFlights(new AbortController().signal);
    const first = claimOf(await settled(flights.enter('t', 'k', 60_000)));
    const second = flights.enter('t', 'k', 60_000);
    const third = flights.enter('t', 'k', 60_000);
    first.done(undefined);
    first.done(record); // handing over twice counts once
    const turn = claimOf(await settled(second));
    expect(await settled(third)).toBe('pending');
    turn.done(undefined);
    claimOf(await settled(third)).done(undefined);
    expect((await flights.enter('t', 'k', 60_000)).kind).toBe('claim');
  });

  it('another scope, or a key and scope joined otherwise, is another flight', async () => {
    const flights = new KeyFlights(new AbortController().signal);
    claimOf(await settled(flights.enter('a', 'k', 60_000)));
    claimOf(await settled(flights.enter('b', 'k', 60_000)));
    claimOf(await settled(flights.enter('a:b', 'k', 60_000)));
    claimOf(await settled(flights.enter('a', 'b:k', 60_000)));
    expect(await settled(flights.enter('a', 'k', 60_000))).toBe('pending');
  });

  it('past lockTimeoutMs a waiter times out, and the one behind it keeps its place', async () => {
    const flights = new KeyFlights(new AbortController().signal);
    const first = claimOf(await settled(flights.enter('t', 'k', 60_000)));
    expect(await flights.enter('t', 'k', 1)).toEqual({ kind: 'timeout' });
    const later = flights.enter('t', 'k', 60_000);
    first.done(undefined);
    const turn = claimOf(await settled(later));
    expect(turn.waitedMs).toBeGreaterThanOrEqual(0);
  });

  it('the hard stop answers every waiter, and a request after it waits for nothing', async () => {
    const stop = new AbortController();
    const flights = new KeyFlights(stop.signal);
    const first = claimOf(await settled(flights.enter('t', 'k', 60_000)));
    const waiters = Array.from({ length: 3 }, () => flights.enter('t', 'k', 60_000));
    stop.abort();
    for (const w of waiters) expect(await w).toEqual({ kind: 'stopped' });
    expect(await flights.enter('t', 'k', 60_000)).toEqual({ kind: 'stopped' });
    first.done(undefined);
  });
});
