/** The completer: finishes flows whose owner's lease expired, with their recorded input. */
import type { StepsCompleter, StepsCompleterOptions } from './types.js';

/**
 * Finishes abandoned flows in the background: every `intervalMs`, the unfinished flows
 * of `flows` whose lease expired are taken over (fence + 1) and driven to their final
 * answer with the recorded input, so a client that never retries still gets its effect
 * recorded consistently. Run it in one or more processes (each flow has one owner at a
 * time), or from the CLI.
 */
export function createStepsCompleter(options: StepsCompleterOptions): StepsCompleter {
  void options;
  throw new Error('not yet');
}
