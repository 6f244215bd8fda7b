/** The HTTP door of steps: a flow behind an Idempotency-Key endpoint, over web Request/Response. */
import type { IdempotencyConfig } from '../http/options.js';
import type { Flow, StepsRouteOptions } from './types.js';

/** What the door borrows from the endpoint family that made it (createIdempotency's). */
export interface StepsHost {
  readonly cfg: IdempotencyConfig<unknown>;
  /** Aborts at close()'s hard stop. */
  readonly hardStop: AbortSignal;
  /** Counts a request in flight until it ends (close() waits for it). */
  track(running: Promise<unknown>): void;
  /** Whether close() was called: new requests are refused (503). */
  closing(): boolean;
}

/** A fetch-style handler running `flow` for each request. */
export function stepsEndpoint<I>(
  host: StepsHost,
  flow: Flow<I>,
  options: StepsRouteOptions<I>,
): (request: Request) => Promise<Response> {
  void host;
  void flow;
  void options;
  return () => Promise.reject(new Error('not yet'));
}
