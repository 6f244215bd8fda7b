import http from 'node:http';
import net from 'node:net';
import pg from 'pg';
import { sleep } from '../../src/sleep.js';
import type { ChaosTables } from './db.js';
import { faultLabel, type HandlerFault } from './handler-faults.js';

/**
 * How long a hot message waits for its pair's other member before going ahead alone:
 * to arrive (Kafka partitions can lag each other by a rebalance or two), then, with
 * opposite orders, to hold its first row (it has arrived, so that is quick). Both
 * together stay well below the workers' handlerTimeoutMs (30 s).
 */
const RENDEZVOUS_MS = { arrived: 15_000, holding: 5_000 };
/** Between a hot message's two updates: both members hold their first row by then. */
const HOT_HOLD_S = 0.1;

/**
 * Where a fault's statements run: the handler's transaction, a pg client (`ctx.tx`)
 * or a data layer's transaction object behind its raw call (layer-effects.ts); `codeOf`
 * reads the SQLSTATE from what a statement threw (a pg error's own `code` when absent).
 */
export interface FaultTx {
  query(text: string, values?: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }>;
  codeOf?: (error: unknown) => string | undefined;
  /**
   * A statement whose result is not read (`pg_sleep`'s void), where the layer's row call
   * cannot decode it (Prisma's `$queryRawUnsafe` refuses a void column); `query` when absent.
   */
  run?: (text: string, values?: unknown[]) => Promise<void>;
}

/** A query chain a handler starts and does not await (see {@link HandlerFaults.commit}). */
export type FloatingChain = () => void;

/** Fault log kind of a hot message whose partner did not come (code: the phase it waited at). */
export const HOT_PAIR_ALONE = 'hot-pair-alone';

const SERIALIZATION_FAILURE = '40001';
const DEADLOCK_DETECTED = '40P01';
const UNIQUE_VIOLATION = '23505';

/**
 * The worker side of handler faults (see handler-faults.ts): commits a message's
 * fault inside its transaction, the way a real handler would meet it. A side pool at
 * the database's default isolation, outside the claim's transaction, keeps the fault
 * log (so a rolled-back attempt still counts), runs the hot pairs' rendezvous and
 * terminates backends "from another connection".
 */
export class HandlerFaults {
  private constructor(
    private readonly side: pg.Pool,
    private readonly t: ChaosTables,
    private readonly worker: number,
    /** The consumer's `maxAttempts`: a transient fault never fires on the last attempt. */
    private readonly maxAttempts: number,
    /** A loopback port nothing listens on: connecting is refused. */
    private readonly refusedPort: number,
  ) {}

  static async create(
    databaseUrl: string,
    t: ChaosTables,
    worker: number,
    maxAttempts: number,
  ): Promise<HandlerFaults> {
    const side = new pg.Pool({
      connectionString: databaseUrl,
      max: 3,
      connectionTimeoutMillis: 5000,
    });
    side.on('error', () => undefined); // Postgres restarts on purpose
    return new HandlerFaults(side, t, worker, maxAttempts, await closedLoopbackPort());
  }

  async close(): Promise<void> {
    await this.side.end().catch(() => undefined);
  }

  /**
   * Commits `fault` in `tx`, after the message's effect was written there. A `floating`
   * fault comes back as a chain for the handler to leave floating as its very last act
   * (in batch mode, after the whole batch's work): that is when a real handler's
   * forgotten `await` bites, with its query still on the wire when it returns.
   */
  async commit(
    tx: FaultTx,
    key: string,
    attempt: number,
    fault: HandlerFault,
  ): Promise<FloatingChain | undefined> {
    if (fault.kind === 'serialization') {
      await this.hot(tx, key, attempt, fault);
      return undefined;
    }
    if (!(await this.fires(key, attempt, fault))) return undefined;
    switch (fault.kind) {
      case 'swallow':
        // The common shape: "already there? fine". Postgres has aborted the transaction.
        try {
          await tx.query(`INSERT INTO ${this.t.swallowProbe} (id) VALUES (1)`);
        } catch (error) {
          if ((tx.codeOf ?? pgCode)(error) !== UNIQUE_VIOLATION) throw error;
        }
        return undefined;
      case 'deferred':
        await tx.query(`INSERT INTO ${this.t.deferredChild} (key, parent) VALUES ($1, -1)`, [key]);
        return undefined;
      case 'downstream':
        await callDownstream(this.refusedPort);
        return undefined;
      case 'backend-killed':
        await this.killBackend(tx, fault);
        return undefined;
      case 'floating':
        return () => this.leaveFloating(tx, key);
    }
  }

  /**
   * `tx.query(a).then(() => tx.query(b))`, not awaited. `b` records the transaction it
   * ran in: the checker wants it to be the one that applied the key, or nothing.
   */
  private leaveFloating(tx: FaultTx, key: string): void {
    void tx
      .query('SELECT pg_sleep(0.02)')
      .then(() => tx.query(`INSERT INTO ${this.t.floatingLate} (key) VALUES ($1)`, [key]))
      .catch(() => undefined);
  }

