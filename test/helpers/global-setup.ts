import { tsImport } from 'tsx/esm/api';

type Services = typeof import('../../kit/services/index.js');

/**
 * Integration project only: start Postgres, the SQS emulator and Kafka (or
 * use the endpoints given in DATABASE_URL / SQS_ENDPOINT / KAFKA_BROKERS).
 *
 * Why tsImport: jest loads this file through Node's own ESM loader, which
 * neither maps `./x.js` to `./x.ts` nor strips types, so static imports of
 * our .ts modules fail here (unlike in test files, which jest's module
 * system loads). tsx compiles the services modules for this one import.
 */
export default async function globalSetup(): Promise<void> {
  const services = (await tsImport('../../kit/services/index.ts', import.meta.url)) as Services;
  await services.startServices();
}
