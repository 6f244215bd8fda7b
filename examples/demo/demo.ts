import pg from 'pg';
import { migrate } from 'effectively-once';
import type { DemoBroker } from './broker.js';
import { spawnWorker, type ChildWorker } from './child.js';
import { FAULTS, isSlow, sleep } from './faults.js';
import { createPaymentTables } from './payments.js';
import { planCharges, produce, type ProducerStats } from './producer.js';
import { Progress } from './progress.js';
import { printReport, readLedger } from './report.js';
import { startBroker, startDatabase, type DemoDatabase } from './services.js';
import { startPaymentWorker, type PaymentWorker } from './worker.js';

export interface DemoOptions {
  messages: number;
  seed: number;
  /** Give up waiting for the backlog to drain this long after the producer finished. */
  deadlineMs: number;
}

/**
 * The main job: a payment worker fleet (two workers in this process, one in another
 * process that gets killed between COMMIT and ack, and its replacement) drains N
 * logical charges that a retrying producer sends. Resolves true when the ledger shows
 * every charge exactly once.
 */
export async function runDemo(options: DemoOptions): Promise<boolean> {
  const started = Date.now();
  const say = (text: string) => process.stderr.write(`${text}\n`);
  say(`effectively-once demo: ${options.messages} charges into Postgres (seed ${options.seed})`);
  const [db, broker] = await startServices();
  say(`  services: ${db.description} + ${broker.description} (${seconds(started)} s)`);
  const admin = new pg.Pool({
    connectionString: db.url,
    max: 3,
    options: `-c search_path=${db.schema}`,
  });
  admin.on('error', () => undefined);
  const fleet = new Fleet(db, broker);
  try {
    await admin.query(`CREATE SCHEMA IF NOT EXISTS ${db.schema}`);
    await createPaymentTables(admin);
    await migrate(admin, { schema: db.schema });
    return await drive(options, started, admin, broker, fleet, db);
  } finally {
    await fleet.close();
    if (db.shared)
      await admin.query(`DROP SCHEMA IF EXISTS ${db.schema} CASCADE`).catch(() => undefined);
    await admin.end().catch(() => undefined);
    await broker.close();
    await db.stop();
  }
}

async function drive(
  options: DemoOptions,
  started: number,
  admin: pg.Pool,
  broker: DemoBroker,
  fleet: Fleet,
  db: DemoDatabase,
): Promise<boolean> {
  const plan = planCharges(options.messages, options.seed);
  const producerStats: ProducerStats = { logicalSent: 0, messagesSent: 0, resends: 0 };
  const progress = new Progress(options.messages);
  let applied = 0;
  const redraw = () =>
    progress.update({ applied, sent: producerStats.messagesSent, ...fleet.totals() });
  fleet.onChange = redraw;
  fleet.note = (text) => progress.note(text);

  await fleet.start(FAULTS.crashAfterCommits(options.messages));
  const poll = setInterval(() => {
    admin.query<{ n: string }>('SELECT count(*) AS n FROM charges').then(
      (r) => {
        applied = Number(r.rows[0]?.n ?? 0);
        redraw();
      },
      () => undefined,
    );
  }, 150);
  let left = { pending: -1, deadLetters: -1 };
  try {
    await produce(broker.send, plan, producerStats, redraw);
    // Drained: nothing pending or dead twice in a row, and nothing in flight here.
    const deadline = Date.now() + options.deadlineMs;
    for (let empty = 0; empty < 2 && Date.now() < deadline;) {
      await sleep(250);
      left = await broker.backlog();
      empty =
        left.pending === 0 && left.deadLetters === 0 && fleet.totals().inFlight === 0
          ? empty + 1
          : 0;
    }
  } finally {
    clearInterval(poll);
  }
  await fleet.close();
  const ledger = await readLedger(admin, plan);
  applied = ledger.applied;
  redraw();
  progress.finish();
  const totals = fleet.totals();
  const slow = plan.charges.filter((c) => isSlow(c.chargeId)).length;
  return printReport(
    {
      title: `effectively-once demo: ${db.description} + ${broker.description}`,
      plan,
      messagesSent: producerStats.messagesSent,
      resends: producerStats.resends,
      deliveries: totals.deliveries,
      duplicates: totals.duplicates,
      retries: totals.retries,
      abandoned: totals.abandoned,
      faults: [
        `${producerStats.resends} producer resends (same idempotency key)`,
        broker.faults(slow),
        fleet.crash,
      ],
      leftPending: left.pending,
      leftDead: left.deadLetters,
      seconds: (Date.now() - started) / 1000,
    },
    ledger,
  );
}

