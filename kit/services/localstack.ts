import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PRESET_QUEUES, SQS_CREDENTIALS, SQS_REGION, sqsReady } from './elasticmq.js';
import { startJava } from './java.js';
import { repoRoot } from './maven.js';
import { HOST } from './ports.js';
import { run } from './process.js';
import type { JavaServiceState } from './state.js';

/** The pinned Python environment LocalStack runs from (see the comment at its top). */
const REQUIREMENTS = path.join(
  repoRoot,
  'kit',
  'services',
  'deps',
  'localstack',
  'requirements.txt',
);

/** The Python that creates the venv; EO_PYTHON picks another one (3.8 or later). */
function pythonBin(): string {
  return process.env['EO_PYTHON'] ?? 'python3';
}

/**
 * Creates (once) a venv with exactly the pinned requirements and returns its
 * python. Keyed by the requirements' hash, like the Maven classpaths, so a
 * changed pin builds a new venv; `.complete` is written last, so a venv whose
 * install was cut short is rebuilt rather than used half-installed.
 */
export async function localstackPython(): Promise<string> {
  const hash = createHash('sha256')
    .update(fs.readFileSync(REQUIREMENTS))
    .digest('hex')
    .slice(0, 16);
  const venv = path.join(repoRoot, '.cache', 'localstack', `venv-${hash}`);
  const python = path.join(venv, 'bin', 'python');
  const done = path.join(venv, '.complete');
  if (fs.existsSync(done)) return python;

  fs.rmSync(venv, { recursive: true, force: true });
  fs.mkdirSync(path.dirname(venv), { recursive: true });
  await run(pythonBin(), ['-m', 'venv', venv]);
  await run(
    python,
    ['-m', 'pip', 'install', '-q', '--disable-pip-version-check', '-r', REQUIREMENTS],
    { timeoutMs: 10 * 60_000 },
  );
  fs.writeFileSync(done, '');
  return python;
}

/**
 * LocalStack's settings. It runs natively (not in its container), so:
 * OVERRIDE_IN_DOCKER=0 and FILESYSTEM_ROOT keep its state and cache under our
 * run directory (inside a container it would pick /var/lib/localstack);
 * DNS_ADDRESS=0 stops it binding port 53; SKIP_SSL_CERT_DOWNLOAD because CI
 * has no internet. Queue URLs use the path strategy on our loopback port,
 * like ElasticMQ's.
 */
function localstackEnv(home: string, port: number): Record<string, string> {
  return {
    SERVICES: 'sqs',
    GATEWAY_LISTEN: `${HOST}:${port}`,
    LOCALSTACK_HOST: `${HOST}:${port}`,
    SQS_ENDPOINT_STRATEGY: 'path',
    OVERRIDE_IN_DOCKER: '0',
    FILESYSTEM_ROOT: path.join(home, 'fs'),
    DNS_ADDRESS: '0',
    SKIP_SSL_CERT_DOWNLOAD: '1',
    DISABLE_EVENTS: '1',
    AWS_DEFAULT_REGION: SQS_REGION,
  };
}

/**
 * A launcher script in the run directory: it sets LocalStack's environment
 * and runs `python -m localstack.runtime.main`. Going through a file there
 * puts the run directory on the process's command line, which is how
 * teardown (and .ci/run's leak check) find every service process; and the
 * environment travels with the recorded command line, like a JVM's flags.
 */
function launcher(home: string, port: number): string {
  const file = path.join(home, 'localstack-main.py');
  const env = JSON.stringify(localstackEnv(home, port));
  fs.writeFileSync(
    file,
    [
      'import json, os, runpy',
      `os.environ.update(json.loads(${JSON.stringify(env)}))`,
      "runpy.run_module('localstack.runtime.main', run_name='__main__', alter_sys=True)",
      '',
    ].join('\n'),
  );
  return file;
}

/** The preset queues and their DLQs, as ElasticMQ's config declares them. */
async function createPresetQueues(endpoint: string): Promise<void> {
  const { SQSClient, CreateQueueCommand, GetQueueAttributesCommand } =
    await import('@aws-sdk/client-sqs');
  const client = new SQSClient({ region: SQS_REGION, endpoint, credentials: SQS_CREDENTIALS });
  try {
    for (const { name, dlq, maxReceiveCount } of Object.values(PRESET_QUEUES)) {
      const fifo: Record<string, string> = name.endsWith('.fifo') ? { FifoQueue: 'true' } : {};
      const { QueueUrl: dlqUrl } = await client.send(
        new CreateQueueCommand({ QueueName: dlq, Attributes: fifo }),
      );
      const { Attributes } = await client.send(
        new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] }),
      );
      const redrive = { deadLetterTargetArn: Attributes?.['QueueArn'], maxReceiveCount };
      await client.send(
        new CreateQueueCommand({
          QueueName: name,
          Attributes: { ...fifo, RedrivePolicy: JSON.stringify(redrive) },
        }),
      );
    }
  } finally {
    client.destroy();
  }
}

/** LocalStack 3.8 (SQS only) on our port, with the preset queues; EO_SQS_EMULATOR=localstack. */
export async function createLocalstack(root: string, port: number): Promise<JavaServiceState> {
  const home = path.join(root, 'localstack');
  fs.mkdirSync(home, { recursive: true });
  const python = await localstackPython();
  const svc: JavaServiceState = {
    pid: 0,
    command: python,
    args: [launcher(home, port)],
    logFile: path.join(home, 'localstack.log'),
    port,
  };
  const endpoint = `http://${HOST}:${port}`;
  // Python imports and LocalStack's plugin discovery take ~10 s, more on a loaded box.
  svc.pid = await startJava(
    svc,
    `LocalStack on ${endpoint}`,
    () => sqsReady(endpoint),
    () => {},
    120_000,
  );
  await createPresetQueues(endpoint);
  return svc;
}
