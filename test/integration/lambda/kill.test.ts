import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { ChildInvoker } from '../../../kit/lambda/child-invoker.js';
import { TIMEOUT, doubles, lambdaIntegration } from './harness.js';

const it_ = lambdaIntegration('kill');
const functionModule = path.join(path.dirname(fileURLToPath(import.meta.url)), 'kill-function.ts');

describe('lambdaConsumer when its execution environment is killed', () => {
  for (const killAt of ['handler', 'after-commit'] as const) {
    it(
      `killed ${killAt === 'handler' ? 'mid-batch, before a COMMIT' : 'after a COMMIT, before the answer'}: the batch returns and each record is applied once`,
      async () => {
        const { url } = await it_.queues.create(`lambda-kill-${killAt}`, { visibilityTimeout: 5 });
        const ids = Array.from({ length: 12 }, (_, i) => `k${i}`);
        for (const id of ids) await it_.queues.send(url, JSON.stringify({ id }));
        const marker = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'eo-lambda-')), 'killed');
        const pool = it_.db.pool.options as { connectionString?: string; options?: string };
        const invoker = new ChildInvoker(functionModule, {
          ...process.env,
          EO_KILL_AT: killAt,
          EO_KILL_MARKER: marker,
          EO_LAMBDA_SCHEMA: it_.db.schema,
          EO_LAMBDA_PG: JSON.stringify({
            connectionString: pool.connectionString,
            options: pool.options,
            max: 4,
          }),
        });
        const mapping = it_.mapping({
          queueUrl: url,
          invoker,
          batchSize: 10,
          batchingWindowMs: 500,
          functionTimeoutMs: 3_000,
        });
        await it_.drained(url);
        // The kill happened, failed its invocation, and a fresh environment took over.
        expect(fs.existsSync(marker)).toBe(true);
        expect(mapping.stats.failedInvocations).toBeGreaterThanOrEqual(1);
        expect(invoker.coldStarts).toBeGreaterThanOrEqual(2);
        const effects = await it_.effects();
        expect(doubles(effects)).toEqual([]);
        expect(effects.map((e) => e.id).sort()).toEqual([...ids].sort());
      },
      TIMEOUT,
    );
  }
});
