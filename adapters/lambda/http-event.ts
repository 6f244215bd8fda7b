import type { APIGatewayProxyEvent, APIGatewayProxyEventV2 } from 'aws-lambda';
import { ConfigurationError } from '../../src/errors.js';

/** An HTTP event Lambda hands a function: API Gateway REST (payload 1.0), HTTP API or a function URL (2.0). */
export type LambdaHttpEvent = APIGatewayProxyEventV2 | APIGatewayProxyEvent;

/** Payload 2.0 (HTTP API, function URLs) has `version: '2.0'` and `requestContext.http`. */
export function isPayloadV2(event: LambdaHttpEvent): event is APIGatewayProxyEventV2 {
  return (event as { version?: unknown }).version === '2.0';
}

/**
 * The event as a web `Request`, as the client sent it: method, URL (host, path, query
 * string), headers and body (decoded from base64 when `isBase64Encoded`). Payload 2.0's
 * `cookies` become one `Cookie` header again; 1.0's multi-value headers and query
 * parameters keep every value.
 */
export function requestOf(event: LambdaHttpEvent): Request {
  if (typeof event !== 'object' || event === null)
    throw new ConfigurationError('event', 'is not an API Gateway or function URL event');
  return isPayloadV2(event) ? requestOfV2(event) : requestOfV1(event);
}

function requestOfV2(event: APIGatewayProxyEventV2): Request {
  const http = event.requestContext?.http;
  if (http === undefined || typeof event.rawPath !== 'string')
    throw new ConfigurationError(
      'event',
      'is a 2.0 payload without requestContext.http or rawPath',
    );
  const headers = new Headers();
  for (const [name, value] of Object.entries(event.headers ?? {}))
    if (value !== undefined) headers.set(name, value);
  // 2.0 moves the Cookie header's pairs to `cookies`.
  if (event.cookies !== undefined && event.cookies.length > 0)
    headers.set('cookie', event.cookies.join('; '));
  const query = event.rawQueryString ? `?${event.rawQueryString}` : '';
  const host = event.requestContext.domainName ?? headers.get('host') ?? 'lambda.invalid';
  return build(`https://${host}${event.rawPath}${query}`, http.method, headers, event);
}

function requestOfV1(event: APIGatewayProxyEvent): Request {
  if (typeof event.httpMethod !== 'string' || typeof event.path !== 'string')
    throw new ConfigurationError('event', 'is a 1.0 payload without httpMethod or path');
  const headers = new Headers();
  const multi = event.multiValueHeaders ?? {};
  for (const [name, values] of Object.entries(multi))
    for (const value of values ?? []) headers.append(name, value);
  // `headers` holds each header's last value: only the ones `multiValueHeaders` lacks.
  for (const [name, value] of Object.entries(event.headers ?? {}))
    if (value !== undefined && !hasName(multi, name)) headers.set(name, value);
  const params = new URLSearchParams();
  const multiQuery = event.multiValueQueryStringParameters ?? {};
  for (const [name, values] of Object.entries(multiQuery))
    for (const value of values ?? []) params.append(name, value);
  for (const [name, value] of Object.entries(event.queryStringParameters ?? {}))
    if (value !== undefined && !hasName(multiQuery, name)) params.append(name, value);
  const query = params.size > 0 ? `?${params.toString()}` : '';
  const host = event.requestContext?.domainName ?? headers.get('host') ?? 'lambda.invalid';
  return build(`https://${host}${event.path}${query}`, event.httpMethod, headers, event);
}

function build(
  url: string,
  method: string,
  headers: Headers,
  event: { body?: string | null | undefined; isBase64Encoded?: boolean },
): Request {
  const bodyless = method === 'GET' || method === 'HEAD';
  const raw = event.body ?? undefined;
  const body =
    bodyless || raw === undefined
      ? null
      : event.isBase64Encoded === true
        ? Buffer.from(raw, 'base64')
        : Buffer.from(raw, 'utf8');
  return new Request(url, { method, headers, body });
}

function hasName(record: Record<string, unknown>, name: string): boolean {
  const lower = name.toLowerCase();
  return Object.keys(record).some((k) => k.toLowerCase() === lower);
}
