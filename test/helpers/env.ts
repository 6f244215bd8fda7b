/**
 * Endpoints of the integration test services. Global setup sets them (or
 * they come from the environment, e.g. a CI service container); reading one
 * that is unset is a setup problem, so the error says how to fix it.
 */
function required(name: string, what: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(
      `${name} is not set: ${what} is unavailable. Run integration tests with \`npm run test:integration\` ` +
        `(global setup starts the services) or set ${name} to an existing endpoint` +
        (process.env['EO_SERVICES']
          ? ` (EO_SERVICES=${process.env['EO_SERVICES']} may leave it out)`
          : ''),
    );
  }
  return value;
}

/** Postgres connection string, e.g. postgres://postgres:postgres@127.0.0.1:5432/effectively_once */
export function databaseUrl(): string {
  return required('DATABASE_URL', 'Postgres');
}

/** SQS-compatible endpoint (ElasticMQ or LocalStack), e.g. http://127.0.0.1:9324 */
export function sqsEndpoint(): string {
  return required('SQS_ENDPOINT', 'the SQS emulator');
}

/** Kafka bootstrap brokers, from the comma-separated KAFKA_BROKERS. */
export function kafkaBrokers(): string[] {
  const brokers = required('KAFKA_BROKERS', 'Kafka')
    .split(',')
    .map((b) => b.trim())
    .filter(Boolean);
  if (brokers.length === 0) throw new Error('KAFKA_BROKERS has no broker in it');
  return brokers;
}
