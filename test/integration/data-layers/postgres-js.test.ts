/**
 * The shared guarantee matrices (consumer and request side) on postgres.js 4
 * (effectively-once/postgres-js), the effect a tagged template inside `sql.begin`.
 */
import { fileURLToPath } from 'node:url';
import { consumerMatrix } from './matrix-consumer.js';
import { httpMatrix } from './matrix-http.js';
import { postgresJsFixture } from './postgres-js.fixture.js';

consumerMatrix(postgresJsFixture, {
  path: fileURLToPath(new URL('./postgres-js.fixture.ts', import.meta.url)),
  exportName: 'postgresJsFixture',
});

httpMatrix(postgresJsFixture);
