import { ensureServices as ensureRunServices, type BrokerName } from '../kit/services/private.js';

export interface Endpoints {
  databaseUrl: string;
  sqsEndpoint?: string | undefined;
  kafkaBrokers?: string | undefined;
  rabbitmqUrl?: string | undefined;
}

export interface RunningServices {
  endpoints: Endpoints;
  /** Which services the bench started itself (and stops in `stop`). */
  started: string[];
  stop(): Promise<void>;
}

/**
 * The bench's view of a run's services (kit/services/private.ts, the one provider):
 * DATABASE_URL and SQS_ENDPOINT / KAFKA_BROKERS / RABBITMQ_URL when set, else started natively for
 * this run and stopped in `stop`. `broker` null: Postgres alone (the HTTP bench).
 */
export async function ensureServices(broker: BrokerName | null): Promise<RunningServices> {
  const services = await ensureRunServices(broker, (line) => console.log(`[bench] ${line}`));
  return {
    endpoints: {
      databaseUrl: services.databaseUrl,
      sqsEndpoint: broker === 'sqs' ? services.brokerEndpoint : undefined,
      kafkaBrokers: broker === 'kafka' ? services.brokerEndpoint : undefined,
      rabbitmqUrl: broker === 'rabbitmq' ? services.brokerEndpoint : undefined,
    },
    started: services.started,
    stop: () => services.stop(),
  };
}
