/** Starts the steps server (child.ts) in a child process and follows the boundaries it reaches. */
import { fileURLToPath } from 'node:url';
import { spawnChild, type ChildProcess } from '../child-process.js';
import type { ChargePoint } from './charge.js';
import type { StepsFramework } from './server.js';

/** A steps server in its own process. */
export interface StepsProcess extends ChildProcess {
  /** Boundaries reached so far (`point`), in order. */
  readonly reached: readonly string[];
  /** Resolves once `point` was reached. */
  reach(point: string): Promise<void>;
}

/** Options of {@link spawnStepsServer}. */
export interface StepsProcessOptions {
  framework: StepsFramework;
  databaseUrl: string;
  schema: string;
  providerUrl: string;
  leaseMs?: number;
  killAt?: ChargePoint | 'before-answer';
  holdAt?: ChargePoint;
}

/** Starts child.ts in a new Node process (kit/child-process.ts). */
export function spawnStepsServer(options: StepsProcessOptions): StepsProcess {
  const reached: string[] = [];
  const waiting: Array<{ point: string; done: () => void }> = [];
  const child = spawnChild({
    entry: fileURLToPath(new URL('./child.ts', import.meta.url)),
    label: 'steps server',
    env: {
      EO_STEPS_FRAMEWORK: options.framework,
      EO_HTTP_DATABASE_URL: options.databaseUrl,
      EO_HTTP_SCHEMA: options.schema,
      EO_STEPS_PROVIDER_URL: options.providerUrl,
      EO_STEPS_LEASE_MS: String(options.leaseMs ?? 30_000),
      EO_STEPS_KILL_AT: options.killAt ?? '',
      EO_STEPS_HOLD_AT: options.holdAt ?? '',
      EO_HTTP_PORT: '0',
    },
    onEvent: (event) => {
      const point = event['point'];
      if (event.t !== 'at' || typeof point !== 'string') return;
      reached.push(point);
      for (const w of waiting.filter((x) => x.point === point)) w.done();
    },
  });
  return {
    ...child,
    reached,
    reach: (point) =>
      reached.includes(point)
        ? Promise.resolve()
        : new Promise<void>((resolve) => waiting.push({ point, done: resolve })),
  };
}
