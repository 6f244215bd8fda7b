/**
 * The consumer and HTTP guarantee matrices with Kysely over node-postgres: the handler's
 * `ctx.tx` is Kysely's `Transaction`, the effect written with its query builder
 * (kysely.fixture.ts). The bridge's own tests are in kysely.bridge.test.ts.
 */
import { fileURLToPath } from 'node:url';
import { kyselyFixture } from './kysely.fixture.js';
import { consumerMatrix } from './matrix-consumer.js';
import { httpMatrix } from './matrix-http.js';

consumerMatrix(kyselyFixture, {
  path: fileURLToPath(new URL('./kysely.fixture.ts', import.meta.url)),
  exportName: 'kyselyFixture',
});

httpMatrix(kyselyFixture);
