/**
 * `npx tsx test/helpers/services/prefetch.ts`: resolve (download on first
 * use) everything the native services need, so test timeouts are never
 * spent in Maven, and report what was found. Used by .ci/run; also a quick
 * check of a dev machine.
 */
import { resolveClasspath } from './maven.js';
import { findBindir } from './postgres.js';

const t0 = Date.now();
const [pg, elasticmq, kafka] = await Promise.all([
  findBindir(),
  resolveClasspath('elasticmq'),
  resolveClasspath('kafka'),
]);
const jars = (cp: string): number => cp.split(':').length;
console.log(`postgres binaries: ${pg}`);
console.log(`elasticmq classpath: ${jars(elasticmq)} jars`);
console.log(`kafka classpath: ${jars(kafka)} jars`);
console.log(`resolved in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
