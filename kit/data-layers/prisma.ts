import { prismaLayer } from 'effectively-once/prisma';
import { prismaClient } from '../prisma/client.js';
import type { LayerRow, OpenedLayer } from './index.js';

/**
 * Prisma's interactive transaction client, as the shared client types it (the harness's
 * handlers write raw SQL and use none of its models).
 */
type PrismaTx = Parameters<Parameters<ReturnType<typeof prismaClient>['$transaction']>[0]>[0];

/** Prisma 7 over `@prisma/adapter-pg` (a pg pool of `poolSize`), no engine binary. */
export async function openPrisma(
  databaseUrl: string,
  poolSize: number,
): Promise<OpenedLayer<PrismaTx>> {
  const prisma = prismaClient(databaseUrl, { max: poolSize });
  return {
    name: 'prisma',
    layer: prismaLayer(prisma),
    exec: async (tx, text, values = []) => {
      await tx.$executeRawUnsafe(text, ...values);
    },
    query: (tx, text, values = []) => tx.$queryRawUnsafe<LayerRow[]>(text, ...values),
    close: () => prisma.$disconnect(),
  };
}
