/**
 * What the data-layer examples share: the tables, the message, an SQS source from the
 * environment, a node:http server for the endpoint, and the run until a signal aborts.
 * Each example (`prisma.ts`, `drizzle.ts`, `knex.ts`, `typeorm.ts`, `kysely.ts`,
 * `postgres-js.ts`) hands `runExample` its data layer's consumer and endpoint.
 */
import http from 'node:http';
import { SQSClient } from '@aws-sdk/client-sqs';
import pg from 'pg';
import type { Consumer, Source } from 'effectively-once';
import { toNodeListener } from 'effectively-once/http';
import { migrateOutbox } from 'effectively-once/outbox';
import { sqsSource } from 'effectively-once/sqs';

/** The consumer's message body. */
export interface OrderPlaced {
  orderId: string;
  totalCents: number;
}

/** The endpoint's request body. */
export interface ChargeRequest {
  amountCents: number;
}

/**
 * The effects table every example writes (one row per order or charge), and the outbox.
 * Created with SQL here; the application's own migrations would do it.
 */
export async function createTables(pool: pg.Pool): Promise<void> {
  await pool.query(`
    CREATE TABLE IF NOT EXISTS layer_effects (
      id     text    PRIMARY KEY,
      door   text    NOT NULL,
      amount integer NOT NULL
    )`);
  await migrateOutbox(pool);
}

/** What `main` of every data-layer example takes. */
export interface ExampleOptions {
  /** Stop when this aborts. Run directly, SIGINT and SIGTERM abort it. */
  signal: AbortSignal;
  /** Where DATABASE_URL, PORT, QUEUE_URL and SQS_ENDPOINT come from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** The orders' source. Default: the SQS queue at QUEUE_URL. */
  source?: Source<OrderPlaced>;
  /** Told the endpoint's base URL once the server listens. */
  onListening?: (url: string) => void;
}

/** One example's application: its consumer and endpoint, and how to close its connections. */
export interface ExampleApp {
  /** The library's own pool (housekeeping, settling COMMITs by xid, ending abandoned backends). */
  pool: pg.Pool;
  consumer: Consumer;
  /** POST /charges. */
  charges: (request: Request) => Promise<Response>;
  /** Closes the endpoint, the data layer's connections, then the pool. */
  close(): Promise<void>;
}

/** Runs `app` (its consumer and its endpoint on PORT) until `signal` aborts. */
export async function runExample(
  build: (databaseUrl: string, source: Source<OrderPlaced>) => Promise<ExampleApp>,
  { signal, env = process.env, source, onListening }: ExampleOptions,
): Promise<void> {
  const sqs = source === undefined ? new SQSClient({ endpoint: env.SQS_ENDPOINT }) : undefined;
  const app = await build(
    required(env, 'DATABASE_URL'),
    source ??
      sqsSource<OrderPlaced>({
        client: sqs!,
        queueUrl: required(env, 'QUEUE_URL'),
        key: 'Idempotency-Key',
      }),
  );
  await createTables(app.pool);
  app.consumer.on('error', (error) => console.error(`orders: ${error.message}`));
  await app.consumer.start();
  const server = http.createServer(
    toNodeListener((request) =>
      request.method === 'POST' && new URL(request.url).pathname === '/charges'
        ? app.charges(request)
        : new Response('not found', { status: 404 }),
    ),
  );
  await new Promise<void>((resolve) =>
    server.listen(Number(env.PORT ?? 3000), '127.0.0.1', resolve),
  );
  const address = server.address();
  if (address !== null && typeof address === 'object')
    onListening?.(`http://127.0.0.1:${address.port}`);

  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await app.consumer.stop({ timeoutMs: 10_000 });
  sqs?.destroy();
  await app.close();
}

/** Runs `main` when the file is the process's entry point. */
export async function runDirectly(
  url: string,
  main: (options: ExampleOptions) => Promise<void>,
): Promise<void> {
  if (process.argv[1] === undefined || url !== new URL(`file://${process.argv[1]}`).href) return;
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  await main({ signal: stop.signal, onListening: (at) => console.log(`listening on ${at}`) });
}

function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}
