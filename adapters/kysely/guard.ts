import {
  CompiledQuery,
  type KyselyPlugin,
  type OperationNode,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RawNode,
  type RootOperationNode,
  type Transaction,
  type UnknownRow,
} from 'kysely';
import { TransactionControlError } from '../../src/errors.js';
import { isTransactionControl } from '../../src/tx/guard.js';

// What the handler's `ctx.tx` refuses, as a plugin on Kysely's own transaction object (so
// it stays a `Transaction<DB>`, typed and used as Kysely's docs show):
// - a statement that ends or replaces the transaction (`sql\`commit\``): Kysely commits
//   after the body, so a handler's own COMMIT would have its later statements run in
//   autocommit, and its own ROLLBACK would have Kysely's COMMIT succeed on nothing (the
//   claim gone with it, the message acked with no effect);
// - every statement once the body settled: Kysely marks its transaction ended only after
//   COMMIT's answer, so a statement the handler left floating would otherwise queue
//   behind COMMIT on the same connection and run in autocommit, outside the claim.
// And what passed the guard before it sealed runs before COMMIT (or ROLLBACK): Kysely
// sends a transaction's statements one at a time, holding the others in a queue of its
// own, but sends COMMIT and ROLLBACK past that queue, so a statement still waiting in it
// would go out after them, in autocommit.

/**
 * Runs `body` with `trx` behind the guard; when `body` settles, seals the guard and lets
 * what the handler sent before run, in the transaction, before Kysely sends COMMIT or
 * ROLLBACK.
 */
export async function guardedTransaction<DB, T>(
  trx: Transaction<DB>,
  body: (tx: Transaction<DB>) => Promise<T>,
): Promise<T> {
  const guard = new TransactionGuardPlugin();
  try {
    return await body(trx.withPlugin(guard));
  } finally {
    guard.sealed = true;
    if (guard.unanswered.size > 0) await queueDrained(trx);
  }
}

/**
 * Resolves once every statement sent on `trx` before it has been answered: a statement
 * of its own queues behind them in Kysely's queue (first come, first sent) and is
 * answered after them. Its failure (an aborted transaction, a lost connection) is
 * COMMIT's to report.
 */
async function queueDrained<DB>(trx: Transaction<DB>): Promise<void> {
  await trx
    .withoutPlugins()
    .executeQuery(CompiledQuery.raw('SELECT 1'))
    .catch(() => undefined);
}

/** The guard, as a Kysely plugin: it sees every query built or written with `sql` on `ctx.tx`. */
class TransactionGuardPlugin implements KyselyPlugin {
  sealed = false;
  /**
   * Queries compiled through the guard and not answered yet (or failed, or compiled and
   * never run: Kysely tells a plugin only of results), by query id. Empty: nothing of
   * the handler's can be waiting in Kysely's queue, no need to drain it.
   */
  readonly unanswered = new Set<string>();

  transformQuery({ node, queryId }: PluginTransformQueryArgs): RootOperationNode {
    if (this.sealed)
      throw new TransactionControlError(
        "the handler's work is over: a statement sent through ctx.tx after it is refused",
      );
    if (node.kind === 'RawNode' && isTransactionControl(rawText(node)))
      throw new TransactionControlError(
        'statements that end the transaction are not allowed: the library commits it, ' +
          'after checking the claim is still in it',
      );
    this.unanswered.add(queryId.queryId);
    return node;
  }

  transformResult({
    result,
    queryId,
  }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    this.unanswered.delete(queryId.queryId);
    return Promise.resolve(result);
  }
}

/**
 * The SQL text of a `sql` template, its nested `sql.raw`/`sql.join` fragments spelled
 * out and every other parameter as a placeholder (a bound value, an identifier or a
 * subquery is never a statement of its own).
 */
function rawText(node: OperationNode): string {
  if (!isRawNode(node)) return node.kind === 'ValueNode' ? '$0' : '"x"';
  return node.sqlFragments
    .map((fragment, i) => {
      const parameter = node.parameters[i];
      return parameter === undefined ? fragment : fragment + rawText(parameter);
    })
    .join('');
}

// By its kind, as Kysely's own RawNode.is does, so RawNode is imported as a type only.
function isRawNode(node: OperationNode): node is RawNode {
  return node.kind === 'RawNode';
}
