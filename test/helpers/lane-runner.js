/**
 * A jest runner that keeps the heavy test files out of each other's way (jest.config.js,
 * `runnerOptions.oneAtATime`): harness runs with private services, kills and deadlines
 * (chaos, bench, failover) and the files that build or spawn the package. Those run one at
 * a time in a lane of their own, one worker, while the other files share the remaining
 * workers beside it. So two harness runs never compete for the CPU (their deadlines were
 * sized for a machine to themselves, less one light test file), yet the suite still uses
 * every worker.
 *
 * With one worker (`--runInBand`, `--maxWorkers=1`) everything runs in band, as jest
 * would. The lanes are jest's own runner (jest-runner) twice, so workers, reporters and
 * the summary are jest's; this only splits the files between them.
 */
import TestRunner from 'jest-runner';

export default class LaneRunner {
  supportsEventEmitters = true;

  /**
   * @param {import('@jest/types').Config.GlobalConfig} globalConfig
   * @param {import('jest-runner').TestRunnerContext} context
   * @param {{ oneAtATime?: string[] }} runnerOptions
   */
  constructor(globalConfig, context, runnerOptions = {}) {
    this.workers = globalConfig.maxWorkers;
    this.heavy = (runnerOptions.oneAtATime ?? []).map((source) => new RegExp(source));
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
    const isHeavy = (test) => this.heavy.some((re) => re.test(test.path));
    const heavy = tests.filter(isHeavy);
    const others = tests.filter((test) => !isHeavy(test));
    if (options.serial || this.workers < 2 || heavy.length === 0 || others.length === 0) {
      return this.whole.runTests(tests, watcher, options);
    }
    await Promise.all([
      this.heavyLane.runTests(heavy, watcher, { ...options, serial: false }),
      this.otherLane.runTests(others, watcher, { ...options, serial: false }),
    ]);
  }
}
