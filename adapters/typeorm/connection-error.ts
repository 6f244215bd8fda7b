import type { EntityManager } from 'typeorm';

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
  private error: unknown;
  private stop: (() => void) | undefined;

  /** Listens on the connection of `manager`'s query runner (QueryRunner.connect gives pg's client). */
  async watch(manager: EntityManager): Promise<void> {
    const runner = manager.queryRunner;
    if (runner === undefined) return;
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
