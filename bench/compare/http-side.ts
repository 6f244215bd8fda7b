/**
 * `npm run compare -- --side http`: the Idempotency-Key middlewares on the same
 * Express 5 payment app and the same Postgres (scenario.ts), and their table.
 */
import { GIVE_UP_MS } from './client.js';
import { CONTENDERS } from './contenders.js';
import { effectivelyOnceFailures, markdownTable } from './report.js';
import { runContender, type ContenderResult } from './scenario.js';
import {
  packageVersions,
  pickContenders,
  positive,
  postgresVersion,
  say,
  wasInterrupted,
  withServices,
  writeResults,
} from './session.js';

export interface HttpSideOptions {
  contenders?: string | undefined;
  payments: string;
  concurrent: string;
  out: string;
}

/** Runs the HTTP side; resolves with its failures (empty: effectively-once was clean). */
export async function runHttpSide(values: HttpSideOptions): Promise<string[]> {
  const contenders = pickContenders(values.contenders, CONTENDERS);
  const payments = positive('payments', values.payments);
  const concurrent = positive('concurrent', values.concurrent);

  return withServices(null, async ({ pool, databaseUrl }) => {
    const results: ContenderResult[] = [];
    const runId = Date.now().toString(36);
    for (const contender of contenders) {
      say(`${contender}: ${payments} payments, then ${concurrent} identical at once`);
      results.push(
        await runContender(contender, { pool, databaseUrl, runId, payments, concurrent, log: say }),
      );
    }
    if (wasInterrupted()) return ['interrupted'];
    const versions = packageVersions([
      'effectively-once',
      'express-idempotency',
      '@node-idempotency/core',
    ]);
    const postgres = await postgresVersion(pool);
    const all = contenders.length === CONTENDERS.length;
    const command = `npm run compare -- --payments ${payments} --concurrent ${concurrent}${all ? '' : ` --contenders ${contenders.join(',')}`}`;
    const markdown = [
      `\`${command}\` — ${new Date().toISOString().slice(0, 10)}, Node ${process.version}, Postgres ${postgres}, Express ${packageVersions(['express'])['express']}; @node-idempotency/storage-adapter-memory ${packageVersions(['@node-idempotency/storage-adapter-memory'])['@node-idempotency/storage-adapter-memory']}.`,
      `Per contender: ${payments} sequential payments (${results[0]?.killed.payments ?? 0} killed right after the charge's COMMIT, ${results[0]?.dropped.payments ?? 0} with the answer dropped and the server alive), each client retrying its key until a 2xx or ${GIVE_UP_MS / 1000} s; then ${concurrent} identical requests at once.`,
      '',
      markdownTable(results, versions, concurrent),
      '',
    ].join('\n');
    console.log(markdown);
    writeResults(values.out, markdown, { command, results });
    return results
      .filter((r) => r.contender === 'effectively-once')
      .flatMap((r) => effectivelyOnceFailures(r));
  });
}
