/**
 * The shared guarantee matrices (consumer and request side) on Drizzle over node-postgres
 * (effectively-once/drizzle), the effect `tx.insert(table).values(…)`.
 */
import { fileURLToPath } from 'node:url';
import { drizzlePgFixture } from './drizzle-pg.fixture.js';
import { consumerMatrix } from './matrix-consumer.js';
import { httpMatrix } from './matrix-http.js';

consumerMatrix(drizzlePgFixture, {
  path: fileURLToPath(new URL('./drizzle-pg.fixture.ts', import.meta.url)),
  exportName: 'drizzlePgFixture',
});

httpMatrix(drizzlePgFixture);
