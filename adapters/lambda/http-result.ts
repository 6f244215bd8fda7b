import type { APIGatewayProxyResult, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';

/** The body as Lambda's result carries it: text when it is text, else base64. */
interface EncodedBody {
  body: string;
  isBase64Encoded: boolean;
}

/** Types whose bodies are sent as text (when they are valid UTF-8 and not content-encoded). */
const TEXT =
  /^(text\/|application\/(json|xml|javascript|x-www-form-urlencoded|problem\+json)|[^;]*\+(json|xml)\b)/i;

/**
 * The response's bytes as a result body. Text only when nothing is lost by it (a textual
 * type, no `Content-Encoding`, valid UTF-8): REST APIs pass base64 through to the client
 * unless the type is among the API's binary media types. Everything else (gzip, images,
 * octet streams) is base64 with `isBase64Encoded`, which API Gateway and function URLs
 * decode, so the client gets the same bytes.
 */
async function encodedBody(response: Response): Promise<EncodedBody> {
  const bytes = new Uint8Array(await response.arrayBuffer());
  if (bytes.length === 0) return { body: '', isBase64Encoded: false };
  const type = response.headers.get('content-type') ?? '';
  if (!response.headers.has('content-encoding') && TEXT.test(type)) {
    try {
      return {
        body: new TextDecoder('utf-8', { fatal: true }).decode(bytes),
        isBase64Encoded: false,
      };
    } catch {
      // Not UTF-8 after all: base64 below.
    }
  }
  return { body: Buffer.from(bytes).toString('base64'), isBase64Encoded: true };
}

/** Every header but `set-cookie`, each once (a repeated one comma-joined, as `Headers` keeps it). */
function singleHeaders(response: Response): Record<string, string> {
  const out: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    if (name !== 'set-cookie') out[name] = value;
  });
  return out;
}

/** Payload 2.0's result (HTTP API, function URLs): cookies in `cookies`, one per entry. */
export async function resultV2(response: Response): Promise<APIGatewayProxyStructuredResultV2> {
  const cookies = response.headers.getSetCookie();
  return {
    statusCode: response.status,
    headers: singleHeaders(response),
    ...(cookies.length > 0 ? { cookies } : {}),
    ...(await encodedBody(response)),
  };
}

/** Payload 1.0's result (REST APIs): each `Set-Cookie` a value of `multiValueHeaders`. */
export async function resultV1(response: Response): Promise<APIGatewayProxyResult> {
  const cookies = response.headers.getSetCookie();
  return {
    statusCode: response.status,
    headers: singleHeaders(response),
    ...(cookies.length > 0 ? { multiValueHeaders: { 'set-cookie': cookies } } : {}),
    ...(await encodedBody(response)),
  };
}
