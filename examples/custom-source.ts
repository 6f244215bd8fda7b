/**
 * Writing a source: a `Source` for a broker this package has no adapter for. The broker
 * here is a stand-in, `JobBroker`: it pulls one job at a time and settles each by id, as
 * most queue clients do. `createConsumer` does the rest (claim, handler, COMMIT, then
 * exactly one settling call per delivery).
 *
 *   DATABASE_URL=postgres://… npx tsx examples/custom-source.ts
 */
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import {
  BodyParseError,
  createConsumer,
  type Delivery,
  type Source,
  type SourceContext,
} from 'effectively-once';

/** A received job, as the broker's client hands it over. */
export interface Job {
  id: string;
  /** The producer's idempotency key, reused on every resend of one operation. */
  idempotencyKey: string | undefined;
  body: string;
  /** 1 on the first receive. */
  receiveCount: number;
}

/** The broker's client: what this source needs of it. */
export interface JobBroker {
  /** The next job, or undefined when none arrived before `signal` aborted or a poll ended. */
  receive(signal: AbortSignal): Promise<Job | undefined>;
  complete(id: string): Promise<void>;
  /** Makes the job visible again after `delayMs`. */
  retryLater(id: string, delayMs: number): Promise<void>;
  moveToDeadLetters(id: string, reason: string): Promise<void>;
}

// #region source
/** A `Source` over a {@link JobBroker}: JSON bodies, keyed by the producer's idempotency key. */
export function jobSource<T>(broker: JobBroker): Source<T> {
  const pending = new Set<Promise<unknown>>();
  return {
    description: 'jobs',
    async run(ctx: SourceContext<T>) {
      while (!ctx.signal.aborted) {
        // Receive only what the consumer can take now: backpressure, not a buffer.
        if (ctx.freeCapacity() <= 0) await ctx.waitForCapacity();
        const job = await broker.receive(ctx.signal);
        if (job === undefined) continue;
        const settled = ctx.deliver(toDelivery<T>(job, broker));
        pending.add(settled);
        void settled.finally(() => pending.delete(settled));
      }
      // `run` resolves once it will deliver nothing more; deliveries in flight settle.
      await Promise.all(pending);
    },
    async close() {
      await Promise.all(pending); // a client with batched acks would flush them here
    },
  };
}

function toDelivery<T>(job: Job, broker: JobBroker): Delivery<T> {
  let body: T | undefined;
  let rejection: BodyParseError | undefined;
  try {
    body = JSON.parse(job.body) as T;
  } catch (cause) {
    rejection = new BodyParseError('not JSON', { cause, details: { id: job.id } });
  }
  return {
    key: job.idempotencyKey, // undefined: dead-lettered with EO_INVALID_KEY
    body: body as T,
    payload: job.body, // hashed: the same key with another body is a mismatch
    raw: job,
    attempt: job.receiveCount,
    rejection, // set: dead-lettered without running the handler
    // The runner calls exactly one of these, and ack() only after COMMIT.
    ack: () => broker.complete(job.id),
    retry: (delayMs) => broker.retryLater(job.id, delayMs),
    deadLetter: (reason) => broker.moveToDeadLetters(job.id, reason.code),
    release: () => broker.retryLater(job.id, 0),
  };
}
// #endregion

/** An in-memory `JobBroker` for running this file without a broker. */
export class ArrayBroker implements JobBroker {
  readonly done: string[] = [];
  readonly deadLetters: string[] = [];
  private readonly received = new Map<string, Job>();
  constructor(private readonly jobs: Job[]) {}
  async receive(signal: AbortSignal): Promise<Job | undefined> {
    const job = this.jobs.shift();
    if (job === undefined) await new Promise((r) => setTimeout(r, signal.aborted ? 0 : 10));
    else this.received.set(job.id, job);
    return job;
  }
  async complete(id: string) {
    this.done.push(id);
  }
  async retryLater(id: string, delayMs: number) {
    const job = this.received.get(id);
    if (job)
      setTimeout(() => this.jobs.push({ ...job, receiveCount: job.receiveCount + 1 }), delayMs);
  }
  async moveToDeadLetters(id: string) {
    this.deadLetters.push(id);
  }
}

/** Consumes three jobs (one a resend) into `notes`; resolves with the broker's record. */
export async function main({ env = process.env }: { env?: NodeJS.ProcessEnv } = {}) {
  const pool = new pg.Pool({ connectionString: env.DATABASE_URL });
  await pool.query('CREATE TABLE IF NOT EXISTS notes (text text NOT NULL)');
  const broker = new ArrayBroker([
    { id: 'j1', idempotencyKey: 'note-1', body: '{"text":"hello"}', receiveCount: 1 },
    { id: 'j2', idempotencyKey: 'note-1', body: '{"text":"hello"}', receiveCount: 1 },
    { id: 'j3', idempotencyKey: 'note-2', body: 'not json', receiveCount: 1 },
  ]);
  const consumer = createConsumer<{ text: string }>({
    name: 'notes',
    pool,
    source: jobSource(broker),
    handler: async (note, { tx }) => {
      await tx.query('INSERT INTO notes (text) VALUES ($1)', [note.text]);
    },
  });
  await consumer.start();
  while (broker.done.length + broker.deadLetters.length < 3) {
    await new Promise((r) => setTimeout(r, 10));
  }
  await consumer.stop();
  await pool.end();
  return { done: broker.done, deadLetters: broker.deadLetters, stats: consumer.stats() };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(await main());
}
