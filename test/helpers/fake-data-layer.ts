/**
 * A data layer that is no database (src/data-layer.ts): it records the statements the
 * library runs through it and the layer's own BEGIN / COMMIT / ROLLBACK, and answers
 * from a script, so a unit test can drive LayerClaimTransaction through every outcome.
 * Its errors wrap the server's the way an ORM does (`LayerError.inner`), so the tests
 * also prove the library reads them through `serverError`.
 */
import type { Pool } from 'pg';
import type { DataLayer, LayerTransactionSettings, SqlResult } from '../../src/data-layer.js';

/** The transaction object the fake hands out as `ctx.tx`. */
export interface FakeLayerTx {
  readonly kind: 'fake-layer-tx';
  readonly id: number;
}

/** An error of the layer's own, with the server's inside (as Prisma's or TypeORM's). */
export class LayerError extends Error {
  constructor(
    message: string,
    readonly inner: unknown,
  ) {
    super(message);
  }
}

/** An error the server answered, shaped as node-postgres reports it. */
export function serverError(code: string, severity = 'ERROR', message = code): Error {
  return Object.assign(new Error(message), { code, severity });
}

/** A lost connection: no server answer inside. */
export function connectionLost(): Error {
  return Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
}

/** How a statement through `sql(tx)` is answered: rows, or a throw. */
export type Answer = { rows: object[] } | Error;

export class FakeLayer implements DataLayer<FakeLayerTx> {
  readonly name = 'fake';
  /** BEGIN, each statement's text, COMMIT or ROLLBACK, in order. */
  readonly log: string[] = [];
  readonly settings: LayerTransactionSettings[] = [];
  /** What the layer's transaction rejects with after COMMIT; undefined: it resolves. */
  commitError: unknown;
  /** What opening the transaction rejects with; undefined: it opens. */
  openError: unknown;
  /** Never opens (a layer whose pool is exhausted). */
  neverOpens = false;
  /** What the layer rejected or resolved with, per transaction. */
  readonly settled: Array<{ kind: 'resolved' } | { kind: 'rejected'; error: unknown }> = [];
  private transactions = 0;
  private opensLater: (() => void) | undefined;

  /** `answer(text, values)`: the statement's answer; default rows as the library expects. */
  constructor(
    readonly answer: (text: string, values?: readonly unknown[]) => Answer | undefined = () =>
      undefined,
  ) {}

  async transaction<T>(
    settings: LayerTransactionSettings,
    body: (tx: FakeLayerTx) => Promise<T>,
  ): Promise<T> {
    this.settings.push(settings);
    if (this.openError !== undefined) throw new LayerError('could not open', this.openError);
    if (this.neverOpens) await new Promise<void>((resolve) => (this.opensLater = resolve));
    this.log.push('BEGIN');
    let value: T;
    try {
      value = await body({ kind: 'fake-layer-tx', id: ++this.transactions });
    } catch (error) {
      this.log.push('ROLLBACK');
      this.settled.push({ kind: 'rejected', error });
      throw error;
    }
    this.log.push('COMMIT');
    if (this.commitError !== undefined) {
      const error = new LayerError('commit failed', this.commitError);
      this.settled.push({ kind: 'rejected', error });
      throw error;
    }
    this.settled.push({ kind: 'resolved' });
    return value;
  }

  /** Lets a transaction that never opened open now. */
  openNow(): void {
    this.neverOpens = false;
    this.opensLater?.();
  }

  sql(tx: FakeLayerTx) {
    return {
      query: async <R extends object>(
        text: string,
        values?: readonly unknown[],
      ): Promise<SqlResult<R>> => {
        this.log.push(text);
        const answer = this.answer(text, values) ?? defaultAnswer(text, tx);
        if (answer instanceof Error) throw new LayerError('query failed', answer);
        return { rows: answer.rows as R[], rowCount: answer.rows.length };
      },
    };
  }

  serverError(error: unknown): unknown {
    return error instanceof LayerError ? error.inner : error;
  }
}

function defaultAnswer(text: string, tx: FakeLayerTx): Answer {
  if (text.startsWith('SELECT pg_backend_pid()'))
    return { rows: [{ pid: 4242, started: `17000000000${tx.id}` }] };
  return { rows: [] };
}

/**
 * The library's pool beside the layer: answers `pg_xact_status` from `statuses` (in
 * turn, the last one repeated) and records every statement (the cancels among them).
 */
export class FakePool {
  readonly asked: Array<{ text: string; values: unknown[] | undefined }> = [];
  idleCount = 1;
  waitingCount = 0;
  /** Held until resolved: the answer to `pg_terminate_backend` (to see what waits for it). */
  terminated: Promise<void> = Promise.resolve();

  constructor(public statuses: Array<string | null> = ['committed']) {}

  async connect() {
    return {
      query: async (text: string, values?: unknown[]) => {
        this.asked.push({ text, values });
        if (text.includes('pg_terminate_backend')) await this.terminated;
        if (text.includes('pg_xact_status')) {
          const status = this.statuses.length > 1 ? this.statuses.shift()! : this.statuses[0];
          return { rows: [{ status }] };
        }
        return { rows: [] };
      },
      release: () => undefined,
    };
  }

  /** The statements whose text contains `part`. */
  statements(part: string): Array<{ text: string; values: unknown[] | undefined }> {
    return this.asked.filter((q) => q.text.includes(part));
  }

  asPool(): Pool {
    return this as unknown as Pool;
  }
}
