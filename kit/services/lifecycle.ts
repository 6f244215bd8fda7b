import { servicesToStart, startNative, stopNative, unexportEndpoints } from './setup.js';
import { STATE_ENV, currentState } from './state.js';

/**
 * Entry point for global setup. Provider `native` (default) runs the
 * services from local binaries and Maven jars; EO_TEST_PROVIDER=testcontainers
 * runs containers instead, where a Docker engine exists. Either way the
 * tests only see DATABASE_URL, SQS_ENDPOINT and KAFKA_BROKERS (and PGBOUNCER_URL,
 * natively, when PgBouncer was asked for).
 */
export async function startServices(): Promise<void> {
  const services = servicesToStart();
  if (services.length === 0) return; // every endpoint was given
  const provider = process.env['EO_TEST_PROVIDER'] ?? 'native';
  if (provider === 'native') return startNative(services);
  if (provider === 'testcontainers') {
    // Loaded lazily so the native path never loads testcontainers.
    const { startContainers } = await import('./testcontainers.js');
    return startContainers(services);
  }
  throw new Error(`EO_TEST_PROVIDER=${provider}: expected "native" or "testcontainers"`);
}

/** Entry point for global teardown: stops what startServices started, removes temp dirs. */
export async function stopServices(): Promise<void> {
  if (process.env['EO_TEST_PROVIDER'] === 'testcontainers') {
    const { stopContainers } = await import('./testcontainers.js');
    await stopContainers();
  } else {
    const state = currentState();
    if (state) await stopNative(state);
  }
  delete process.env[STATE_ENV];
  unexportEndpoints();
}
