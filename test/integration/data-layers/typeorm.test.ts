/**
 * The consumer and HTTP guarantee matrices on TypeORM 1.x (postgres driver): the effect
 * written with a repository of the transaction's EntityManager, the layer's rollback by
 * its query runner. The bridge's own cases are in typeorm.bridge.test.ts.
 */
import { fileURLToPath } from 'node:url';
import { consumerMatrix } from './matrix-consumer.js';
import { httpMatrix } from './matrix-http.js';
import { typeormFixture } from './typeorm.fixture.js';

consumerMatrix(typeormFixture, {
  path: fileURLToPath(new URL('./typeorm.fixture.ts', import.meta.url)),
  exportName: 'typeormFixture',
});

httpMatrix(typeormFixture);
