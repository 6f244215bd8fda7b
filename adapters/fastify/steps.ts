/** Steps on Fastify: a flow as a Fastify route handler, over the web core's `idempotency.steps`. */
import type { FastifyReply, FastifyRequest } from 'fastify';

import {
  stepsRoute,
  type Flow,
  type Idempotency,
  type StepsRouteOptions,
} from '../../src/http/framework-kit.js';

/**
 * A Fastify 5 route handler that runs `flow` under the request's Idempotency-Key (see
 * `Idempotency.steps`). Fastify parses the JSON body; it is re-serialised for the
 * request's fingerprint (give the endpoint `fingerprint: 'json'` if clients may
 * re-serialise it between retries). Inside a scope where `idempotencyPlugin` wraps
 * routes, opt the route out with `config: { idempotency: false }`: the flow keeps its
 * own record.
 *
 * ```ts
 * app.post('/charges', { config: { idempotency: false } }, stepsFastify(idempotency, charge));
 * ```
 */
export function stepsFastify<I>(
  idempotency: Pick<Idempotency<unknown>, 'steps'>,
  flow: Flow<I>,
  options: StepsRouteOptions<I> = {},
): (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply> {
  const route = stepsRoute(idempotency, flow, options);
  return async (request, reply) => {
    const { protocol, host, url, method, headers } = request;
    const answer = await route({
      protocol,
      host,
      url,
      method,
      headers,
      body: bodyOf(request.body),
    });
    return reply.code(answer.status).headers(answer.headers).send(answer.body);
  };
}

/** What Fastify parsed, as bytes again. */
function bodyOf(body: unknown): Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  if (Buffer.isBuffer(body)) return body;
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  return Buffer.from(JSON.stringify(body), 'utf8');
}
