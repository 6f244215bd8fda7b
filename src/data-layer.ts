// How a door runs its claim transaction through the user's data layer (Prisma, Drizzle,
// Knex, TypeORM, Kysely, postgres.js) instead of a pg client of its own pool. Each layer's
// bridge (adapters/<layer>/) implements DataLayer in that layer's own idiom; the one
// claim-transaction driver (src/tx/drive.ts) reaches it through LayerClaimTransaction
// (src/tx/layer-transaction.ts). See ARCHITECTURE.md, "The claim's transaction,
// wherever it is opened", and docs/data-layers.md.

/** The answer to one statement the library ran through a data layer. */
export interface SqlResult<R> {
  /** The rows it returned (none for a statement without RETURNING). */
  readonly rows: R[];
  /** Rows it affected, where the layer reports it; null where it does not. */
  readonly rowCount: number | null;
}

/**
 * Runs the library's own statements in one place (inside a transaction, or outside any).
 * Each call is one statement with `$1…` placeholders bound to `values` in order; values
 * are strings, numbers, booleans, null, Buffers or arrays of those; results come back as
 * the layer decodes them (the library casts what it reads to `text` where it matters).
 * It satisfies the outbox's `Queryable`: `enqueue(layer.sql(tx), message)` writes the
 * row in the layer's transaction.
 */
export interface SqlRunner {
  /** Runs `text`, one statement, with `$1…` bound to `values`. */
  query<R extends object = Record<string, unknown>>(
    text: string,
    values?: readonly unknown[],
  ): Promise<SqlResult<R>>;
}

/** What a door asks of the transaction it has a data layer open. */
export interface LayerTransactionSettings {
  /**
   * The longest the door lets the work inside the transaction run, in ms (the claim, the
   * handler, the stored answer; 0: no limit of the door's). A transaction limit of the
   * layer's own (Prisma's interactive `timeout`) must not be shorter: set it from this.
   */
  readonly timeoutMs: number;
  /** The longest wait for one of the layer's connections, in ms (Prisma's `maxWait`). */
  readonly acquireTimeoutMs: number;
}

/**
 * A data layer's transactions, as a door needs them. `Tx` is the layer's own transaction
 * object (Prisma's transaction client, a Knex `Transaction`, a TypeORM `EntityManager`,
 * a Drizzle or Kysely transaction, postgres.js's `sql` inside `begin`): what the handler
 * gets as `ctx.tx`, to write its effect exactly as the layer's docs show.
 *
 * What an implementation must hold to:
 * - {@link DataLayer.transaction} runs `body` in one database transaction on one connection, and
 *   {@link DataLayer.sql}`(tx)` runs on that same transaction: the claim, the effect, the stored
 *   answer and outbox rows commit together or not at all.
 * - COMMIT is sent only after `body` resolved, ROLLBACK when it rejected, and the
 *   returned promise settles only once the server answered (or the connection is gone):
 *   a rejection after `body` resolved is COMMIT's failure, whose cause
 *   {@link DataLayer.serverError} must expose.
 * - Nothing of the layer's own runs `body` twice (no retry helper around it).
 */
export interface DataLayer<Tx> {
  /** For logs, errors and telemetry: `prisma`, `knex`, `drizzle`… */
  readonly name: string;
  /**
   * Opens a transaction in the layer's own idiom (`prisma.$transaction(fn)`,
   * `knex.transaction(fn)`, `sql.begin(fn)`…), runs `body` with the layer's transaction
   * object, commits when `body` resolves and rolls back when it rejects. Resolves with
   * `body`'s value once COMMIT succeeded; rejects with what `body` threw, or with COMMIT's
   * (or BEGIN's, or the connection's) failure as the layer reports it.
   */
  transaction<T>(settings: LayerTransactionSettings, body: (tx: Tx) => Promise<T>): Promise<T>;
  /** The library's statements inside `tx`, on its connection, in its transaction. */
  sql(tx: Tx): SqlRunner;
  /**
   * The Postgres error inside an error the layer threw, shaped as node-postgres reports
   * it (`code`: the SQLSTATE, `severity`: `ERROR`, `FATAL`…), so the library can tell an
   * answer of the server's (a known outcome) from a lost connection (unknown). An error
   * with no server answer inside (a socket's, a pool's) is returned as it is.
   */
  serverError(error: unknown): unknown;
}
