/**
 * An Express handler's `res`, held until COMMIT: `writeHead`, `write`, `end` and
 * `flushHeaders` are replaced on the object for the handler's run, so nothing reaches
 * the socket (status line included) before the verified COMMIT. None of them ends the
 * handler's work except `end()`, reported to the run as its answer (the run decides:
 * see completion.ts). The body goes to a {@link HeldBody}: bounded memory, then a
 * file, with backpressure (`write()` returns false, `'drain'` follows).
 *
 * The head (status and headers) is frozen where Node would have written it: at the
 * first `writeHead`, `write`, `flushHeaders` or `end`. From then on, for the run,
 * `headersSent` is true and `setHeader`, `appendHeader`, `removeHeader` and
 * `writeHead` throw ERR_HTTP_HEADERS_SENT as they do on a plain response (so a
 * second `res.json()` throws, and rolls back), and a late `res.status(400)` changes
 * nothing: the frozen head is what is stored and sent, as plain Express would have.
 *
 * The methods come back in one place, {@link release}, when the adapter answers: a
 * handler still running then (abandoned on timeout) keeps the held ones, which ignore
 * it, so a late call from it reaches neither the client nor the socket.
 */
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { OutgoingMessage } from 'node:http';
import type { HandlerRun } from './completion.js';
import { declaredResponse, HeldBody } from './held-body.js';
import { restoreHeaders, snapshotHeaders, type HeaderSnapshot } from './node-bridge.js';

type Method = (...args: unknown[]) => unknown;
type Held =
  'writeHead' | 'write' | 'end' | 'flushHeaders' | 'setHeader' | 'appendHeader' | 'removeHeader';
type Callback = (error?: Error | null) => void;
type WriteArgs = [chunk?: unknown, encoding?: unknown, callback?: unknown];

export class HeldResponse {
  readonly body: HeldBody;
  private readonly saved: Record<Held, Method>;
  private ended = false;
  private released = false;
  /** Status and headers as Node would have written them (see above); none yet. */
  private head: HeaderSnapshot | undefined;

  constructor(
    private readonly res: ServerResponse,
    limit: number,
    private readonly run: HandlerRun<true>,
  ) {
    // Node's own signal to writers that wait: the file behind the body caught up.
    this.body = new HeldBody(limit, () => res.emit('drain'));
    // Reflect.get: the methods are kept as values, to be applied to `res` later.
    const saved = (name: Held): Method => Reflect.get(res, name) as Method;
    this.saved = {
      writeHead: saved('writeHead'),
      write: saved('write'),
      end: saved('end'),
      flushHeaders: saved('flushHeaders'),
      setHeader: saved('setHeader'),
      appendHeader: saved('appendHeader'),
      removeHeader: saved('removeHeader'),
    };
    this.install();
  }

  /** The response to store: the head as frozen at the answer, the body held. */
  response(): Response {
    const head = this.head ?? snapshotHeaders(this.res);
    const headers = new Headers();
    for (const [name, value] of Object.entries(head.headers)) {
      if (Array.isArray(value)) for (const v of value) headers.append(name, v);
      else if (value !== undefined) headers.set(name, String(value));
    }
    return declaredResponse(this.body, { status: head.statusCode, headers });
  }

  /**
   * Puts the frozen head back on `res` (after {@link release}), so what is sent is what
   * was stored, whatever the handler set on `res` after its answer.
   */
  restoreHead(): void {
    if (this.head !== undefined) restoreHeaders(this.res, this.head);
  }

  /**
   * The adapter answers now: the real methods come back, unless the handler still runs
   * (abandoned), whose calls the held methods keep ignoring.
   */
  release(): void {
    if (this.run.running) this.run.abandon();
    else {
      Object.assign(this.res, this.saved);
      Reflect.deleteProperty(this.res, 'headersSent');
      this.released = true;
    }
  }

  /**
   * Ends `res` with `bytes` through the real methods (`end` writes the head through
   * `writeHead`), whether or not it was released; a handler still running keeps the
   * held ones after this synchronous call.
   */
  endWith(bytes: Uint8Array): void {
    const res = this.res;
    Object.assign(res, this.saved);
    try {
      res.end(bytes);
    } finally {
      if (!this.released) this.install();
    }
  }

