import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SendMessageCommand,
  SQSClient,
  type SendMessageCommandInput,
} from '@aws-sdk/client-sqs';
import pg from 'pg';
import { databaseUrl, sqsEndpoint } from '../../helpers/env.js';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** A database of its own for one example run: examples create their tables with fixed names. */
export interface ExampleDatabase {
  url: string;
  pool: pg.Pool;
  drop(): Promise<void>;
}

export async function createExampleDatabase(prefix: string): Promise<ExampleDatabase> {
  const name = `ex_${prefix}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: databaseUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(databaseUrl());
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 3 });
  pool.on('error', () => undefined);
  return {
    url: url.toString(),
    pool,
    drop: async () => {
      await pool.end();
      const client = new pg.Client({ connectionString: databaseUrl() });
      await client.connect();
      // pool.end() resolves before its clients' sessions are gone; FORCE would terminate
      // one still closing, and its pool (an example's, with no 'error' listener, as pg
      // leaves the idle listener on a client it ends) would throw. Wait for them first.
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline) {
        const { rows } = await client.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1',
          [name],
        );
        if (rows[0]?.n === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
      await client.end();
    },
  };
}

/** Queues created by one test file; `cleanup()` deletes them. */
export class ExampleQueues {
  readonly client = new SQSClient({
    region: 'us-east-1',
    endpoint: sqsEndpoint(),
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  private readonly urls: string[] = [];

  async create(prefix: string, fifo = false): Promise<string> {
    const name = `ex-${prefix}-${randomBytes(4).toString('hex')}${fifo ? '.fifo' : ''}`;
    const out = await this.client.send(
      new CreateQueueCommand({
        QueueName: name,
        Attributes: { VisibilityTimeout: '10', ...(fifo ? { FifoQueue: 'true' } : {}) },
      }),
    );
    if (!out.QueueUrl) throw new Error(`no URL for queue ${name}`);
    this.urls.push(out.QueueUrl);
    return out.QueueUrl;
  }

  /** Sends `body` as JSON; `key` goes into the `Idempotency-Key` attribute. */
  async send(
    queueUrl: string,
    body: unknown,
    key?: string,
    extra: Partial<SendMessageCommandInput> = {},
  ): Promise<void> {
    await this.client.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: JSON.stringify(body),
        ...(key
          ? { MessageAttributes: { 'Idempotency-Key': { DataType: 'String', StringValue: key } } }
          : {}),
        ...extra,
      }),
    );
  }

  /** Visible + in flight + delayed. */
  async depth(queueUrl: string): Promise<number> {
    const { Attributes: a = {} } = await this.client.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['All'] }),
    );
    return (
      Number(a.ApproximateNumberOfMessages ?? 0) +
      Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
      Number(a.ApproximateNumberOfMessagesDelayed ?? 0)
    );
  }

  async cleanup(): Promise<void> {
    await Promise.allSettled(
      this.urls.map((url) => this.client.send(new DeleteQueueCommand({ QueueUrl: url }))),
    );
    this.client.destroy();
  }
}

/** Env for an SQS example: endpoints plus what the AWS SDK needs for an emulator. */
export function sqsExampleEnv(databaseUrl: string, queueUrl: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    DATABASE_URL: databaseUrl,
    QUEUE_URL: queueUrl,
    SQS_ENDPOINT: sqsEndpoint(),
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  };
}

/** A TypeScript file run by Node with tsx, the way `npx tsx file.ts` would. */
export interface TsProcess {
  child: ChildProcess;
  output(): string;
  /** Resolves with the exit code (or the signal name). */
  exited: Promise<number | string>;
}

export function runTs(file: string, args: string[], env: NodeJS.ProcessEnv): TsProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, file), ...args], {
    cwd: repoRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.once('close', (code, signal) => resolve(code ?? signal ?? -1)),
  );
  return { child, output: () => output, exited };
}