  /**
   * Whether a fault fires on this run, logged (with autocommit) when it does. Permanent:
   * always. Transient (`fires` n): on the key's first n runs, counted in the log so
   * retries that spend no attempt (an infrastructure retry keeps Kafka's attempt) end
   * it too; never on the last attempt, so a transient fault cannot be what exhausts
   * them (an SQS receive count also grows with kills and outages before the handler).
   */
  private async fires(key: string, attempt: number, fault: HandlerFault): Promise<boolean> {
    const label = faultLabel(fault);
    if (!('fires' in fault) || fault.fires === 'always') {
      await this.log(key, attempt, label, null);
      return true;
    }
    if (attempt >= this.maxAttempts) return false;
    const { rowCount } = await this.side.query(
      `INSERT INTO ${this.t.faultLog} (key, kind, attempt, worker, pid)
         SELECT $1, $2, $3, $4, $5
          WHERE (SELECT count(*) FROM ${this.t.faultLog} WHERE key = $1 AND code IS NULL) < $6`,
      [key, label, attempt, this.worker, process.pid, fault.fires],
    );
    return rowCount === 1;
  }

  private async log(
    key: string,
    attempt: number,
    kind: string,
    code: string | null,
  ): Promise<void> {
    await this.side.query(
      `INSERT INTO ${this.t.faultLog} (key, kind, code, attempt, worker, pid) VALUES ($1, $2, $3, $4, $5, $6)`,
      [key, kind, code, attempt, this.worker, process.pid],
    );
  }

  private async killBackend(
    tx: FaultTx,
    fault: Extract<HandlerFault, { kind: 'backend-killed' }>,
  ): Promise<void> {
    let error: unknown;
    try {
      if (fault.by === 'self') {
        await tx.query('SELECT pg_terminate_backend(pg_backend_pid())');
      } else {
        const { rows } = await tx.query('SELECT pg_backend_pid() AS pid');
        // The two-argument form waits (up to 5 s) until the backend is gone.
        await this.side.query('SELECT pg_terminate_backend($1, 5000)', [rows[0]?.pid]);
        await tx.query('SELECT 1');
      }
    } catch (caught) {
      error = caught;
    }
    if (error === undefined)
      throw new Error(`backend-killed/${fault.by}: the backend survived pg_terminate_backend`);
    // pg rejects with Error instances; anything else is wrapped so it still reads.
    if (fault.then === 'throw')
      throw error instanceof Error ? error : new Error('backend-killed', { cause: error });
  }

  /**
   * A hot message's effect also adds 1 to each of its two hot rows. Both members of a
   * pair first wait for each other (the claim has already taken the snapshot). Same
   * order: the second to reach the first row waits for, or comes after, the other's
   * commit, which its snapshot does not see (40001 at REPEATABLE READ and above).
   * Opposite orders: each takes its first row and waits until the other holds its own,
   * so the second updates deadlock (40P01). Each failure seen is logged; a `swallow`
   * member catches it and returns. Retries find the partner's marks: no more waiting.
   */
  private async hot(
    tx: FaultTx,
    key: string,
    attempt: number,
    fault: Extract<HandlerFault, { kind: 'serialization' }>,
  ): Promise<void> {
    const update = `UPDATE ${this.t.hotRows} SET n = n + 1 WHERE id = $1`;
    await this.meet(fault.pair, key, attempt, 'arrived');
    try {
      await tx.query(update, [fault.rows[0]]);
      if (fault.order === 'opposite') await this.meet(fault.pair, key, attempt, 'holding');
      else if (tx.run !== undefined) await tx.run(`SELECT pg_sleep(${HOT_HOLD_S})`);
      else await tx.query(`SELECT pg_sleep(${HOT_HOLD_S})`);
      await tx.query(update, [fault.rows[1]]);
    } catch (error) {
      const code = (tx.codeOf ?? pgCode)(error);
      if (code !== SERIALIZATION_FAILURE && code !== DEADLOCK_DETECTED) throw error;
      await this.log(key, attempt, faultLabel(fault), code).catch(() => undefined);
      if (fault.then === 'throw') throw error;
    }
  }

  /**
   * Marks `phase` reached by `key` and waits (up to RENDEZVOUS_MS[phase]) until its partner
   * reached it too; a partner that never came is logged (`hot-pair-alone`), so a run
   * without contention says why.
   */
  private async meet(
    pair: number,
    key: string,
    attempt: number,
    phase: 'arrived' | 'holding',
  ): Promise<void> {
    const { hotArrivals } = this.t;
    await this.side.query(
      `INSERT INTO ${hotArrivals} (pair, key, phase) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
      [pair, key, phase],
    );
    const deadline = Date.now() + RENDEZVOUS_MS[phase];
    while (Date.now() < deadline) {
      const { rowCount } = await this.side.query(
        `SELECT 1 FROM ${hotArrivals} WHERE pair = $1 AND key <> $2 AND phase = $3`,
        [pair, key, phase],
      );
      if (rowCount !== null && rowCount > 0) return;
      await sleep(25);
    }
    await this.log(key, attempt, HOT_PAIR_ALONE, phase).catch(() => undefined);
  }
}

/** A loopback port that was free a moment ago and is closed now: connecting is refused. */
async function closedLoopbackPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** An HTTP call to a downstream service that is not there: rejects with the client's error (ECONNREFUSED). */
function callDownstream(port: number): Promise<void> {
  return new Promise((_, reject) => {
    const request = http.get(
      { host: '127.0.0.1', port, path: '/chaos', agent: false, timeout: 5000 },
      (response) => {
        response.resume();
        reject(
          new Error(`downstream on port ${port} answered ${response.statusCode}; it should refuse`),
        );
      },
    );
    request.on('timeout', () => request.destroy(new Error('downstream call timed out')));
    request.on('error', reject);
  });
}

function pgCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}
