/**
 * The consumer and HTTP matrices on Prisma 7 over `@prisma/adapter-pg`: the effect written
 * with the model's `create` on Prisma's interactive transaction client, the claim in the
 * same transaction through the bridge (adapters/prisma).
 */
import { fileURLToPath } from 'node:url';
import { consumerMatrix } from './matrix-consumer.js';
import { httpMatrix } from './matrix-http.js';
import { prismaFixture } from './prisma.fixture.js';

consumerMatrix(prismaFixture, {
  path: fileURLToPath(new URL('./prisma.fixture.ts', import.meta.url)),
  exportName: 'prismaFixture',
});

httpMatrix(prismaFixture);
