import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { requestUrl, sendResponse, webRequest } from './node-bridge.js';

/** A fetch-style handler, such as `idempotency.handler(fn)` returns. */
export type FetchHandler = (request: Request) => Response | Promise<Response>;

/** A `node:http` (or `node:https`) request listener, for `http.createServer(listener)`. */
export type NodeListener = (req: IncomingMessage, res: ServerResponse) => void;

/** Options of {@link toNodeListener}. */
export interface NodeListenerOptions {
  /**
   * Told when the handler throws or rejects (`idempotency.handler` never does: it
   * answers problem+json). The client then gets an empty 500, or, when the response
   * had already started, a destroyed connection. Default: nothing.
   */
  onError?: (error: unknown) => void;
}

/**
 * Serves a fetch-style handler (web `Request` in, `Response` out) on `node:http`,
 * without a framework:
 *
 * ```ts
 * http.createServer(toNodeListener(idempotency.handler(charge))).listen(3000);
 * ```
 *
 * The request's body is handed to the handler unread, as a stream from the socket (the
 * endpoint reads it, bounded by `maxRequestBytes`); the URL is `http://` or `https://`
 * (a TLS socket) with the `Host` header. The response's status and headers are written
 * once the handler resolves, which for an idempotent endpoint is after its COMMIT, and
 * its body is piped with backpressure as it comes (a `ctx.streamed` body included). A
 * client that disconnects does not stop the handler: its effect commits or rolls back,
 * and the client's retry replays or runs afresh.
 */
export function toNodeListener(
  handler: FetchHandler,
  options: NodeListenerOptions = {},
): NodeListener {
  if (typeof handler !== 'function')
    throw new TypeError(
      'toNodeListener(handler): handler must be a function (request) => Response',
    );
  return (req, res) => {
    void serve(handler, options, req, res);
  };
}

async function serve(
  handler: FetchHandler,
  options: NodeListenerOptions,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  let response: Response;
  try {
    const tls = (req.socket as Partial<TLSSocket>).encrypted === true;
    const url = requestUrl(tls ? 'https' : 'http', req.headers.host, req.url ?? '/');
    const method = req.method ?? 'GET';
    response = await handler(webRequest(url, method, req.headers, req));
  } catch (error) {
    report(options, error);
    if (res.headersSent) res.destroy();
    else {
      res.statusCode = 500;
      res.end();
    }
    return;
  }
  await sendResponse(response, res).catch((error: unknown) => {
    report(options, error);
    res.destroy();
  });
}

function report(options: NodeListenerOptions, error: unknown): void {
  try {
    options.onError?.(error);
  } catch {
    // A throwing hook must not become an unhandled rejection that ends the process.
  }
}
