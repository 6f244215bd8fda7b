import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import {
  enqueue,
  listParked,
  requeueParked,
  type Relay,
  type RelayOptions,
} from 'effectively-once/outbox';
import { waitFor } from '../../helpers/wait-for.js';
import { cli, enqueueCommitted, outboxTestBed } from './support.js';

const bed = outboxTestBed('outbox_relay');
const relay = (options?: Partial<RelayOptions>): Relay => bed.relay(options);

async function row(id: string) {
  const { rows } = await bed.db.pool.query<{
    state: string;
    attempts: number;
    lease_token: string;
    lease_owner: string | null;
    last_error: string | null;
  }>(
    `SELECT state, attempts, lease_token::text, lease_owner, last_error FROM ${bed.db.table('eo_outbox')} WHERE id = $1`,
    [id],
  );
  return rows[0];
}

describe('enqueue and NOTIFY', () => {
  it('publishes committed rows only, woken by NOTIFY with polling set to a day, across a lost LISTEN connection', async () => {
    const r = relay({ pollIntervalMs: 86_400_000 });
    await r.start();

    // A rolled-back enqueue leaves nothing behind, and notifies no one.
    const client = await bed.db.pool.connect();
    await client.query('BEGIN');
    await enqueue(
      client,
      { destination: 'effects', payload: { k: 'gone', n: 0 } },
      { schema: bed.db.schema },
    );
    await client.query('ROLLBACK');
    client.release();

    const ids: string[] = [];
    for (let n = 0; n < 5; n++) {
      // Each row is committed after the previous one was published: the relay is idle,
      // and with a day between polls only the NOTIFY can wake it.
      const [id] = await enqueueCommitted(
        bed.db.pool,
        [{ destination: 'effects', payload: { k: 'a', n } }],
        bed.db.schema,
      );
      ids.push(id!);
      await waitFor(() => bed.receiver.accepted.length === n + 1, { what: `row ${n} published` });
    }
    expect(bed.receiver.accepted.map((a) => a.key)).toEqual(ids);
    expect(bed.receiver.acceptedOf('a')).toEqual([0, 1, 2, 3, 4]);

    // The LISTEN connection is cut: the relay reconnects and hears the next NOTIFY.
    const listening = async () =>
      (
        await bed.db.pool.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid()",
        )
      ).rows.map((x) => x.pid);
    const [pid] = await waitFor(async () => {
      const pids = await listening();
      return pids.length === 1 ? pids : undefined;
    });
    const errors: unknown[] = [];
    r.on('error', (e) => errors.push(e));
    await bed.db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    await waitFor(
      async () => {
        const pids = await listening();
        return pids.length === 1 && pids[0] !== pid;
      },
      { what: 'a new LISTEN connection' },
    );
    await enqueueCommitted(
      bed.db.pool,
      [{ destination: 'effects', payload: { k: 'a', n: 5 } }],
      bed.db.schema,
    );
    await waitFor(() => bed.receiver.accepted.length === 6, {
      what: 'row published after reconnect',
    });
    expect(errors).toEqual([expect.objectContaining({ code: 'EO_DATABASE' })]);
    const { rows } = await bed.db.pool.query(
      `SELECT 1 FROM ${bed.db.table('eo_outbox')} WHERE payload::text LIKE '%gone%'`,
    );
    expect(rows).toEqual([]);
  });
});

describe('ordering', () => {
  it('keeps commit order per ordering key under three relays, with one failing request in four', async () => {
    const KEYS = ['k0', 'k1', 'k2', 'k3'];
    const PER_KEY = 15;
    bed.receiver.respond = () => (Math.random() < 0.25 ? 503 : 200);
    const trio = [relay({ batchSize: 3 }), relay({ batchSize: 3 }), relay({ batchSize: 3 })];
    await Promise.all(trio.map((r) => r.start()));
    const messages = [];
    for (let n = 0; n < PER_KEY; n++) {
      for (const k of KEYS)
        messages.push({ destination: 'effects', orderingKey: k, payload: { k, n } });
      messages.push({ destination: 'effects', payload: { k: 'free', n } });
    }
    await enqueueCommitted(bed.db.pool, messages, bed.db.schema);
    await waitFor(() => bed.receiver.accepted.length === messages.length, {
      what: 'every row published',
      timeoutMs: 60_000,
    });
    for (const k of KEYS) expect(bed.receiver.acceptedOf(k)).toEqual([...Array(PER_KEY).keys()]);
    expect(bed.receiver.acceptedOf('free').sort((a, b) => a - b)).toEqual([
      ...Array(PER_KEY).keys(),
    ]);
    // Failures happened and were retried; no row was accepted twice.
    expect(bed.receiver.all.length).toBeGreaterThan(messages.length);
    expect(new Set(bed.receiver.accepted.map((a) => a.key)).size).toBe(messages.length);
    // Every row marked once, by one of the three (the last marks may trail the answers).
    await waitFor(() => trio.reduce((sum, r) => sum + r.stats().published, 0) === messages.length, {
      what: 'every row marked',
    });
    expect(trio.reduce((sum, r) => sum + r.stats().fenced, 0)).toBe(0);
  });
});