  private install(): void {
    const res = this.res;
    const saved = this.saved;
    const holding = (): boolean => this.run.running && !this.ended;
    // The run's head is written (as far as the handler can tell): Node's `_header`. So
    // until release, also once the run is over (a callback-style handler is done at its
    // answer and may call on); not for an abandoned run, whose `res` the adapter answers.
    const frozen = (): boolean => this.head !== undefined && !this.run.abandoned;
    const freeze = (): void => {
      this.head ??= snapshotHeaders(res);
    };
    res.writeHead = (status: number, ...rest: unknown[]) => {
      if (frozen()) throw headersSentError('write');
      if (holding()) {
        writeHeadInto(res, status, rest);
        freeze();
      }
      return res;
    };
    res.write = ((...args: WriteArgs) => {
      const callback = callbackOf(args);
      if (!holding()) {
        if (callback !== undefined) process.nextTick(callback);
        return true;
      }
      freeze();
      return this.body.write(bytesOf(args[0], args[1]) ?? Buffer.alloc(0), callback);
    }) as ServerResponse['write'];
    res.end = ((...args: WriteArgs) => {
      if (holding()) {
        const bytes = bytesOf(args[0], args[1]);
        if (bytes !== undefined) this.body.write(bytes);
        freeze();
        this.ended = true;
        this.run.answer(true);
      }
      const callback = callbackOf(args);
      if (callback !== undefined) process.nextTick(callback);
      return res;
    }) as ServerResponse['end'];
    res.flushHeaders = () => {
      if (holding()) {
        freeze();
        this.body.markStreamed();
      }
    };
    // Node's own checks, against the held head instead of the socket's.
    res.setHeader = (...args: unknown[]) => {
      if (frozen()) throw headersSentError('set');
      return saved.setHeader.apply(res, args) as ServerResponse;
    };
    res.appendHeader = (...args: unknown[]) => {
      if (frozen()) throw headersSentError('append');
      return saved.appendHeader.apply(res, args) as ServerResponse;
    };
    res.removeHeader = (...args: unknown[]) => {
      if (frozen()) throw headersSentError('remove');
      saved.removeHeader.apply(res, args);
    };
    Object.defineProperty(res, 'headersSent', {
      configurable: true,
      enumerable: false,
      get: () => frozen() || headersSentOf(res),
    });
  }
}

function writeHeadInto(res: ServerResponse, status: number, rest: unknown[]): void {
  res.statusCode = status;
  const headers = rest.find((r) => typeof r === 'object' && r !== null);
  if (Array.isArray(headers)) {
    for (let i = 0; i + 1 < headers.length; i += 2)
      res.setHeader(String(headers[i]), String(headers[i + 1]));
  } else if (headers !== undefined) {
    for (const [name, value] of Object.entries(headers as OutgoingHttpHeaders))
      if (value !== undefined) res.setHeader(name, value);
  }
}

/** What `res.headersSent` says on the socket's side (Node's own getter). */
function headersSentOf(res: ServerResponse): boolean {
  // The prototype's getter, with `res` as its receiver (the instance's own one is ours).
  return Reflect.get(OutgoingMessage.prototype, 'headersSent', res) === true;
}

/** Node's error for a head changed after it was written (its message and code). */
function headersSentError(verb: 'set' | 'append' | 'remove' | 'write'): Error {
  const error = new Error(`Cannot ${verb} headers after they are sent to the client`);
  return Object.assign(error, { code: 'ERR_HTTP_HEADERS_SENT' });
}

/** A chunk as bytes; undefined for none (a callback in its place, or nothing). */
function bytesOf(chunk: unknown, encoding: unknown): Buffer | undefined {
  if (chunk === undefined || chunk === null || typeof chunk === 'function') return undefined;
  if (typeof chunk === 'string')
    return Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  if (chunk instanceof Uint8Array)
    return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  throw new TypeError('res.write() and res.end() take a string or bytes');
}

function callbackOf(args: WriteArgs): Callback | undefined {
  return args.find((a): a is Callback => typeof a === 'function');
}
