/** A flow as a framework's route: what the Express and Fastify steps adapters share. */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { Flow, StepsRouteOptions } from '../steps/types.js';
import type { Idempotency } from './idempotency-types.js';
import { nodeHeaders, requestUrl, webRequest } from './node-bridge.js';

/** A framework request's parts, as the steps route reads them. */
export interface StepsRouteRequest {
  readonly protocol: string;
  readonly host: string | undefined;
  /** The path and query. */
  readonly url: string;
  readonly method: string;
  readonly headers: IncomingHttpHeaders;
  /** The body's stream, or the bytes a parser left. */
  readonly body: Readable | Uint8Array | undefined;
}

/** The flow's final answer, ready for a framework's reply. */
export interface StepsRouteAnswer {
  readonly status: number;
  readonly headers: OutgoingHttpHeaders;
  readonly body: Buffer;
}

/**
 * `idempotency.steps(flow, options)` over a framework's request parts: the answer's
 * status, node headers and bytes, for the adapter to send its own way.
 */
export function stepsRoute<I>(
  idempotency: Pick<Idempotency<unknown>, 'steps'>,
  flow: Flow<I>,
  options: StepsRouteOptions<I>,
): (request: StepsRouteRequest) => Promise<StepsRouteAnswer> {
  const endpoint = idempotency.steps(flow, options);
  return async ({ protocol, host, url, method, headers, body }) => {
    const response = await endpoint(
      webRequest(requestUrl(protocol, host, url), method, headers, body),
    );
    return {
      status: response.status,
      headers: nodeHeaders(response),
      body: Buffer.from(await response.arrayBuffer()),
    };
  };
}