describe('leases and fencing', () => {
  it("refuses a stale relay's marks once another relay took its rows over", async () => {
    bed.receiver.holdFirst = true;
    const stale = relay({ leaseMs: 60_000, owner: 'stale' });
    const fenced: string[] = [];
    stale.on('fenced', (e) => fenced.push(e.id));
    const [ok, failing] = await enqueueCommitted(
      bed.db.pool,
      [
        { destination: 'effects', orderingKey: 'x', payload: { k: 'x', n: 0 } },
        { destination: 'effects', orderingKey: 'y', payload: { k: 'y', n: 0 } },
      ],
      bed.db.schema,
    );
    await stale.start();
    await waitFor(() => bed.receiver.held.length === 2, {
      what: 'the stale relay stuck publishing',
    });
    const staleToken = (await row(ok!))!.lease_token;
    expect(await row(failing!)).toMatchObject({ lease_owner: 'stale', lease_token: staleToken });

    // Its lease runs out (as if it had paused past leaseMs); another relay takes over.
    await bed.db.pool.query(
      `UPDATE ${bed.db.table('eo_outbox')} SET lease_until = now() - interval '1 second'`,
    );
    const fresh = relay({ owner: 'fresh' });
    const freshPublished: string[] = [];
    fresh.on('published', (e) => freshPublished.push(e.id));
    await fresh.start();
    await waitFor(() => freshPublished.length === 2, { what: 'the fresh relay publishing both' });
    const after = await row(ok!);
    expect(BigInt(after!.lease_token)).toBeGreaterThan(BigInt(staleToken));

    // The stale relay's publishes now finish, one accepted, one refused: both marks lose.
    const [first, second] = bed.receiver.held.splice(0);
    first!.answer(first!.key === ok ? 200 : 503);
    second!.answer(second!.key === ok ? 200 : 503);
    await waitFor(() => fenced.length === 2, { what: 'both marks fenced' });
    expect(fenced.sort()).toEqual([ok, failing].sort());
    for (const id of [ok!, failing!]) {
      expect(await row(id)).toMatchObject({
        state: 'published',
        attempts: 2,
        lease_token: after!.lease_token,
        last_error: null,
      });
    }
    expect(stale.stats()).toMatchObject({ published: 0, fenced: 2, parked: 0 });
  });
});

