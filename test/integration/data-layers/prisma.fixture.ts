import { prismaLayer } from 'effectively-once/prisma';
import { prismaClient, type PrismaClient } from '../../../kit/prisma/client.js';
import type { LayerFixture } from './fixture.js';

export { prismaClient };

/** Prisma's interactive transaction client for the test schema (kit/prisma/schema.prisma). */
export type PrismaTx = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0];

/** Thrown by the handler to roll Prisma's interactive transaction back: Prisma's own way. */
export class PrismaRollback extends Error {
  constructor() {
    super('rolled back by the handler (Prisma: the interactive callback rejects)');
    this.name = 'PrismaRollback';
  }
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
