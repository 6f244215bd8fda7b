import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate } from 'effectively-once';
import { spawnWorker, type ChildWorker } from './child.js';
import { FAULTS, isSlow, sleep } from './faults.js';
import { createPaymentTables } from './payments.js';
import { planCharges, produce, type ProducerStats } from './producer.js';
import { Progress } from './progress.js';
import { printReport, readLedger } from './report.js';
import { startServices } from './services.js';
import { createQueues, queueDepth, sqsClient } from './sqs.js';
import { startPaymentWorker, type PaymentWorker } from './worker.js';

export interface DemoOptions {
  messages: number;
  seed: number;
  /** Give up waiting for the queue to drain after this long. */
  deadlineMs: number;
}

/**
 * The main job: a payment worker fleet (two workers in this process, one in another
 * process that gets killed between COMMIT and delete, and its replacement) drains N
 * logical charges that a retrying producer sends, while slow handlers outlive the
 * visibility timeout. Resolves true when the ledger shows every charge exactly once.
 */
export async function runSqsDemo(options: DemoOptions): Promise<boolean> {
  const started = Date.now();
  const say = (text: string) => process.stderr.write(`${text}\n`);
  say(
    `effectively-once demo: ${options.messages} charges through SQS into Postgres (seed ${options.seed})`,
  );
  const services = await startServices();
  say(`  services: ${services.description} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  const admin = new pg.Pool({
    connectionString: services.databaseUrl,
    max: 3,
    options: `-c search_path=${services.schema}`,
  });
  admin.on('error', () => undefined);
  const client = sqsClient(services.sqsEndpoint);
  const children: ChildWorker[] = [];
  const workers: PaymentWorker[] = [];
  let queues: Awaited<ReturnType<typeof createQueues>> | undefined;
  try {
    await admin.query(`CREATE SCHEMA IF NOT EXISTS ${services.schema}`);
    await createPaymentTables(admin);
    await migrate(admin, { schema: services.schema });
    queues = await createQueues(
      client,
      `eo-demo-${randomBytes(4).toString('hex')}`,
      FAULTS.visibilityTimeoutSeconds,
    );
    const plan = planCharges(options.messages, options.seed);
    const producerStats: ProducerStats = { logicalSent: 0, messagesSent: 0, resends: 0 };
    const progress = new Progress(options.messages);
    let applied = 0;
    let localDeliveries = 0;
    const totals = () => {
      const local = workers.map((w) => w.consumer.stats());
      return {
        deliveries: localDeliveries + children.reduce((s, c) => s + c.counters.deliveries, 0),
        duplicates:
          local.reduce((s, x) => s + x.duplicates, 0) +
          children.reduce((s, c) => s + c.counters.duplicates, 0),
        retries:
          local.reduce((s, x) => s + x.retried, 0) +
          children.reduce((s, c) => s + c.counters.failed, 0),
        inFlight: local.reduce((s, x) => s + x.inFlight, 0),
      };
    };
    const redraw = () =>
      progress.update({ applied, sent: producerStats.messagesSent, ...totals() });

    const workerConfig = {
      databaseUrl: services.databaseUrl,
      schema: services.schema,
      sqsEndpoint: services.sqsEndpoint,
      queueUrl: queues.queueUrl,
      concurrency: 8,
    };
    const childEnv = {
      DEMO_DATABASE_URL: services.databaseUrl,
      DEMO_SCHEMA: services.schema,
      DEMO_SQS_ENDPOINT: services.sqsEndpoint ?? '',
      DEMO_QUEUE_URL: queues.queueUrl,
    };
    const crashAfter = FAULTS.crashAfterCommits(options.messages);
    let crash = `no worker crash (worker-3 committed fewer than ${crashAfter} charges)`;
    const doomed = spawnWorker({
      name: 'worker-3',
      env: childEnv,
      crashAfter,
      concurrency: 8,
      onChange: redraw,
      onCrash: (key, commits) => {
        crash = `worker-3 killed (SIGKILL) after its COMMIT #${commits}, before the delete`;
        progress.note(
          `! worker-3 killed with SIGKILL right after COMMIT of charge ${key.slice(0, 8)}…, before its delete`,
        );
      },
    });
    children.push(doomed);
    // The supervisor restarts a crashed worker, as ECS or Kubernetes would.
    const replaced = doomed.exited.then((crashedAfter) => {
      if (crashedAfter === undefined) return;
      progress.note(
        '  worker-4 starts in a fresh process to replace it; redeliveries of its messages are deduplicated',
      );
      const fresh = spawnWorker({
        name: 'worker-4',
        env: childEnv,
        crashAfter: 0,
        concurrency: 8,
        onChange: redraw,
      });
      children.push(fresh);
      return fresh.ready;
    });
    let lapseNotes = 0;
    for (const name of ['worker-1', 'worker-2']) {
      const worker = await startPaymentWorker({
        ...workerConfig,
        worker: name,
        onReceive: (n) => (localDeliveries += n),
      });
      worker.consumer.on('duplicate', ({ key, attempt }) => {
        if (isSlow(key) && attempt > 1 && lapseNotes++ < 3) {
          progress.note(
            `! charge ${key.slice(0, 8)}…: visibility lapsed mid-handler; its redelivery waited on the claim, then was skipped`,
          );
        }
      });
      workers.push(worker);
    }
    await doomed.ready;
    say(
      `  workers: worker-1, worker-2 (this process), worker-3 (own process, will be killed); visibility timeout ${FAULTS.visibilityTimeoutSeconds} s, heartbeat off`,
    );

    const pollAppliedEvery = setInterval(() => {
      admin.query<{ n: string }>('SELECT count(*) AS n FROM charges').then(
        (r) => {
          applied = Number(r.rows[0]?.n ?? 0);
          redraw();
        },
        () => undefined,
      );
    }, 150);
    let left = { queue: -1, deadLetter: -1 };
    try {
      await produce(client, queues.queueUrl, plan, producerStats, redraw);
      // Drained: both queues empty twice in a row and nothing in flight here.
      const deadline = Date.now() + options.deadlineMs;
      let emptyChecks = 0;
      while (emptyChecks < 2 && Date.now() < deadline) {
        await sleep(250);
        left = {
          queue: await queueDepth(client, queues.queueUrl),
          deadLetter: await queueDepth(client, queues.deadLetterQueueUrl),
        };
        emptyChecks =
          left.queue === 0 && left.deadLetter === 0 && totals().inFlight === 0
            ? emptyChecks + 1
            : 0;
      }
    } finally {
      clearInterval(pollAppliedEvery);
    }
    await replaced;
    await Promise.all([...workers.map((w) => w.close()), ...children.map((c) => c.stop())]);
    const ledger = await readLedger(admin, plan);
    applied = ledger.applied;
    redraw();
    progress.finish();
    const t = totals();
    return printReport(
      {
        title: `effectively-once demo: ${services.description}`,
        plan,
        messagesSent: producerStats.messagesSent,
        resends: producerStats.resends,
        deliveries: t.deliveries,
        duplicates: t.duplicates,
        retries: t.retries,
        slowCharges: plan.charges.filter((c) => isSlow(c.chargeId)).length,
        crash,
        leftInQueue: left.queue,
        leftInDeadLetterQueue: left.deadLetter,
        seconds: (Date.now() - started) / 1000,
      },
      ledger,
    );
  } finally {
    await Promise.allSettled([...workers.map((w) => w.close()), ...children.map((c) => c.stop())]);
    if (services.sharedDatabase)
      await admin.query(`DROP SCHEMA IF EXISTS ${services.schema} CASCADE`).catch(() => undefined);
    await admin.end().catch(() => undefined);
    await queues?.delete();
    client.destroy();
    await services.stop();
  }
}
