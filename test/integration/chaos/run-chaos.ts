import { expect } from '@jest/globals';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { killProcessesUsing } from '../../../kit/services/process.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** What a `chaos/main.ts` run printed and how it ended. */
export interface ChaosRun extends HarnessExit {
  /** The `chaos: ...` summary line (undefined if none was printed). */
  line: string | undefined;
  /** The summary's fields, e.g. `fields.doubles === '0'`. */
  fields: Record<string, string>;
}

/** How a harness's child process ended, and what it printed. */
export interface HarnessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a harness CLI (`chaos/main.ts`, `bench/main.ts`) in a child process with private
 * services: the endpoints jest's global setup exported are removed from its environment,
 * so it starts its own Postgres and broker (under the same EO_SERVICES_DIR) and may crash
 * and restart them without disturbing the test files that share jest's services.
 * On timeout it is stopped with SIGTERM (it then stops its services), SIGKILL after 20 s,
 * and anything still running from its services directory is killed.
 */
export function runHarness(entry: string, args: string[], timeoutMs: number): Promise<HarnessExit> {
  const env = { ...process.env };
  for (const name of [
    'DATABASE_URL',
    'SQS_ENDPOINT',
    'KAFKA_BROKERS',
    'EO_SERVICES_STATE',
    'EO_SERVICES_SET_ENV',
    'EO_SERVICES',
  ]) {
    delete env[name];
  }
  const child = spawn(process.execPath, ['--import', 'tsx', entry, ...args], {
    cwd: repoRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const term = setTimeout(() => {
    stderr += `\n[test] ${entry} run exceeded ${timeoutMs} ms: SIGTERM\n`;
    child.kill('SIGTERM');
  }, timeoutMs);
  const kill = setTimeout(() => child.kill('SIGKILL'), timeoutMs + 20_000);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(term);
      clearTimeout(kill);
      // Chaos names its services' directory on stderr, the provider (bench) on stdout.
      const printed = `${stderr}\n${stdout}`;
      const root =
        /private services in (\S+)/.exec(printed)?.[1] ??
        /^\[services\] native: .* \((\S+)\)$/m.exec(printed)?.[1];
      if (root !== undefined && fs.existsSync(root)) {
        // It died without stopping its services: do it for it.
        killProcessesUsing(root);
        fs.rmSync(root, { recursive: true, force: true });
      }
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Runs the chaos CLI (see {@link runHarness}) and reads its `chaos: ...` summary line. */
export async function runChaos(args: string[], timeoutMs: number): Promise<ChaosRun> {
  const run = await runHarness('chaos/main.ts', args, timeoutMs);
  const line = run.stdout.split('\n').find((l) => l.startsWith('chaos: '));
  const fields = Object.fromEntries(
    (line ?? '')
      .split(' ')
      .slice(1)
      .map((kv) => kv.split('=') as [string, string]),
  );
  return { ...run, line, fields };
}

/** The run's stderr, minus the AWS SDK's Node version notice, for a failing assertion. */
export function transcript(run: ChaosRun): string {
  return run.stderr
    .split('\n')
    .filter(
      (l) =>
        l.startsWith('[chaos]') ||
        l.startsWith('[test]') ||
        l.startsWith('[services]') ||
        l.startsWith('chaos:'),
    )
    .join('\n');
}

/**
 * Handler faults in the smoke: 24 spread over the kinds (transient and permanent: 3
 * keys each of swallow, 2 each of deferred, downstream and floating; 3 killed backends,
 * 2 hot pairs rounded up from 3 keys), so 25 faulty keys of which 9 must be dead-lettered.
 */
const SMOKE_HANDLER_FAULTS = { planned: 25, deadLettered: 9 };

/**
 * The CI smoke of one broker: 2,000 messages, 3 workers, 4 kills, 4 poison, 24 handler
 * faults of every kind (workers at SERIALIZABLE / REPEATABLE READ), one seed. Asserts
 * a clean exit (every planned fault fired, hot pairs met contention), no double or
 * loss, and every poison and permanent fault dead-lettered with its code; `expected`
 * adds broker-specific fields.
 */
export async function smoke(
  broker: 'sqs' | 'kafka',
  expected: Record<string, string> = {},
): Promise<void> {
  const run = await runChaos(
    [
      '--broker',
      broker,
      '--messages',
      '2000',
      '--workers',
      '3',
      '--kills',
      '4',
      '--poison',
      '4',
      '--handler-faults',
      '24',
    ].concat(['--seed', '20240601', '--timeout', '140']),
    150_000,
  );
  const context = `${run.line ?? '(no summary line)'}\n${transcript(run)}`;
  expect({ code: run.code, context }).toEqual({ code: 0, context });
  expect(run.fields).toMatchObject({
    broker,
    messages: '2000',
    kills: '4',
    pg_restarts: '1',
    applied: '2000',
    doubles: '0',
    lost: '0',
    dead_lettered: String(4 + SMOKE_HANDLER_FAULTS.deadLettered),
    handler_faults: String(SMOKE_HANDLER_FAULTS.planned),
    ...expected,
  });
  expect(Number(run.fields['duplicates_sent'])).toBeGreaterThanOrEqual(400);
  // Permanent faults fire on every attempt; hot pairs meet at least one 40001 / 40P01
  // (exit 0 also says every planned kind fired: a kind that did not is a shortfall).
  expect(Number(run.fields['faults_fired'])).toBeGreaterThanOrEqual(
    SMOKE_HANDLER_FAULTS.deadLettered,
  );
  expect(Number(run.fields['serialization_failures'])).toBeGreaterThan(0);
}