describe('parking', () => {
  it('parks a row that keeps failing, holds back only its key, and requeues it', async () => {
    let fixed = false;
    bed.receiver.respond = (r) =>
      r.body.k === 'bad' && !fixed ? 503 : r.body.k === 'rejected' ? 400 : 200;
    const r = relay({ maxAttempts: 3 });
    const parked: { id: string; attempts: number }[] = [];
    r.on('parked', (e) => parked.push(e));
    const [bad0, bad1, , , rejected] = await enqueueCommitted(
      bed.db.pool,
      [
        { destination: 'effects', orderingKey: 'bad', payload: { k: 'bad', n: 0 } },
        { destination: 'effects', orderingKey: 'bad', payload: { k: 'bad', n: 1 } },
        { destination: 'effects', orderingKey: 'good', payload: { k: 'good', n: 0 } },
        { destination: 'effects', orderingKey: 'good', payload: { k: 'good', n: 1 } },
        { destination: 'effects', orderingKey: 'rejected', payload: { k: 'rejected', n: 0 } },
      ],
      bed.db.schema,
    );
    await r.start();
    await waitFor(() => parked.length === 2, { what: 'two rows parked' });
    await waitFor(() => bed.receiver.acceptedOf('good').length === 2, {
      what: 'the good key published',
    });
    expect(bed.receiver.acceptedOf('good')).toEqual([0, 1]);
    // Exhausted after maxAttempts; a 400 cannot succeed later and parks at once.
    expect(parked).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: bad0, attempts: 3 }),
        expect.objectContaining({ id: rejected, attempts: 1 }),
      ]),
    );
    const listed = await listParked(bed.db.pool, { schema: bed.db.schema });
    expect(listed.map((p) => [p.id, p.attempts, p.lastError])).toEqual([
      [bad0, 3, expect.stringContaining('HTTP 503')],
      [rejected, 1, expect.stringContaining('HTTP 400')],
    ]);
    expect(JSON.parse(listed[0]!.payloadText)).toEqual({ k: 'bad', n: 0 });
    // The parked row holds back the rest of its key.
    expect(await row(bad1!)).toMatchObject({ state: 'pending', attempts: 0 });

    // The CLI lists the same rows.
    const listedByCli = await cli(['outbox', '--schema', bed.db.schema, '--json']);
    expect(listedByCli.code).toBe(0);
    expect(JSON.parse(listedByCli.stdout)).toMatchObject({
      requeued: null,
      parked: 2,
      pending: 1,
      parkedRows: [
        { id: bad0, attempts: 3 },
        { id: rejected, attempts: 1 },
      ],
    });

    fixed = true;
    expect(await requeueParked(bed.db.pool, { schema: bed.db.schema, ids: [bad0!] })).toBe(1);
    await waitFor(() => bed.receiver.acceptedOf('bad').length === 2, {
      what: 'the bad key published',
    });
    expect(bed.receiver.acceptedOf('bad')).toEqual([0, 1]);
    expect(await row(bad0!)).toMatchObject({ state: 'published', attempts: 1 });
    expect((await listParked(bed.db.pool, { schema: bed.db.schema })).map((p) => p.id)).toEqual([
      rejected,
    ]);
    // And requeues through the CLI: the rejected row goes again (and parks again).
    const requeuedByCli = await cli([
      'outbox',
      '--schema',
      bed.db.schema,
      '--ids',
      rejected!,
      '--requeue',
      '--json',
    ]);
    expect(JSON.parse(requeuedByCli.stdout)).toMatchObject({ requeued: 1 });
    await waitFor(() => parked.length === 3, { what: 'the rejected row parked again' });
    expect(bed.receiver.all.filter((a) => a.key === rejected).map((a) => a.status)).toEqual([
      400, 400,
    ]);
  });
});

describe('a relay killed mid-publish', () => {
  it('leaves its rows, and the later rows of their keys, waiting until the lease runs out; then another relay publishes them', async () => {
    bed.receiver.holdFirst = true;
    const ids = await enqueueCommitted(
      bed.db.pool,
      ['p', 'q', 'r'].map((k) => ({
        destination: 'effects',
        orderingKey: k,
        payload: { k, n: 0 },
      })),
      bed.db.schema,
    );
    const [later] = await enqueueCommitted(
      bed.db.pool,
      [{ destination: 'effects', orderingKey: 'p', payload: { k: 'p', n: 1 } }],
      bed.db.schema,
    );
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(new URL('./relay-child.ts', import.meta.url))],
      {
        env: {
          ...process.env,
          EO_OUTBOX_SCHEMA: bed.db.schema,
          EO_OUTBOX_URL: bed.receiver.url,
          EO_OUTBOX_LEASE_MS: '5000',
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
      child.on('exit', (code, signal) => resolve(signal ?? code)),
    );
    await waitFor(() => bed.receiver.held.length === 3, {
      what: 'the child relay publishing 3 rows',
    });
    for (const id of ids)
      expect(await row(id)).toMatchObject({ lease_owner: 'child', attempts: 1 });
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    bed.receiver.holdFirst = false;

    const survivor = relay({ owner: 'survivor' });
    const published: string[] = [];
    survivor.on('published', (e) => published.push(e.id));
    await survivor.start();
    // While the dead relay's lease lasts, neither its rows nor the next row of key p move
    // (seen before the leases are seen still running, so seen during them).
    expect(published).toEqual([]);
    expect(await row(later!)).toMatchObject({ state: 'pending', attempts: 0 });
    const { rows: leased } = await bed.db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${bed.db.table('eo_outbox')} WHERE lease_until > now()`,
    );
    expect(leased[0]!.n).toBe(3);
    await waitFor(() => published.length === 4, { what: 'the survivor publishing them' });
    expect(published.sort()).toEqual([...ids, later].sort());
    for (const id of ids) expect(await row(id)).toMatchObject({ state: 'published', attempts: 2 });
    expect(bed.receiver.acceptedOf('p')).toEqual([0, 1]);
    // Each row reached the receiver twice (the dead relay's request, the survivor's), with
    // one Idempotency-Key: the receiver can tell they are one message.
    expect(bed.receiver.held.map((h) => h.key).sort()).toEqual([...ids].sort());
    expect(bed.receiver.accepted.map((a) => a.key).sort()).toEqual([...ids, later].sort());
  });
});
