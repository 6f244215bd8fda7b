/**
 * Response bodies an adapter holds itself until COMMIT, and how the engine learns what
 * of them to store without reading them.
 *
 * A {@link HeldBody} keeps what the handler writes in memory up to the endpoint's
 * `maxBodyBytes` (it is stored with the effect); past it, everything goes to a
 * temporary file (stored as omitted, `too-large`), so memory stays bounded whatever
 * the body's size, and `write()` returns false while the file is behind, its `drain`
 * following the file's. After COMMIT the bytes go to the socket with the socket's own
 * backpressure; the file is unlinked as soon as it is open (where the OS allows), so
 * nothing outlives the response, not even a crash.
 */
import { randomUUID } from 'node:crypto';
import { open, unlink, type FileHandle } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { BodyOmitted } from './store.js';

/** What of a held body the engine stores: the bytes, or why not. */
export interface KeptBody {
  bytes: Uint8Array | null;
  omitted: BodyOmitted | null;
}

/** A response body an adapter sends itself after COMMIT; the engine stores what `seal` keeps. */
export interface DeclaredBody {
  /** Called once the handler's work is done, before COMMIT; a rejection rolls back. */
  seal(): Promise<KeptBody>;
}

const declared = new WeakMap<Response, DeclaredBody>();

/** A bodyless Response (status and headers) whose body `body` holds. */
export function declaredResponse(body: DeclaredBody, init: ResponseInit): Response {
  const response = new Response(null, init);
  declared.set(response, body);
  return response;
}

/** The held body of a Response made by {@link declaredResponse}. */
export function declaredBody(response: Response): DeclaredBody | undefined {
  return declared.get(response);
}

type Callback = (error?: Error | null) => void;

/** What a handler writes to `res`, held: in memory up to `limit` bytes, then in a file. */
export class HeldBody implements DeclaredBody {
  private chunks: Buffer[] = [];
  private size = 0;
  private file: SpillFile | undefined;
  private failure: Error | undefined;
  private streamed = false;
  private closed = false;

  /** `drained`: the file caught up after a write() that returned false. */
  constructor(
    private readonly limit: number,
    private readonly drained: () => void,
  ) {}

  /** `res.flushHeaders()`: a stream, never stored (a replay says `stream`). */
  markStreamed(): void {
    this.streamed = true;
  }

  /** Holds `chunk`; false: wait for the drain before writing more. */
  write(chunk: Buffer, callback?: Callback): boolean {
    // Dropped: nobody will send it, or the file failed (seal() fails the request).
    if (this.closed || this.failure !== undefined) {
      if (callback !== undefined) process.nextTick(callback);
      return true;
    }
    this.size += chunk.byteLength;
    if (this.file === undefined && this.size <= this.limit) {
      // A copy: the writer may reuse its buffer once called back, and this one is kept.
      this.chunks.push(Buffer.from(chunk));
      if (callback !== undefined) process.nextTick(callback);
      return true;
    }
    this.file ??= this.spill();
    return this.file.write(chunk, callback);
  }

  async seal(): Promise<KeptBody> {
    if (this.file !== undefined) {
      await this.file.flushed();
      if (this.failure !== undefined) throw this.failure;
    }
    if (this.streamed) return { bytes: null, omitted: 'stream' };
    if (this.file !== undefined) return { bytes: null, omitted: 'too-large' };
    return { bytes: this.bytes(), omitted: null };
  }

  /**
   * After COMMIT: the held bytes to `res` (its head with the first), with the socket's
   * backpressure. A failure part way destroys `res`: the client sees a cut response,
   * never a clean end.
   *
   * The head on `res` now is the one stored: it is fixed before anything is awaited.
   * Bytes in memory go in one synchronous `end` (which also sets their length); a file
   * is read an I/O later, so its head is written first (Node keeps it for the first
   * chunk), and a late `res.status()` from a handler that calls on changes nothing.
   */
  async sendTo(res: ServerResponse): Promise<void> {
    try {
      if (this.file === undefined) res.end(this.bytes());
      else {
        if (!res.headersSent) res.writeHead(res.statusCode);
        // A rolled-back answer was not sealed: its last writes may still be on their way.
        await this.file.flushed();
        await pipeline(this.file.reader(), res);
      }
    } catch {
      // A read error, or the client went away: cut the response (pipeline may have already).
      res.destroy();
    } finally {
      this.discard();
    }
  }

  /** Drops whatever is held (rolled back, replaced by another answer, sent). */
  discard(): void {
    this.closed = true;
    this.chunks = [];
    this.file?.destroy();
  }

  private bytes(): Buffer {
    if (this.chunks.length !== 1) this.chunks = [Buffer.concat(this.chunks, this.size)];
    return this.chunks[0] ?? Buffer.alloc(0);
  }

  private spill(): SpillFile {
    const file = new SpillFile();
    file.on('drain', this.drained);
    file.on('error', (error: Error) => {
      this.failure ??= error;
      // A writer waiting for the drain goes on; seal() then fails the request.
      this.drained();
    });
    for (const chunk of this.chunks.splice(0)) file.write(chunk);
    return file;
  }
}

/** A temporary file, written sequentially, then read from its start. */
class SpillFile extends Writable {
  private handle: FileHandle | undefined;
  private unlinkOnClose: string | undefined;
  private ended: Promise<void> | undefined;

  constructor() {
    // Closed by destroy(), not at finish: it is read after.
    super({ highWaterMark: 64 * 1024, autoDestroy: false });
  }

  override _construct(callback: Callback): void {
    const name = path.join(os.tmpdir(), `effectively-once-${randomUUID()}.body`);
    open(name, 'wx+').then(async (handle) => {
      this.handle = handle;
      // Gone from the directory at once; the open handle keeps the bytes (not on Windows).
      await unlink(name).catch(() => (this.unlinkOnClose = name));
      callback();
    }, callback);
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: Callback): void {
    void writeAll(this.opened(), chunk).then(() => callback(), callback);
  }

  override _destroy(error: Error | null, callback: Callback): void {
    const handle = this.handle;
    const name = this.unlinkOnClose;
    this.handle = undefined;
    void (async () => {
      await handle?.close().catch(() => undefined);
      if (name !== undefined) await unlink(name).catch(() => undefined);
    })().then(() => callback(error));
  }

  /** Resolves once every write is in the file. */
  flushed(): Promise<void> {
    this.ended ??= new Promise((resolve, reject) =>
      this.end((error?: Error | null) => (error ? reject(error) : resolve())),
    );
    return this.ended;
  }

  /** The file from its start (positional reads: the handle stays open for destroy()). */
  reader(): NodeJS.ReadableStream {
    return this.opened().createReadStream({ start: 0, autoClose: false });
  }

  private opened(): FileHandle {
    if (this.handle === undefined) throw new Error('the spill file is not open');
    return this.handle;
  }
}

async function writeAll(handle: FileHandle, chunk: Buffer): Promise<void> {
  for (let offset = 0; offset < chunk.byteLength;) {
    const { bytesWritten } = await handle.write(chunk, offset, chunk.byteLength - offset);
    offset += bytesWritten;
  }
}
