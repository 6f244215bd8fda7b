/**
 * The module's consumers, run with the application's lifecycle: discovered and started
 * at `onApplicationBootstrap` (after every module's `onModuleInit`, so a PrismaService
 * has connected and a DataSource initialized), stopped at `beforeApplicationShutdown`.
 * That hook runs before the HTTP server closes and before any `onApplicationShutdown`,
 * where Nest's idiom ends connections (a DataSource, a pool): `Consumer.stop` lets each
 * in-flight delivery COMMIT and be acked while what it writes with is still open.
 */
import type { BeforeApplicationShutdown, OnApplicationBootstrap } from '@nestjs/common';
import type { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { createConsumer } from '../../src/consumer/consumer.js';
import type { Consumer } from '../../src/consumer/types.js';
import { ConfigurationError } from '../../src/errors.js';
import type { Idempotency } from '../../src/http/idempotency-types.js';
import type { Handler } from '../../src/types.js';
import { ONCE_HANDLER } from './handler.js';
import type { EffectivelyOnceModuleOptions } from './options.js';

const DEFAULT_STOP_TIMEOUT_MS = 30_000;

/**
 * The running consumers of `EffectivelyOnceModule` (inject it by this class to read
 * a consumer's `stats()` or listen to its events, e.g. for a health check).
 */
export class EffectivelyOnceConsumers implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly running = new Map<string, Consumer>();

  /** @internal Built by the module's factory provider. */
  constructor(
    private readonly options: EffectivelyOnceModuleOptions,
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly idempotency: Idempotency<unknown> | null,
  ) {}

  /** The consumer `name` (a key of the module's `consumers`), once the application bootstrapped. */
  get(name: string): Consumer {
    const consumer = this.running.get(name);
    if (consumer === undefined)
      throw new ConfigurationError('consumer', `no running consumer named "${name}"`);
    return consumer;
  }

  /** Creates each consumer over its discovered handler, then starts them all. */
  async onApplicationBootstrap(): Promise<void> {
    const declared = this.options.consumers ?? {};
    const handlers = this.discoverHandlers(new Set(Object.keys(declared)));
    for (const [name, consumerOptions] of Object.entries(declared)) {
      const handler = handlers.get(name);
      if (handler === undefined)
        throw new ConfigurationError(
          `consumers.${name}`,
          `no provider method is marked @OnceHandler('${name}')`,
        );
      const consumer = createConsumer<unknown, unknown>({
        ...consumerOptions,
        name,
        pool: consumerOptions.pool ?? this.options.pool,
        ...(this.options.dataLayer === undefined ? {} : { dataLayer: this.options.dataLayer }),
        handler,
      });
      this.running.set(name, consumer);
    }
    await Promise.all([...this.running.values()].map((consumer) => consumer.start()));
  }

  /**
   * Stops taking new work and lets what is in flight commit: the consumers (each
   * delivery's COMMIT, then its ack) and the request side (new requests get 503 with
   * Retry-After; the ones running commit and are answered) within `stopTimeoutMs`.
   */
  async beforeApplicationShutdown(): Promise<void> {
    const timeoutMs = this.options.stopTimeoutMs ?? DEFAULT_STOP_TIMEOUT_MS;
    await Promise.all([
      ...[...this.running.values()].map((consumer) => consumer.stop({ timeoutMs })),
      this.idempotency?.close({ timeoutMs }),
    ]);
  }

  /** Every `@OnceHandler` method of a singleton provider, bound to its instance. */
  private discoverHandlers(declared: ReadonlySet<string>): Map<string, Handler<unknown, unknown>> {
    const found = new Map<string, Handler<unknown, unknown>>();
    for (const wrapper of this.discovery.getProviders()) {
      const instance: unknown = wrapper.instance;
      if (typeof instance !== 'object' || instance === null) continue;
      const prototype = Object.getPrototypeOf(instance) as object | null;
      if (prototype === null) continue;
      for (const method of this.scanner.getAllMethodNames(prototype)) {
        const marked = this.discovery.getMetadataByDecorator(ONCE_HANDLER, wrapper, method);
        if (marked === undefined) continue;
        const where = `${wrapper.name}.${method}`;
        if (!wrapper.isDependencyTreeStatic())
          throw new ConfigurationError(
            where,
            'a @OnceHandler provider must be a singleton: a request- or transient-scoped one has no instance outside a request',
          );
        if (!declared.has(marked.consumer))
          throw new ConfigurationError(
            where,
            `@OnceHandler('${marked.consumer}') names no consumer of EffectivelyOnceModule`,
          );
        if (found.has(marked.consumer))
          throw new ConfigurationError(
            where,
            `consumer "${marked.consumer}" has a @OnceHandler already; give each consumer one`,
          );
        const fn = (instance as Record<string, unknown>)[method] as Handler<unknown, unknown>;
        found.set(marked.consumer, (message, ctx) => fn.call(instance, message, ctx));
      }
    }
    return found;
  }
}
