/**
 * The Request for an idempotent endpoint behind Hono middleware that read the body
 * first. Hono reads `c.req.raw`'s body once and caches what its first reader made of
 * it on `c.req.bodyCache`, under that reader's name: the bytes (`arrayBuffer`, also for
 * `bytes()`, `parseBody()` and `validator('form')`), a Blob (`blob`), the text (`text`,
 * also for `json()` and `validator('json')`), or a FormData (`formData`, when
 * `c.req.formData()` read first). Other readers are derived from that one.
 *
 * Bytes, a Blob and text give the body back as it was sent (text re-encoded as UTF-8,
 * as Hono decoded it): the same bytes on every retry, so the fingerprint holds. A
 * FormData does not: serialized again it is a multipart body with a fresh random
 * boundary each time (what Hono's own `cloneRawRequest` sends), so a first request
 * would run and commit and each retry would be refused 422 as another body. That case
 * gets the consumed `c.req.raw`, which the endpoint refuses at the first request
 * (500 `body-consumed`, nothing claimed), naming the cause.
 */

/**
 * What {@link honoRequest} reads of Hono's `c.req` (a `HonoRequest`): its `raw`
 * Request and its `bodyCache`, where Hono keeps what its first body reader read.
 */
export interface HonoRequestLike {
  /** The Request Hono was given (`c.req.raw`). */
  readonly raw: Request;
  /** Hono's cache of the body read off `raw`: per reader's name, its result (a promise). */
  readonly bodyCache: object;
}

/**
 * The Request to hand an idempotent endpoint on Hono, whatever middleware before it
 * read (`validator('json')`, `zValidator`, `c.req.json()`, `c.req.parseBody()` …):
 * `c.req.raw` while its body is unread, else a Request rebuilt from the bytes or the
 * text Hono cached, with the same method, URL and headers. A body Hono holds only as a
 * FormData (`c.req.formData()` read it first) cannot be rebuilt as it was sent: then
 * the consumed `c.req.raw` is returned, and the endpoint refuses it at the first
 * request (500 `body-consumed`, `RequestBodyConsumedError`), before anything is
 * claimed; read the form with `c.req.parseBody()` (or `validator('form')`) instead.
 *
 * ```ts
 * app.post('/charges', validator('json', check), async (c) => charges(await honoRequest(c.req)));
 * ```
 */
export async function honoRequest(req: HonoRequestLike): Promise<Request> {
  const raw = req.raw;
  if (!raw.bodyUsed) return raw;
  const bytes = await cachedBytes(req.bodyCache as Record<string, unknown>);
  if (bytes === undefined) return raw;
  const headers = new Headers(raw.headers);
  // Text re-encoded may differ in length from what was sent (a BOM, invalid UTF-8).
  if (headers.has('content-length')) headers.set('content-length', String(bytes.byteLength));
  return new Request(raw.url, { method: raw.method, headers, body: bytes, signal: raw.signal });
}

/** The body as read off the Request, from Hono's cache; undefined for a FormData only. */
async function cachedBytes(cache: Record<string, unknown>): Promise<Uint8Array | undefined> {
  // Hono stores only what was read off `raw` under these names (a reader that came
  // later derives its result without storing it; the form parsers store a FormData
  // next to the bytes they read, never instead).
  if (cache['arrayBuffer'] !== undefined)
    return new Uint8Array(await (cache['arrayBuffer'] as Promise<ArrayBuffer>));
  if (cache['blob'] !== undefined)
    return new Uint8Array(await (await (cache['blob'] as Promise<Blob>)).arrayBuffer());
  if (cache['text'] !== undefined)
    return new TextEncoder().encode(await (cache['text'] as Promise<string>));
  return undefined;
}
