import type { BrokerName } from '../kit/services/private.js';

export interface Endpoints {
  databaseUrl: string;
  sqsEndpoint?: string | undefined;
  kafkaBrokers?: string | undefined;
}

export interface RunningServices {
  endpoints: Endpoints;
  /** Which services the bench started itself (and stops in `stop`). */
  started: string[];
  stop(): Promise<void>;
}

/**
 * Uses DATABASE_URL and SQS_ENDPOINT / KAFKA_BROKERS when set; starts what is missing
 * natively (no Docker) with the integration tests' service helpers, and stops it in `stop`.
 */
export async function ensureServices(broker: BrokerName | null): Promise<RunningServices> {
  // null: Postgres alone (the HTTP bench).
  const brokerEnv =
    broker === null ? 'DATABASE_URL' : broker === 'sqs' ? 'SQS_ENDPOINT' : 'KAFKA_BROKERS';
  const missing = [
    ...(process.env['DATABASE_URL'] ? [] : ['postgres']),
    ...(broker === null || process.env[brokerEnv] ? [] : [broker]),
  ];
  let stop = async (): Promise<void> => {};
  if (missing.length > 0) {
    console.log(
      `[bench] starting ${missing.join(' and ')} (set ${broker === null ? 'DATABASE_URL' : `DATABASE_URL / ${brokerEnv}`} to use your own)`,
    );
    process.env['EO_SERVICES'] = missing.join(',');
    const services = await import('../kit/services/index.js');
    await services.startServices();
    stop = () => services.stopServices();
  }
  const databaseUrl = process.env['DATABASE_URL'];
  if (!databaseUrl) throw new Error('bench: DATABASE_URL is still unset after starting Postgres');
  return {
    endpoints: {
      databaseUrl,
      sqsEndpoint: broker === 'sqs' ? process.env['SQS_ENDPOINT'] : undefined,
      kafkaBrokers: broker === 'kafka' ? process.env['KAFKA_BROKERS'] : undefined,
    },
    started: missing,
    stop,
  };
}
