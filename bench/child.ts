/**
 * Entry point of one scenario process (forked by main.ts through tsx): receives a
 * ScenarioTask over IPC, runs it, replies with the RunResult, exits.
 */
import type { ChildReply, ScenarioTask } from './protocol.js';
import { runScenario } from './run-scenario.js';

function reply(message: ChildReply): void {
  if (process.send === undefined) {
    console.error('bench/child.ts is started by bench/main.ts, not by hand');
    process.exit(2);
  }
  // Exit once the reply is out: consumers' leftover timers must not keep the process alive.
  process.send(message, () => process.exit(message.ok ? 0 : 1));
}

process.once('message', (task: ScenarioTask) => {
  runScenario(task).then(
    (result) => reply({ ok: true, result }),
    (error: unknown) =>
      reply({
        ok: false,
        error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      }),
  );
});
