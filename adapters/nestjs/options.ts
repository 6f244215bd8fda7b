/**
 * What {@link EffectivelyOnceModule} is configured with, and the tokens it provides
 * under. Tokens are explicit (symbols and classes), never a constructor's parameter
 * types: injection by type needs `emitDecoratorMetadata`, which esbuild-based
 * runners (tsx, Vite) do not emit.
 */
import type { Pool } from 'pg';
import type { ConsumerOptions } from '../../src/consumer/options.js';
import type { DataLayer } from '../../src/data-layer.js';
import type { IdempotencyOptions } from '../../src/http/options.js';

/**
 * A consumer of the module: its source and options, without the handler, which is a
 * provider's method marked `@OnceHandler(name)`. `pool`, `dataLayer` and the shared
 * options come from the module's options unless given here.
 */
export type NestConsumerOptions<T = unknown> = Omit<
  ConsumerOptions<T, unknown>,
  'name' | 'pool' | 'handler' | 'batchHandler' | 'dataLayer'
> & { pool?: Pool };

/**
 * The request side of the module: `createIdempotency`'s options without `pool` and
 * `dataLayer`, which come from the module's. Routes use it with `@Idempotent()`.
 */
export type NestIdempotencyOptions = Omit<IdempotencyOptions<unknown>, 'pool' | 'dataLayer'>;

/** Options of `EffectivelyOnceModule.forRoot` (or what `forRootAsync`'s `useFactory` returns). */
export interface EffectivelyOnceModuleOptions {
  /**
   * The pg pool of the database holding the library's tables (and the effects). The
   * module never ends it: end it after the application closed (its own
   * `onApplicationShutdown`), as with any pool you own.
   */
  pool: Pool;
  /**
   * The data layer handlers write with (`prismaLayer(prismaService)`,
   * `typeormLayer(dataSource)` …): every door's `ctx.tx` is then its transaction
   * object. Absent: a pg client of `pool`.
   */
  dataLayer?: DataLayer<unknown>;
  /**
   * The consumers, by name (the dedup namespace, see `ConsumerOptions.name`). Each is
   * started at `onApplicationBootstrap` and stopped at `beforeApplicationShutdown`
   * (in-flight deliveries commit and are acked, see `stopTimeoutMs`). Its handler is
   * the provider method marked `@OnceHandler(name)`.
   */
  consumers?: Record<string, NestConsumerOptions>;
  /** The Idempotency-Key door, for `@Idempotent()` routes. Absent: no such routes. */
  http?: NestIdempotencyOptions;
  /**
   * At shutdown, how long in-flight deliveries and requests may take to commit before
   * they are aborted and rolled back (`Consumer.stop`'s and `Idempotency.close`'s
   * `timeoutMs`). Default 30 000 ms; keep it under your orchestrator's grace period.
   */
  stopTimeoutMs?: number;
}

/** The token of the module's {@link EffectivelyOnceModuleOptions}. */
export const EFFECTIVELY_ONCE_OPTIONS: unique symbol = Symbol('effectively-once:options');

/**
 * The token of the module's `Idempotency` (the request side), present when the options
 * have `http`: `@Inject(IDEMPOTENCY) idempotency: Idempotency<Tx>` for its `stats()`,
 * events or `prune()`.
 */
export const IDEMPOTENCY: unique symbol = Symbol('effectively-once:idempotency');
