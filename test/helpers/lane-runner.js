/**
 * The suite's jest runner (jest.config.js, both projects): jest's own runner (jest-runner),
 * with the test files split in three.
 * - HEAVY files run one at a time, in a lane of one worker, beside the other files on the
 *   remaining workers: harness runs with private services, kills and deadlines (chaos,
 *   bench, failover, replica, compare, the Lambda kill test) and the package build. Two of them
 *   never compete for the CPU, yet the suite uses every worker.
 * - ALONE files run last, in band, with nothing beside them: those whose waits a busy
 *   neighbour ran out (a Kafka topic's deletion, a group's rebalance, a deadline).
 * - The rest are isolated by construction (a schema per file, random queue and topic
 *   names, ports from the OS) and share the workers freely.
 * With one worker (`--runInBand`, `--maxWorkers=1`) everything runs in band, as jest
 * would. Workers, reporters and the summary are jest's; this only splits the files.
 */
import TestRunner from 'jest-runner';

const HEAVY = [
  /\/test\/integration\/chaos\//,
  /\/test\/integration\/bench\//,
  /\/test\/integration\/failover\//,
  /\/test\/integration\/replica\//,
  /\/test\/integration\/compare-[a-z-]+\.test\.ts$/,
  /\/test\/integration\/lambda\/kill\.test\.ts$/,
  /\/test\/integration\/package\.test\.ts$/,
];

// Each of these failed under two workers on a machine at load 25-30 and passed alone at
// the same load (cispeed, 2026-12-07): recreated-topic-keys waited past its 30 s for Kafka
// to delete a topic, rebalance past its 60 s for a member's join and leave, pipeline-capacity
// (which saturates its consumer on purpose) past its 120 s for every record, shared-retention
// past its 20 s for a relay to park an entry, http-own-commit-timeout (knex) answered its
// retry 500 where the test expects 503, and http/timeout-at-commit (hono) saw no rollback
// answer for a session timeout at COMMIT.
const ALONE = [
  /\/test\/integration\/kafka\/(recreated-topic-keys|rebalance|pipeline-capacity)\.test\.ts$/,
  /\/test\/integration\/outbox\/shared-retention\.test\.ts$/,
  /\/test\/integration\/attack34b\/http-own-commit-timeout\.test\.ts$/,
  /\/test\/integration\/http\/timeout-at-commit\.test\.ts$/,
];

const matches = (patterns) => (test) => patterns.some((re) => re.test(test.path));

export default class LaneRunner {
  supportsEventEmitters = true;

  /**
   * @param {import('@jest/types').Config.GlobalConfig} globalConfig
   * @param {import('jest-runner').TestRunnerContext} context
   */
  constructor(globalConfig, context) {
    this.workers = globalConfig.maxWorkers;
    this.whole = new TestRunner(globalConfig, context);
    this.heavyLane = new TestRunner({ ...globalConfig, maxWorkers: 1 }, context);
    this.otherLane = new TestRunner(
      { ...globalConfig, maxWorkers: Math.max(1, this.workers - 1) },
      context,
    );
  }

  /** Jest subscribes once; each runner that may run a file reports through it. */
  on(eventName, listener) {
    const off = [this.whole, this.heavyLane, this.otherLane].map((r) => r.on(eventName, listener));
    return () => off.forEach((unsubscribe) => unsubscribe());
  }

  async runTests(tests, watcher, options) {
    if (options.serial || this.workers < 2) return this.whole.runTests(tests, watcher, options);
    const alone = tests.filter(matches(ALONE));
    const shared = tests.filter((test) => !alone.includes(test));
    const heavy = shared.filter(matches(HEAVY));
    const others = shared.filter((test) => !heavy.includes(test));
    if (heavy.length > 0 && others.length > 0) {
      await Promise.all([
        this.heavyLane.runTests(heavy, watcher, options),
        this.otherLane.runTests(others, watcher, options),
      ]);
    } else if (shared.length > 0) {
      await this.whole.runTests(shared, watcher, options);
    }
    if (alone.length > 0 && !watcher.isInterrupted()) {
      await this.whole.runTests(alone, watcher, { ...options, serial: true });
    }
  }
}
