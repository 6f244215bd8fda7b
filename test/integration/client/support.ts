import { afterEach } from '@jest/globals';
import { FaultProxy, type FaultProxyOptions } from '../../../kit/fault-proxy.js';
import { IdempotencyServer, type IdempotencyServerOptions } from './idempotency-server.js';

const cleanups: Array<() => Promise<void>> = [];

/** Registers the per-test cleanup; call once at the top of a test file. */
export function cleanupAfterEach(): void {
  afterEach(async () => {
    for (const fn of cleanups.splice(0).reverse()) await fn();
  });
}

/** Runs `fn` after the current test, in reverse order of registration. */
export function onCleanup(fn: () => Promise<void> | void): void {
  cleanups.push(async () => {
    await fn();
  });
}

export async function startServer(
  options: IdempotencyServerOptions = {},
): Promise<IdempotencyServer> {
  const server = await IdempotencyServer.start(options);
  onCleanup(() => server.close());
  return server;
}

/** A fault proxy in front of `server`, listening unless `down`. */
export async function startProxy(
  server: IdempotencyServer,
  options: Omit<FaultProxyOptions, 'target'> & { down?: boolean } = {},
): Promise<FaultProxy> {
  const { down, ...rest } = options;
  const settings = { target: { host: '127.0.0.1', port: server.port }, ...rest };
  const proxy = await (down ? FaultProxy.create(settings) : FaultProxy.start(settings));
  onCleanup(() => proxy.close());
  return proxy;
}

/** A promise and its resolver: a gate a test opens when it chooses. */
export function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

/** Fast retries for tests: the behaviour is counted in attempts, never in milliseconds. */
export const FAST = { backoff: { initialMs: 5, maxMs: 50 } } as const;
