#!/usr/bin/env node
/**
 * `npx effectively-once <command>`: the package's bin. Everything but the process
 * (argv, streams, signals, exit) is in run.ts.
 */
import { EXIT } from './command.js';
import { runCli } from './run.js';

const controller = new AbortController();
const onSignal = (): void => {
  // A second signal does not wait for a graceful stop.
  if (controller.signal.aborted) process.exit(EXIT.interrupted);
  controller.abort();
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

const code = await runCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(`${text}\n`),
  stderr: (text) => process.stderr.write(`${text}\n`),
  env: process.env,
  signal: controller.signal,
});
// An interrupted command may leave a statement running; nothing else keeps the process.
if (code === EXIT.interrupted) process.exit(code);
process.exitCode = code;
