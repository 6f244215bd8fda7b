/**
 * The consumer and HTTP matrices on the reference data layer (a plain pg Pool with a callback
 * transaction): proves the matrix and LayerClaimTransaction themselves, before any real
 * layer runs them.
 */
import { fileURLToPath } from 'node:url';
import { consumerMatrix } from './matrix-consumer.js';
import { httpMatrix } from './matrix-http.js';
import { pgLayerFixture } from './pg-layer.fixture.js';

consumerMatrix(pgLayerFixture, {
  path: fileURLToPath(new URL('./pg-layer.fixture.ts', import.meta.url)),
  exportName: 'pgLayerFixture',
});

httpMatrix(pgLayerFixture);
