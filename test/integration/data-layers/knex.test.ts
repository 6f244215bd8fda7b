/**
 * The shared guarantee matrices (the consumer's and the request side's) on Knex 3 over
 * node-postgres: the effect written with Knex's query builder on the handler's `trx`,
 * the layer's own rollback `trx.rollback()` (knex.fixture.ts). The bridge's own cases
 * are in knex.bridge.test.ts.
 */
import { fileURLToPath } from 'node:url';
import { knexFixture } from './knex.fixture.js';
import { consumerMatrix } from './matrix-consumer.js';
import { httpMatrix } from './matrix-http.js';

consumerMatrix(knexFixture, {
  path: fileURLToPath(new URL('./knex.fixture.ts', import.meta.url)),
  exportName: 'knexFixture',
});

httpMatrix(knexFixture);
