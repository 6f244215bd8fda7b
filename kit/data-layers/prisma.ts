import { PrismaPg } from '@prisma/adapter-pg';
import { prismaLayer } from 'effectively-once/prisma';
import type { LayerRow, OpenedLayer } from './index.js';

/** What the harness calls on a Prisma client and on its interactive transaction client. */
interface PrismaRaw {
  $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number>;
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T>;
}
interface PrismaClientLike extends PrismaRaw {
  $transaction<R>(
    fn: (tx: PrismaRaw) => Promise<R>,
    options?: { maxWait?: number; timeout?: number },
  ): Promise<R>;
  $disconnect(): Promise<void>;
}
type PrismaClientClass = new (options: { adapter: PrismaPg }) => PrismaClientLike;

/**
 * The Prisma client generated for the data-layer tests (a model the harness does not
 * use: its handlers write raw SQL), reused rather than generated again. kit/ imports
 * nothing of test/ statically (dependency-cruiser); it is loaded by its file's URL.
 */
const GENERATED = new URL(
  '../../test/integration/data-layers/prisma/generated/client.js',
  import.meta.url,
);

/** Prisma 7 over `@prisma/adapter-pg` (a pg pool of `poolSize`), no engine binary. */
export async function openPrisma(
  databaseUrl: string,
  poolSize: number,
): Promise<OpenedLayer<PrismaRaw>> {
  const { PrismaClient } = (await import(GENERATED.href)) as { PrismaClient: PrismaClientClass };
  // Prisma names every table with its schema: the URL's search_path, if it sets one.
  const options = new URL(databaseUrl).searchParams.get('options') ?? '';
  const schema = /search_path=([A-Za-z0-9_]+)/.exec(options)?.[1];
  const prisma = new PrismaClient({
    adapter: new PrismaPg(
      { connectionString: databaseUrl, max: poolSize },
      schema === undefined ? {} : { schema },
    ),
  });
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
