import type { EntityManager, QueryRunner } from 'typeorm';

/** What this needs of pg's client: its 'error' event. */
interface ErrorEmitter {
  on(event: 'error', listener: (error: unknown) => void): unknown;
  removeListener(event: 'error', listener: (error: unknown) => void): unknown;
}

/**
 * The first error the transaction's pg connection emitted. A FATAL the server sends
 * while the session is idle (pg_terminate_backend, idle_in_transaction_session_timeout)
 * reaches pg as the client's 'error' event, on which TypeORM releases the query runner:
 * the COMMIT after it fails with TypeORM's QueryRunnerAlreadyReleasedError, which no
 * longer says what the server answered. This keeps that answer.
 */
export class ConnectionErrorWatch {
  /** The watch of each query runner a transaction runs on, for its sql(tx) statements. */
  private static readonly byRunner = new WeakMap<QueryRunner, ConnectionErrorWatch>();

  /** The watch on `runner`'s connection, if a typeormLayer transaction runs on it. */
  static of(runner: QueryRunner): ConnectionErrorWatch | undefined {
    return ConnectionErrorWatch.byRunner.get(runner);
  }

  private error: unknown;
  private stop: (() => void) | undefined;

  /** Listens on the connection of `manager`'s query runner (QueryRunner.connect gives pg's client). */
  async watch(manager: EntityManager): Promise<void> {
    const runner = manager.queryRunner;
    if (runner === undefined) return;
    ConnectionErrorWatch.byRunner.set(runner, this);
    const client = (await runner.connect()) as ErrorEmitter;
    const record = (error: unknown) => {
      this.error ??= error;
    };
    client.on('error', record);
    this.stop = () => client.removeListener('error', record);
  }

  /**
   * The connection's error in place of `failure` when `failure` is TypeORM's released
   * query runner (no answer of its own), or `failure` as it is.
   */
  explain(failure: unknown): unknown {
    const released = failure instanceof Error && failure.name === 'QueryRunnerAlreadyReleasedError';
    return released && this.error !== undefined ? this.error : failure;
  }

  /** Stops listening (the connection goes back to TypeORM's pool). */
  close(): void {
    this.stop?.();
    this.stop = undefined;
  }
}
