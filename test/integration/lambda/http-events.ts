/**
 * HTTP events built the way Lambda delivers them (the shapes and field values of AWS's
 * documented examples, typed by @types/aws-lambda): API Gateway HTTP API / function
 * URL payload 2.0, and REST API payload 1.0.
 */
import type { APIGatewayProxyEvent, APIGatewayProxyEventV2 } from 'aws-lambda';

export interface HttpCall {
  method: string;
  path: string;
  /** Query parameters, each possibly repeated. */
  query?: Array<[string, string]>;
  /** Request headers, each possibly repeated (lower-case names, as API Gateway sends 2.0's). */
  headers?: Array<[string, string]>;
  /** Cookie pairs (`a=1`): 2.0's `cookies`, 1.0's Cookie header. */
  cookies?: string[];
  body?: Buffer | string;
}

const DOMAIN = 'r3pmxmplak.execute-api.us-east-2.amazonaws.com';

/** Payload 2.0: repeated headers comma-joined, cookies apart, the body base64 when binary. */
export function eventV2(call: HttpCall): APIGatewayProxyEventV2 {
  const headers: Record<string, string> = { host: DOMAIN };
  for (const [name, value] of call.headers ?? [])
    headers[name] =
      headers[name] === undefined || name === 'host' ? value : `${headers[name]},${value}`;
  const query: Record<string, string> = {};
  for (const [name, value] of call.query ?? [])
    query[name] = query[name] === undefined ? value : `${query[name]},${value}`;
  const binary = Buffer.isBuffer(call.body);
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: call.path,
    rawQueryString: new URLSearchParams(call.query ?? []).toString(),
    ...(call.cookies !== undefined ? { cookies: call.cookies } : {}),
    headers,
    ...(call.query !== undefined ? { queryStringParameters: query } : {}),
    requestContext: {
      accountId: '123456789012',
      apiId: 'r3pmxmplak',
      domainName: DOMAIN,
      domainPrefix: 'r3pmxmplak',
      http: {
        method: call.method,
        path: call.path,
        protocol: 'HTTP/1.1',
        sourceIp: '205.255.255.176',
        userAgent: 'curl/7.64.1',
      },
      requestId: 'JKJaXmPLvHcESHA=',
      routeKey: '$default',
      stage: '$default',
      time: '10/Mar/2020:05:16:23 +0000',
      timeEpoch: Date.now(),
    },
    ...(call.body === undefined
      ? {}
      : { body: binary ? (call.body as Buffer).toString('base64') : (call.body as string) }),
    isBase64Encoded: binary,
  };
}

/** Payload 1.0: `headers` with each last value, `multiValueHeaders` with all of them. */
export function eventV1(call: HttpCall): APIGatewayProxyEvent {
  const pairs: Array<[string, string]> = [['Host', DOMAIN], ...(call.headers ?? [])];
  if (call.cookies !== undefined) pairs.push(['Cookie', call.cookies.join('; ')]);
  const headers: Record<string, string> = {};
  const multiValueHeaders: Record<string, string[]> = {};
  for (const [name, value] of pairs) {
    headers[name] = value;
    (multiValueHeaders[name] ??= []).push(value);
  }
  const query: Record<string, string> = {};
  const multiQuery: Record<string, string[]> = {};
  for (const [name, value] of call.query ?? []) {
    query[name] = value;
    (multiQuery[name] ??= []).push(value);
  }
  const binary = Buffer.isBuffer(call.body);
  return {
    resource: '/{proxy+}',
    path: call.path,
    httpMethod: call.method,
    headers,
    multiValueHeaders,
    queryStringParameters: call.query === undefined ? null : query,
    multiValueQueryStringParameters: call.query === undefined ? null : multiQuery,
    pathParameters: { proxy: call.path.slice(1) },
    stageVariables: null,
    requestContext: {
      accountId: '123456789012',
      apiId: '1234567890',
      authorizer: {},
      domainName: DOMAIN,
      httpMethod: call.method,
      identity: {
        accessKey: null,
        accountId: null,
        apiKey: null,
        apiKeyId: null,
        caller: null,
        clientCert: null,
        cognitoAuthenticationProvider: null,
        cognitoAuthenticationType: null,
        cognitoIdentityId: null,
        cognitoIdentityPoolId: null,
        principalOrgId: null,
        sourceIp: '127.0.0.1',
        user: null,
        userAgent: 'Custom User Agent String',
        userArn: null,
      },
      path: `/prod${call.path}`,
      protocol: 'HTTP/1.1',
      requestId: 'c6af9ac6-7b61-11e6-9a41-93e8deadbeef',
      requestTimeEpoch: Date.now(),
      resourceId: '123456',
      resourcePath: '/{proxy+}',
      stage: 'prod',
    },
    body:
      call.body === undefined
        ? null
        : binary
          ? (call.body as Buffer).toString('base64')
          : (call.body as string),
    isBase64Encoded: binary,
  };
}
