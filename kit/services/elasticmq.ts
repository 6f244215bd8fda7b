import fs from 'node:fs';
import path from 'node:path';
import { jvmFlags, startJava } from './java.js';
import { javaBin, resolveClasspath } from './maven.js';
import { HOST } from './ports.js';
import type { JavaServiceState } from './state.js';

/** The SQS emulator's fake account settings; the region matches what tests pass to SQSClient. */
export const SQS_REGION = 'us-east-1';
export const SQS_CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' } as const;

/**
 * Queues that exist from the start, under both providers: declared here for
 * ElasticMQ and created by localstack/init/ready.d/01-queues.sh for
 * LocalStack. Each redrives to its DLQ after `maxReceiveCount` receives.
 * Tests that change queue state should still create their own queues.
 */
export const PRESET_QUEUES = {
  standard: { name: 'eo-standard', dlq: 'eo-standard-dlq', maxReceiveCount: 3 },
  fifo: { name: 'eo-fifo.fifo', dlq: 'eo-fifo-dlq.fifo', maxReceiveCount: 3 },
} as const;

function presetQueues(): string {
  return Object.values(PRESET_QUEUES)
    .map(({ name, dlq, maxReceiveCount }) => {
      const fifo = name.endsWith('.fifo') ? 'fifo = true, ' : '';
      return [
        `  "${dlq}" { ${fifo.replace(/, $/, '')} }`,
        `  "${name}" { ${fifo}deadLettersQueue { name = "${dlq}", maxReceiveCount = ${maxReceiveCount} } }`,
      ].join('\n');
    })
    .join('\n');
}

/**
 * HOCON for ElasticMQ: bind loopback on our port, and make node-address
 * (used to build queue URLs) the same address, otherwise queue URLs point
 * at the default port 9324. The stats UI is off so it does not take 9325.
 */
function config(port: number): string {
  return `
node-address { protocol = http, host = "${HOST}", port = ${port}, context-path = "" }
rest-sqs { enabled = true, bind-port = ${port}, bind-hostname = "${HOST}", sqs-limits = strict }
rest-stats { enabled = false }
generate-node-address = false
aws { region = "${SQS_REGION}", accountId = "000000000000" }
queues {
${presetQueues()}
}
`;
}

/** ListQueues through the real SDK: the service is ready when a client can use it. */
export async function sqsReady(endpoint: string): Promise<boolean> {
  const { SQSClient, ListQueuesCommand } = await import('@aws-sdk/client-sqs');
  const client = new SQSClient({
    region: SQS_REGION,
    endpoint,
    credentials: SQS_CREDENTIALS,
    maxAttempts: 1,
  });
  try {
    await client.send(new ListQueuesCommand({}));
    return true;
  } finally {
    client.destroy();
  }
}

export async function createElasticMq(root: string, port: number): Promise<JavaServiceState> {
  const home = path.join(root, 'elasticmq');
  fs.mkdirSync(home, { recursive: true });
  const configFile = path.join(home, 'elasticmq.conf');
  fs.writeFileSync(configFile, config(port));
  const classpath = await resolveClasspath('elasticmq');
  const svc: JavaServiceState = {
    pid: 0,
    command: javaBin(),
    args: [
      ...jvmFlags('256m'),
      `-Dconfig.file=${configFile}`,
      '-cp',
      classpath,
      'org.elasticmq.server.Main',
    ],
    logFile: path.join(home, 'elasticmq.log'),
    port,
  };
  const endpoint = `http://${HOST}:${port}`;
  svc.pid = await startJava(svc, `ElasticMQ on ${endpoint}`, () => sqsReady(endpoint));
  return svc;
}
