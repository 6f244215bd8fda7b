/**
 * `effectively-once/prisma`: the claim's transaction as a Prisma 7 interactive
 * transaction, so a handler writes its effect through Prisma's transaction client
 * (`ctx.tx.order.create(…)`) and the claim, the effect and the stored answer commit
 * together. For Prisma Client 7 over a Postgres driver adapter (`@prisma/adapter-pg`).
 * `@prisma/client` is an optional peer dependency; nothing of it is loaded by this entry
 * (the bridge only calls the client it is given).
 * @packageDocumentation
 * @module effectively-once/prisma
 */
import type { DataLayer, LayerTransactionSettings } from '../../src/data-layer.js';
import { guardPrismaTx } from './control-guard.js';
import { prismaLimits } from './limits.js';
import { prismaSql, type PrismaRawQueries } from './raw-runner.js';
import { prismaServerError } from './server-error.js';

export type { PrismaRawQueries } from './raw-runner.js';

/**
 * What the bridge needs of a Prisma client: its interactive transaction,
 * `$transaction(async (tx) => …, { timeout, maxWait })`. A generated `PrismaClient` and
 * a client made with `$extends` both fit; `Tx` is the transaction client they hand the
 * callback.
 */
export interface PrismaInteractiveClient<Tx> {
  /** Prisma's interactive transaction: commits when `fn` resolves, rolls back when it rejects. */
  $transaction<R>(
    fn: (tx: Tx) => Promise<R>,
    options?: { maxWait?: number; timeout?: number },
  ): Promise<R>;
}

/**
 * The transaction client of a Prisma client type `C`: what `C['$transaction']` hands its
 * callback (for a generated client, the same type as `Prisma.TransactionClient`).
 *
 * @example
 * ```ts
 * type Tx = PrismaTransactionClient<typeof prisma>;
 * ```
 */
export type PrismaTransactionClient<C> = C extends PrismaInteractiveClient<infer Tx> ? Tx : never;

/**
 * A door's claim transaction run as a Prisma interactive transaction on `prisma`:
 * pass it as a door's `dataLayer`, and the handler's `ctx.tx` is Prisma's transaction
 * client, typed from `prisma`. The library's own statements (the claim, the stored
 * answer, outbox rows) run through the transaction client's `$queryRawUnsafe` /
 * `$executeRawUnsafe`, in the same transaction. Prisma's `timeout` is the door's limit plus
 * 5 s (so the door's own timeout, which cancels and rolls back, acts first) and `maxWait`
 * the door's acquire timeout; a door's 0 (no limit) is the longest delay a Node timer
 * keeps, about 24.8 days (Prisma refuses 0). The client's default isolation level is left
 * as it is: the library sets the claim's own with its first statement.
 * Prisma runs the callback once: it has no retry of its own around it.
 *
 * @example
 * ```ts
 * import { PrismaPg } from '@prisma/adapter-pg';
 * import { PrismaClient } from './generated/prisma/client.js';
 * const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString }) });
 * const dataLayer = prismaLayer(prisma);
 * ```
 */
export function prismaLayer<Tx extends PrismaRawQueries>(
  prisma: PrismaInteractiveClient<Tx>,
): DataLayer<Tx> {
  return {
    name: 'prisma',
    transaction<T>(settings: LayerTransactionSettings, body: (tx: Tx) => Promise<T>): Promise<T> {
      // Prisma calls it once, COMMITs after it resolved and answers only once COMMIT did
      // (or failed: the rejection is COMMIT's error). The handler's client is guarded
      // against raw transaction control and the array form of $transaction.
      return prisma.$transaction((tx) => body(guardPrismaTx(tx)), prismaLimits(settings));
    },
    sql: (tx) => prismaSql(tx),
    serverError: prismaServerError,
  };
}
