/**
 * A Nest application with effectively-once: an Idempotency-Key route that charges once
 * per key, and an SQS consumer whose handler is a provider method. The pool is a
 * provider the module's factory injects; Nest's shutdown hooks stop the consumer with
 * its in-flight deliveries committed and acked, then the pool ends.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=https://… PORT=3000 npx tsx examples/nestjs-app.ts
 */
// #region app
import {
  Body,
  Controller,
  Inject,
  Injectable,
  Module,
  Post,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { SQSClient } from '@aws-sdk/client-sqs';
import pg from 'pg';
import type { HandlerContext } from 'effectively-once';
import { ClaimTx, EffectivelyOnceModule, Idempotent, OnceHandler } from 'effectively-once/nestjs';
import { sqsSource } from 'effectively-once/sqs';

const POOL = Symbol('pool');

/** The pool, owned by the app: ended at the last shutdown hook, after the consumers stopped. */
@Injectable()
class PoolOwner implements OnApplicationShutdown {
  constructor(@Inject(POOL) private readonly pool: pg.Pool) {}
  async onApplicationShutdown(): Promise<void> {
    await this.pool.end();
  }
}

/** The database: the pool as a provider, exported to the modules that import this one. */
@Module({
  providers: [
    {
      provide: POOL,
      useFactory: () => new pg.Pool({ connectionString: process.env['DATABASE_URL'] }),
    },
    PoolOwner,
  ],
  exports: [POOL],
})
class DatabaseModule {}

interface ChargeDto {
  customerId: string;
  amountCents: number;
}

@Controller('charges')
class ChargesController {
  /** Charged once per Idempotency-Key; a retry gets this answer again. */
  @Post()
  @Idempotent()
  async charge(@Body() body: ChargeDto, @ClaimTx() tx: pg.PoolClient) {
    const { rows } = await tx.query<{ id: string }>(
      'INSERT INTO charges (customer_id, amount_cents) VALUES ($1, $2) RETURNING id',
      [body.customerId, body.amountCents],
    );
    return { id: rows[0]!.id, ...body };
  }
}

interface OrderPlaced {
  orderId: string;
}

@Injectable()
class OrderHandlers {
  /** Applied once per SQS message: the ack follows the COMMIT. */
  @OnceHandler('orders')
  async placed(event: OrderPlaced, ctx: HandlerContext<OrderPlaced>): Promise<void> {
    await ctx.tx.query('INSERT INTO shipments (order_id) VALUES ($1)', [event.orderId]);
  }
}

@Module({
  imports: [
    EffectivelyOnceModule.forRootAsync({
      imports: [DatabaseModule],
      inject: [POOL],
      useFactory: (pool: pg.Pool) => ({
        pool,
        http: { scope: 'payments' },
        consumers: {
          orders: {
            source: sqsSource<OrderPlaced>({
              client: new SQSClient({}),
              queueUrl: process.env['QUEUE_URL']!,
            }),
          },
        },
      }),
    }),
  ],
  controllers: [ChargesController],
  providers: [OrderHandlers],
})
class AppModule {}

// The body's bytes are the key's fingerprint: `rawBody: true` keeps them.
const app = await NestFactory.create(AppModule, { rawBody: true });
// SIGTERM runs the shutdown hooks: consumers stop after their in-flight COMMITs.
app.enableShutdownHooks();
await app.listen(Number(process.env['PORT'] ?? 3000));
// #endregion
