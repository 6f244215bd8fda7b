/**
 * `EffectivelyOnceModule`: a dynamic module built with Nest's ConfigurableModuleBuilder,
 * so `forRoot(options)` and `forRootAsync({ imports, inject, useFactory })` (or
 * `useClass` / `useExisting`) are Nest's own. It provides the request side under
 * {@link IDEMPOTENCY} and {@link EffectivelyOnceConsumers}, which runs the consumers with
 * the application's lifecycle. Decorators are applied as calls: the library is compiled
 * without `experimentalDecorators`, and the tokens are explicit.
 */
import { ConfigurableModuleBuilder, Module } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner } from '@nestjs/core';
import { createIdempotency } from '../../src/http/idempotency.js';
import type { Idempotency } from '../../src/http/idempotency-types.js';
import { EffectivelyOnceConsumers } from './consumers.js';
import {
  EFFECTIVELY_ONCE_OPTIONS,
  IDEMPOTENCY,
  type EffectivelyOnceModuleOptions,
} from './options.js';

const built = new ConfigurableModuleBuilder<EffectivelyOnceModuleOptions>({
  optionsInjectionToken: EFFECTIVELY_ONCE_OPTIONS,
  moduleName: 'EffectivelyOnce',
})
  .setClassMethodName('forRoot')
  // Global by default, as Nest's data modules are: `@Idempotent()` routes and handler
  // providers in any module reach it without importing it again.
  .setExtras({ isGlobal: true }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
  }))
  .build();

/**
 * The class Nest's ConfigurableModuleBuilder made for {@link EffectivelyOnceModule}: its
 * static `forRoot` and `forRootAsync`. Use `EffectivelyOnceModule` itself.
 */
export const EffectivelyOnceModuleBase = built.ConfigurableModuleClass;

/**
 * Effectively-once for a Nest application.
 *
 * ```ts
 * EffectivelyOnceModule.forRootAsync({
 *   inject: [PrismaService],
 *   useFactory: (prisma: PrismaService) => ({
 *     pool, dataLayer: prismaLayer(prisma),
 *     http: { scope: 'payments' },
 *     consumers: { orders: { source: sqsSource({ client, queueUrl }) } },
 *   }),
 * })
 * ```
 *
 * Consumers start at `onApplicationBootstrap` and stop at `beforeApplicationShutdown`,
 * where the request side closes too (call `app.enableShutdownHooks()` so SIGTERM runs
 * them). Global unless `isGlobal: false`.
 */
export class EffectivelyOnceModule extends EffectivelyOnceModuleBase {}

function idempotencyFactory(options: EffectivelyOnceModuleOptions): Idempotency<unknown> | null {
  if (options.http === undefined) return null;
  return createIdempotency<unknown>({
    ...options.http,
    pool: options.pool,
    ...(options.dataLayer === undefined ? {} : { dataLayer: options.dataLayer }),
  });
}

Module({
  imports: [DiscoveryModule],
  providers: [
    { provide: IDEMPOTENCY, useFactory: idempotencyFactory, inject: [EFFECTIVELY_ONCE_OPTIONS] },
    {
      provide: EffectivelyOnceConsumers,
      useFactory: (
        options: EffectivelyOnceModuleOptions,
        discovery: DiscoveryService,
        scanner: MetadataScanner,
        idempotency: Idempotency<unknown> | null,
      ) => new EffectivelyOnceConsumers(options, discovery, scanner, idempotency),
      inject: [EFFECTIVELY_ONCE_OPTIONS, DiscoveryService, MetadataScanner, IDEMPOTENCY],
    },
  ],
  exports: [IDEMPOTENCY, EffectivelyOnceConsumers],
})(EffectivelyOnceModule);
