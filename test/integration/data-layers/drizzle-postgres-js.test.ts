/**
 * The shared guarantee matrices (consumer and request side) on Drizzle over postgres.js
 * (effectively-once/drizzle), the effect `tx.insert(table).values(…)`.
 */
import { fileURLToPath } from 'node:url';
import { drizzlePostgresJsFixture } from './drizzle-postgres-js.fixture.js';
import { consumerMatrix } from './matrix-consumer.js';
import { httpMatrix } from './matrix-http.js';

consumerMatrix(drizzlePostgresJsFixture, {
  path: fileURLToPath(new URL('./drizzle-postgres-js.fixture.ts', import.meta.url)),
  exportName: 'drizzlePostgresJsFixture',
});

httpMatrix(drizzlePostgresJsFixture);
