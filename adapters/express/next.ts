/**
 * Express's `req.next` while an idempotent handler's run is open. Express itself calls
 * it from the handler's `res`: `res.sendFile` / `res.download` without a callback hand
 * a missing or unreadable file to `req.next(err)` (a directory to `req.next()`), and a
 * handler may call it itself. Either way the answer then comes from the app's next
 * handler (its error handler, a 404 handler), not from the idempotent one, and held
 * like the handler's own it would be stored with the effect and committed: a stored
 * 404 that `idempotentFetch` reads as a final refusal, over a charge that happened.
 *
 * So for the run, `req.next` fails it, as a throw does: the transaction rolls back,
 * nothing is stored, and only then is the request handed on, so the next handler
 * answers with the real `res`, unstored, as it would without the library. An error
 * goes the way a thrown one goes; `next()`, `next('route')` and `next('router')` reach
 * the `next` the handler called, with the same argument.
 */
import type { NextFunction } from 'express';
import type { HandlerRun } from '../../src/http/framework-kit.js';

/**
 * The run's failure when the handler passed the request on without an error: carries
 * the hand-over, made by the adapter once the transaction has rolled back. (Telemetry
 * counts the request as failed: the endpoint did not handle it.)
 */
export class PassedOn extends Error {
  constructor(readonly handOn: () => void) {
    super('the idempotent handler passed the request on with next()');
    this.name = 'PassedOn';
  }
}

/**
 * The `req.next` for `run`, over `real` (the router's). A call from the run once it is
 * over (a callback-style handler done at its answer) goes to `real`, as in plain
 * Express; one from a run the adapter abandoned is ignored, as its writes are.
 */
export function nextFor(run: HandlerRun<true>, real: NextFunction): NextFunction {
  const held = (arg?: unknown): void => {
    if (run.running) run.fail(passesOn(arg) ? new PassedOn(() => real(arg)) : arg);
    else if (!run.abandoned) real(arg);
  };
  return held as NextFunction;
}

/** Express's reading of `next(arg)`: no error, so on to the next handler. */
function passesOn(arg: unknown): boolean {
  return !arg || arg === 'route' || arg === 'router';
}
