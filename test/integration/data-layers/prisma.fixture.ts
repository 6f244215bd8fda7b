import { PrismaPg } from '@prisma/adapter-pg';
import { prismaLayer } from 'effectively-once/prisma';
import type { LayerFixture } from './fixture.js';
import { PrismaClient } from './prisma/generated/client.js';

/** Prisma's interactive transaction client for the test schema (prisma/schema.prisma). */
export type PrismaTx = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0];

/** Thrown by the handler to roll Prisma's interactive transaction back: Prisma's own way. */
export class PrismaRollback extends Error {
  constructor() {
    super('rolled back by the handler (Prisma: the interactive callback rejects)');
    this.name = 'PrismaRollback';
  }
}

/**
 * A Prisma 7 client over `@prisma/adapter-pg`, on `connectionString` (pg's own options,
 * `max` for the pool's size). Prisma names every table with its schema (`public` unless
 * the adapter's `schema` option says otherwise), so the schema a test database's URL sets
 * as its `search_path` (`options=-c search_path=…`) is given to the adapter too.
 */
export function prismaClient(connectionString: string, pool: { max?: number } = {}): PrismaClient {
  const options = new URL(connectionString).searchParams.get('options') ?? '';
  const schema = /search_path=([A-Za-z0-9_]+)/.exec(options)?.[1];
  return new PrismaClient({
    adapter: new PrismaPg({ connectionString, ...pool }, schema === undefined ? {} : { schema }),
  });
}

/**
 * Prisma 7 over `@prisma/adapter-pg`: effects written with the model's `create` on the
 * interactive transaction client; Prisma rolls back when the callback rejects (it has no
 * rollback call of its own in an interactive transaction).
 */
export const prismaFixture: LayerFixture<PrismaTx> = {
  name: 'prisma',
  async open(databaseUrl) {
    const prisma = prismaClient(databaseUrl);
    return {
      layer: prismaLayer(prisma),
      async insertEffect(tx, effect) {
        await tx.layerEffect.create({ data: effect });
      },
      async layerRollback() {
        throw new PrismaRollback();
      },
      close: () => prisma.$disconnect(),
    };
  },
};