/** The workers: two in this process, one in a child process that gets killed, its replacement. */
class Fleet {
  onChange: () => void = () => undefined;
  note: (text: string) => void = () => undefined;
  crash = 'no worker crash (worker-3 committed too few charges)';
  private readonly local: PaymentWorker[] = [];
  private readonly children: ChildWorker[] = [];
  private localDeliveries = 0;
  private replaced: Promise<void> = Promise.resolve();
  private closing: Promise<void> | undefined;

  constructor(
    private readonly db: DemoDatabase,
    private readonly broker: DemoBroker,
  ) {}

  async start(crashAfter: number): Promise<void> {
    const childEnv = {
      DEMO_DATABASE_URL: this.db.url,
      DEMO_SCHEMA: this.db.schema,
      ...this.broker.env,
    };
    const doomed = spawnWorker({
      name: 'worker-3',
      env: childEnv,
      crashAfter,
      concurrency: 8,
      onChange: () => this.onChange(),
      onCrash: (key, commits) => {
        this.crash = `worker-3 killed (SIGKILL) right after its COMMIT #${commits}, before the ack`;
        this.note(
          `! worker-3 killed with SIGKILL right after COMMIT of charge ${key.slice(0, 8)}…, before its ack`,
        );
      },
    });
    this.children.push(doomed);
    // The supervisor restarts a crashed worker, as ECS or Kubernetes would.
    this.replaced = doomed.exited.then(async (crashedAfter) => {
      if (crashedAfter === undefined || this.closing) return;
      this.note(
        '  worker-4 starts in a fresh process to replace it; redeliveries of its messages are deduplicated',
      );
      const fresh = spawnWorker({
        name: 'worker-4',
        env: childEnv,
        crashAfter: 0,
        concurrency: 8,
        onChange: () => this.onChange(),
      });
      this.children.push(fresh);
      await fresh.ready.catch(() => undefined);
    });
    let lapseNotes = 0;
    for (const name of ['worker-1', 'worker-2']) {
      const worker = await startPaymentWorker({
        worker: name,
        databaseUrl: this.db.url,
        schema: this.db.schema,
        broker: this.broker.env,
        concurrency: 8,
        onDelivery: () => (this.localDeliveries += 1),
      });
      worker.consumer.on('duplicate', ({ key, attempt }) => {
        if (
          this.broker.env['DEMO_BROKER'] === 'sqs' &&
          isSlow(key) &&
          attempt > 1 &&
          lapseNotes++ < 3
        ) {
          this.note(
            `! charge ${key.slice(0, 8)}…: visibility lapsed mid-handler; its redelivery waited on the claim, then was skipped`,
          );
        }
      });
      this.local.push(worker);
    }
    await doomed.ready;
    process.stderr.write(
      '  workers: worker-1, worker-2 (this process), worker-3 (own process, will be killed)\n',
    );
  }

  totals() {
    const local = this.local.map((w) => w.consumer.stats());
    const sum = (f: (s: (typeof local)[number]) => number) => local.reduce((n, s) => n + f(s), 0);
    const kids = (f: (c: ChildWorker['counters']) => number) =>
      this.children.reduce((n, c) => n + f(c.counters), 0);
    return {
      deliveries: this.localDeliveries + kids((c) => c.deliveries),
      duplicates: sum((s) => s.duplicates) + kids((c) => c.duplicates),
      retries: sum((s) => s.retried) + kids((c) => c.failed),
      // Deliveries the killed worker had in flight: rolled back by Postgres, redelivered.
      abandoned: this.children
        .filter((c) => c.crashed)
        .reduce(
          (n, { counters: c }) => n + c.deliveries - c.processed - c.duplicates - c.failed,
          0,
        ),
      inFlight: sum((s) => s.inFlight),
    };
  }

  close(): Promise<void> {
    const stopAll = () =>
      Promise.allSettled([
        ...this.local.map((w) => w.close()),
        ...this.children.map((c) => c.stop()),
      ]);
    return (this.closing ??= (async () => {
      // Stop first: a worker that never crashed only exits when told to, and the
      // replacement (if its predecessor did crash) may still be starting.
      await stopAll();
      await this.replaced;
      await stopAll();
    })());
  }
}

/** Database and broker in parallel; if one fails, stops the other before throwing. */
async function startServices(): Promise<[DemoDatabase, DemoBroker]> {
  const [db, broker] = await Promise.allSettled([startDatabase(), startBroker()]);
  if (db.status === 'fulfilled' && broker.status === 'fulfilled') return [db.value, broker.value];
  if (db.status === 'fulfilled') await db.value.stop();
  if (broker.status === 'fulfilled') await broker.value.close();
  throw db.status === 'rejected' ? db.reason : (broker as PromiseRejectedResult).reason;
}

function seconds(since: number): string {
  return ((Date.now() - since) / 1000).toFixed(1);
}
