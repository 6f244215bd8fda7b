/** The HTTP door of steps: a flow behind an Idempotency-Key endpoint, over web Request/Response. */
import { ConfigurationError, EffectivelyOnceError, ShutdownError } from '../errors.js';
import { readRequestBody } from '../http/body.js';
import { IdempotencyKeyMissingError, IdempotencyKeyReusedError } from '../http/errors.js';
import { fingerprint } from '../http/fingerprint.js';
import { parseIdempotencyKey } from '../http/key.js';
import { checkScope, type IdempotencyConfig } from '../http/options.js';
import { problemResponse } from '../http/problem.js';
import { REPLAYED_HEADER } from '../http/replay.js';
import { FlowKeyReusedError } from './errors.js';
import { createFlowRunner } from './runner.js';
import type { Flow, FlowAnswer, FlowOutcome, StepsRouteOptions } from './types.js';

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

/**
 * A fetch-style handler running `flow` for each request: key, scope, route and
 * fingerprint as the endpoint family's own requests have them; the flow's record in
 * its own table (see table.ts), the runner's answer turned into a response.
 */
export function stepsEndpoint<I>(
  host: StepsHost,
  flow: Flow<I>,
  options: StepsRouteOptions<I>,
): (request: Request) => Promise<Response> {
  const { cfg } = host;
  // A flow's record is not routed yet: it would live in the first database only.
  if (cfg.routing !== undefined)
    throw new ConfigurationError('pool', 'steps routes do not take a routed pool yet');
  const runner = createFlowRunner({
    pool: cfg.pool,
    schema: options.schema ?? cfg.table.schema,
    ...(options.table !== undefined ? { table: options.table } : {}),
    ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
    ...(options.telemetry !== undefined ? { telemetry: options.telemetry } : {}),
    migrate: cfg.migrate,
    logger: cfg.logger,
  });
  const problem = (error: EffectivelyOnceError): Response => problemResponse(error, cfg);

  const handle = async (request: Request): Promise<Response> => {
    if (host.closing()) return problem(new ShutdownError('(closed)'));
    let key: string | undefined;
    try {
      key = parseIdempotencyKey(request.headers.get(cfg.header), cfg.header, cfg.maxKeyLength);
    } catch (error) {
      return problem(error as EffectivelyOnceError);
    }
    // A flow is resumed by its key: a request without one could never be.
    if (key === undefined) return problem(new IdempotencyKeyMissingError(`${cfg.header} header`));
    const method = request.method.toUpperCase();
    let body: Uint8Array;
    let scope: string;
    let route: string;
    let input: I;
    try {
      body = await readRequestBody(request, cfg.maxRequestBytes, host.hardStop);
      const url = new URL(request.url);
      scope = checkScope(cfg.constantScope ?? (await cfg.scope(request)));
      route = cfg.routeIsPath ? url.pathname : cfg.route(request);
      const parsed = parseBody(body);
      if (parsed.kind === 'invalid') return badBody(cfg.problemTypeBase);
      input =
        options.input === undefined
          ? (parsed.value as I)
          : await options.input(parsed.value, request);
      const fp = fingerprint(
        {
          method,
          route,
          search: url.search,
          body,
          contentType: request.headers.get('content-type'),
        },
        cfg.fingerprint,
      );
      const outcome = await runner.run(flow, {
        scope,
        key,
        input,
        origin: `${method} ${route}`,
        fingerprint: fp,
        waitMs: cfg.lockTimeoutMs,
        signal: host.hardStop,
      });
      return answerOf(outcome, key, problem, cfg.retryAfterSeconds);
    } catch (error) {
      if (isEo(error)) return problem(error);
      cfg.logger.error({ err: error, key }, 'effectively-once: a steps route failed');
      throw error;
    }
  };

  return (request) => {
    const running = handle(request);
    host.track(running);
    return running;
  };
}

/** The response for how the flow's run ended. */
function answerOf(
  outcome: FlowOutcome,
  key: string,
  problem: (error: EffectivelyOnceError) => Response,
  retryAfterSeconds: number,
): Response {
  switch (outcome.kind) {
    case 'answered':
      return jsonResponse(outcome.answer, outcome.replayed);
    case 'busy':
      return problem(outcome.error);
    case 'refused': {
      const error = outcome.error;
      if (error instanceof FlowKeyReusedError)
        return problem(
          new IdempotencyKeyReusedError(
            key,
            error.details.reason === 'input' ? 'fingerprint' : 'endpoint',
          ),
        );
      return stepsProblem(error, 500, undefined);
    }
    case 'retry':
      return stepsProblem(outcome.error, 503, Math.max(1, retryAfterSeconds));
  }
}

/** A flow's stored answer as a response (JSON body), marked when replayed. */
function jsonResponse(answer: FlowAnswer, replayed: boolean): Response {
  const headers = new Headers(answer.headers);
  if (answer.body !== undefined && !headers.has('content-type'))
    headers.set('content-type', 'application/json');
  if (replayed) headers.set(REPLAYED_HEADER, 'true');
  const body = answer.body === undefined ? null : JSON.stringify(answer.body);
  return new Response(answer.status === 204 || answer.status === 304 ? null : body, {
    status: answer.status,
    headers,
  });
}

/**
 * A problem answer of steps' own: 503 + Retry-After at a recovery point (the flow's
 * record stays, a retry resumes it), 500 for a flow refused (its steps changed).
 */
function stepsProblem(
  error: EffectivelyOnceError,
  status: number,
  retryAfterSeconds: number | undefined,
): Response {
  const headers = new Headers({ 'content-type': 'application/problem+json' });
  if (retryAfterSeconds !== undefined) headers.set('retry-after', String(retryAfterSeconds));
  const body = {
    type: 'about:blank',
    title:
      status === 503
        ? 'The request stopped at a recovery point'
        : 'The request cannot be resumed by this deploy',
    status,
    detail:
      status === 503
        ? 'What completed is recorded: retry with the same idempotency key to resume it.'
        : 'The recorded steps of this idempotency key disagree with this server’s.',
    code: error.code,
  };
  return new Response(JSON.stringify(body), { status, headers });
}

function badBody(problemTypeBase: string): Response {
  return new Response(
    JSON.stringify({
      type: `${problemTypeBase}body-invalid`,
      title: 'The request body is not JSON',
      status: 400,
      detail: 'Nothing was applied: send a JSON body.',
      code: 'EO_BODY_PARSE',
    }),
    { status: 400, headers: { 'content-type': 'application/problem+json' } },
  );
}

function parseBody(body: Uint8Array): { kind: 'ok'; value: unknown } | { kind: 'invalid' } {
  if (body.byteLength === 0) return { kind: 'ok', value: undefined };
  try {
    return { kind: 'ok', value: JSON.parse(new TextDecoder().decode(body)) as unknown };
  } catch {
    return { kind: 'invalid' };
  }
}

function isEo(error: unknown): error is EffectivelyOnceError {
  return error instanceof EffectivelyOnceError;
}
