import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { run } from './process.js';

/** Repository root (this file is kit/services/maven.ts). */
export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/** The JVM to run services with; JAVA_HOME wins like it does for Maven. */
export function javaBin(): string {
  return process.env['JAVA_HOME'] ? path.join(process.env['JAVA_HOME'], 'bin', 'java') : 'java';
}

/**
 * Runtime classpath for kit/services/deps/<name>/pom.xml. Java services come from
 * Maven Central as plain jars (no Docker, no tarball downloads); Maven caches
 * the jars in ~/.m2 and we cache the resolved classpath in .cache/, keyed by
 * the pom's hash, so a warm start costs no Maven run at all.
 */
export async function resolveClasspath(name: string): Promise<string> {
  const pom = path.join(repoRoot, 'kit', 'services', 'deps', name, 'pom.xml');
  const hash = createHash('sha256').update(fs.readFileSync(pom)).digest('hex').slice(0, 16);
  const cacheDir = path.join(repoRoot, '.cache', 'classpath');
  const cacheFile = path.join(cacheDir, `${name}-${hash}.txt`);

  const cached = readClasspath(cacheFile);
  if (cached) return cached;

  fs.mkdirSync(cacheDir, { recursive: true });
  // Written to a temp name then renamed: a concurrent resolver never sees half a file.
  const tmp = `${cacheFile}.${process.pid}.tmp`;
  const mvn = process.env['EO_MVN'] ?? 'mvn';
  await run(
    mvn,
    ['-q', '-B', '-f', pom, 'dependency:build-classpath', `-Dmdep.outputFile=${tmp}`],
    {
      timeoutMs: 10 * 60_000,
    },
  );
  fs.renameSync(tmp, cacheFile);
  const fresh = readClasspath(cacheFile);
  if (!fresh) throw new Error(`Maven produced an empty or broken classpath for ${pom}`);
  return fresh;
}

/** A cached classpath is only good while every jar is still in ~/.m2. */
function readClasspath(file: string): string | undefined {
  if (!fs.existsSync(file)) return undefined;
  const cp = fs.readFileSync(file, 'utf8').trim();
  const jars = cp.split(path.delimiter).filter(Boolean);
  if (jars.length === 0 || !jars.every((jar) => fs.existsSync(jar))) return undefined;
  return jars.join(path.delimiter);
}
