/**
 * The Nest application of the nestjs tests, run in its own process (child.ts): the
 * tests reach it over real HTTP on loopback and real SQS, kill it, or SIGTERM it. In a
 * child because platform-fastify's middie needs require(esm), which jest's module
 * runtime refuses on Node < 24.9; and a kill needs a process anyway. Written as a Nest
 * user writes one: a controller with DTO bodies, @HttpCode, @Header and an
 * HttpException, a provider with a @OnceHandler method, explicit injection tokens
 * (tsx, like other esbuild-based runners, emits no parameter types).
 */
import {
  type OnApplicationShutdown,
  Body,
  Controller,
  Header,
  HttpCode,
  Inject,
  Injectable,
  NotFoundException,
  Param,
  Post,
} from '@nestjs/common';
import type { PoolClient } from 'pg';
import { ClaimContext, ClaimTx, Idempotent, OnceHandler } from '../../../adapters/nestjs/index.js';
import type { IdempotencyContext } from '../../../src/http/context.js';
import type { HandlerContext } from '../../../src/types.js';

export const CHARGE_TABLES = `
  CREATE TABLE charges (
    id bigserial PRIMARY KEY, customer text NOT NULL, amount int NOT NULL, idem_key text NOT NULL);
  CREATE TABLE jobs_done (n bigserial PRIMARY KEY, id text NOT NULL, attempt int NOT NULL)`;

/** Lines the child prints for the test (its stdout protocol). */
export const say = (line: string): void => void process.stdout.write(`${line}\n`);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface ChargeDto {
  customer: string;
  amount: number;
  /** Hold the claim this long after the effect (lines concurrent duplicates up). */
  holdMs?: number;
}

@Controller('charges')
export class ChargesController {
  @Post()
  @Idempotent()
  @Header('Location', '/charges/latest')
  async charge(
    @Body() body: ChargeDto,
    @ClaimTx() tx: PoolClient,
    @ClaimContext() ctx: IdempotencyContext,
  ): Promise<Record<string, unknown>> {
    const { rows } = await tx.query<{ id: string }>(
      'INSERT INTO charges (customer, amount, idem_key) VALUES ($1, $2, $3) RETURNING id',
      [body.customer, body.amount, ctx.key],
    );
    if (body.holdMs !== undefined) await sleep(body.holdMs);
    return { id: rows[0]!.id, customer: body.customer, amount: body.amount };
  }

  @Post(':customer/refunds')
  @Idempotent()
  @HttpCode(202)
  async refund(
    @Param('customer') customer: string,
    @ClaimTx() tx: PoolClient,
    @ClaimContext() ctx: IdempotencyContext,
  ): Promise<string> {
    await tx.query('INSERT INTO charges (customer, amount, idem_key) VALUES ($1, -1, $2)', [
      customer,
      ctx.key,
    ]);
    // After the effect: the refusal must roll it back, nothing stored.
    if (customer === 'ghost') throw new NotFoundException('no such customer');
    return `refund queued for ${customer}`;
  }
}

/** A job of the `jobs` consumer. */
export interface Job {
  id: string;
  /** Keep the delivery in flight this long after the effect. */
  holdMs?: number;
}

/** Where the job handler reports to (a provider, injected by token). */
export const REPORTER = Symbol('reporter');

@Injectable()
export class JobHandlers {
  constructor(@Inject(REPORTER) private readonly report: (line: string) => void) {}

  @OnceHandler('jobs')
  async run(job: Job, ctx: HandlerContext<Job, PoolClient>): Promise<void> {
    await ctx.tx.query('INSERT INTO jobs_done (id, attempt) VALUES ($1, $2)', [
      job.id,
      ctx.attempt,
    ]);
    this.report(`handling ${job.id}`);
    if (job.holdMs !== undefined) await sleep(job.holdMs);
  }
}

/** Prints `closed` once Nest's shutdown reached its last hook (the consumers stopped before). */
@Injectable()
export class ShutdownReporter implements OnApplicationShutdown {
  onApplicationShutdown(): void {
    say('closed');
  }
}
