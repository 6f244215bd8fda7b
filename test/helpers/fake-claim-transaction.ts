/**
 * A claim transaction that is no database (src/tx/claim-transaction.ts): it records what
 * the driver asks of it, so a test can prove the driver, or a door on it, reaches the
 * transaction only through the interface.
 */
import type { Pool, PoolClient } from 'pg';
import type { SqlRunner } from '../../src/data-layer.js';
import { DatabaseError } from '../../src/errors.js';
import type {
  ClaimTransaction,
  ClaimTransactions,
  FailedAttempt,
  OutsideCommit,
  TransactionEnd,
  WorkResult,
} from '../../src/tx/claim-transaction.js';

/** What the handler gets as `ctx.tx` from the fake: no pg client at all. */
export interface FakeTx {
  readonly kind: 'fake-tx';
}

/** A claim transaction that is no database: it records what the driver asks of it. */
export class FakeTransaction implements ClaimTransaction<FakeTx> {
  readonly calls: string[] = [];
  readonly tx: FakeTx = { kind: 'fake-tx' };
  /** The library's statements: recorded, answered with no rows. */
  readonly client: SqlRunner & { readonly fake: string } = {
    fake: 'library client',
    query: async (text: string) => {
      this.calls.push(`query ${text}`);
      return { rows: [], rowCount: 0 };
    },
  };
  /** Stands for the library's own pg client (the doors' one-round-trip claims take it). */
  readonly pg = this.client as unknown as PoolClient;
  /** Stands for the database's pool (a statement outside the transaction). */
  readonly pool = this.client as unknown as Pool;
  lateUse = undefined;
  finishWith: TransactionEnd = { kind: 'committed', warning: undefined };

  constructor(
    readonly key: string,
    private readonly hardStop: AbortSignal,
  ) {}

  async untilHardStop<T>(work: Promise<T>): Promise<T | undefined> {
    this.calls.push('untilHardStop');
    if (this.hardStop.aborted) return undefined;
    return work;
  }
  /** What claimFailed files a failed claim as; default an infrastructure DatabaseError. */
  claimFailure: FailedAttempt | undefined;

  async claimFailed(cause: unknown, waitMs: number): Promise<FailedAttempt> {
    this.calls.push(`claimFailed(${waitMs})`);
    if (this.claimFailure !== undefined) return this.claimFailure;
    return {
      kind: 'failed',
      error: new DatabaseError('claim', cause),
      infrastructure: true,
      conflict: false,
    };
  }
  sealTx(): void {
    this.calls.push('sealTx');
  }
  async settleTx(): Promise<void> {
    this.calls.push('settleTx');
  }
  async committedOutside(): Promise<OutsideCommit> {
    this.calls.push('committedOutside');
    return 'not-committed';
  }
  async finish(work: WorkResult, xid: string): Promise<TransactionEnd> {
    this.calls.push(`finish(${work.kind}, ${xid})`);
    return this.finishWith;
  }
  async rollback(): Promise<void> {
    this.calls.push('rollback');
  }
  close(failure?: unknown): void {
    this.calls.push(failure === undefined ? 'close' : 'close(destroy)');
  }
}

export function fakeTransactions(
  hardStop = new AbortController().signal,
  configure: (conn: FakeTransaction) => void = () => undefined,
): {
  transactions: ClaimTransactions<FakeTx>;
  opened: FakeTransaction[];
} {
  const opened: FakeTransaction[] = [];
  return {
    opened,
    transactions: {
      hardStop,
      claimBegins: true,
      open: async (key) => {
        const conn = new FakeTransaction(key, hardStop);
        configure(conn);
        opened.push(conn);
        return conn;
      },
    },
  };
}
