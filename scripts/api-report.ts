/**
 * The published surface, one API Extractor report per entry point (etc/*.api.md),
 * made from the build's declarations (run `npm run build` first).
 *
 *   npx tsx scripts/api-report.ts           check: fails when a report is stale, an
 *                                           export lacks JSDoc, or a doc link is broken
 *   npx tsx scripts/api-report.ts --update  rewrites the reports (commit them)
 *
 * `npm run api:check` / `npm run api:report` build and run it. The package test runs
 * the check, so `npm test` (and CI) fails when the surface changed without its report.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  Extractor,
  ExtractorConfig,
  ExtractorLogLevel,
  type ExtractorMessage,
} from '@microsoft/api-extractor';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Entry point → its API Extractor config (etc/api-extractor.<name>.json). */
export const ENTRY_POINTS = [
  'core',
  'sqs',
  'kafka',
  'kafka-platformatic',
  'testing',
  'client',
  'http',
  'http-express',
  'http-fastify',
  'outbox',
  'otel',
  'typeorm',
  'kysely',
  'rabbitmq',
  'drizzle',
  'postgres-js',
  'prisma',
  'knex',
  'lambda',
  'nestjs',
] as const;

/** The outcome for one entry point. */
export interface ReportResult {
  entry: string;
  report: string;
  /** Errors and warnings, as API Extractor words them. */
  problems: string[];
  changed: boolean;
  /** The report as this run made it (in the temp folder). */
  generated: string;
}

/** Runs API Extractor for every entry point; `update` rewrites the committed reports. */
export function apiReports(update: boolean): ReportResult[] {
  const dist = path.join(repoRoot, 'dist', 'src', 'index.d.ts');
  if (!fs.existsSync(dist)) throw new Error(`${dist} is missing: run \`npm run build\` first`);
  const results = ENTRY_POINTS.map((entry): ReportResult => {
    const config = ExtractorConfig.loadFileAndPrepare(
      path.join(repoRoot, 'etc', `api-extractor.${entry}.json`),
    );
    const problems: string[] = [];
    const result = Extractor.invoke(config, {
      localBuild: update,
      messageCallback: (message: ExtractorMessage) => {
        // Routed here instead of the console, so a check prints one clear list.
        if (
          message.logLevel === ExtractorLogLevel.Error ||
          message.logLevel === ExtractorLogLevel.Warning
        ) {
          problems.push(message.formatMessageWithLocation(repoRoot));
        }
        message.handled = true;
      },
    });
    return {
      entry,
      report: path.relative(repoRoot, config.reportFilePath),
      problems,
      changed: result.apiReportChanged,
      generated: fs.readFileSync(config.reportTempFilePath, 'utf8'),
    };
  });
  // An entry point may name a type it does not export (an adapter names a core type,
  // http/express names http's), but only one that another entry point exports.
  const exported = (symbol: string): boolean =>
    results.some((other) =>
      new RegExp(`^export (?:declare )?(?:abstract )?\\w+ ${symbol}\\b`, 'm').test(other.generated),
    );
  for (const r of results) {
    for (const [, symbol] of r.generated.matchAll(/The symbol "(\w+)" needs to be exported/g)) {
      if (symbol !== undefined && !exported(symbol))
        r.problems.push(`${symbol} is used by ${r.entry}'s API but exported by no entry point`);
    }
  }
  return results;
}

if (
  process.argv[1] !== undefined &&
  path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)
) {
  const update = process.argv.includes('--update');
  const results = apiReports(update);
  let failed = false;
  for (const r of results) {
    // A changed report is only a problem when checking; updating is what changes it.
    const stale = r.changed && !update;
    const problems = r.problems.filter((p) => !/changed the (public )?API signature/i.test(p));
    if (stale) problems.unshift(`${r.report} is stale: run \`npm run api:report\` and commit it`);
    if (problems.length > 0) failed = true;
    const status = problems.length > 0 ? 'FAILED' : update && r.changed ? 'updated' : 'ok';
    console.log(`${r.entry.padEnd(8)} ${r.report}: ${status}`);
    for (const p of problems) console.log(`  - ${p}`);
  }
  process.exitCode = failed ? 1 : 0;
}
