/**
 * `npx tsx bench/http/export-rss.ts [--framework express|express-flushed|fastify|web] [--mib 400]
 * [--bound-kib 1024] [--chunk-kib 64]`
 *
 * Peak memory of an idempotent endpoint answering one large export: the server (a
 * child process, so the client's memory is not counted) writes `--mib` MiB through
 * the framework's own streaming idiom (Express: `res.write` chunks honouring
 * backpressure, then `res.end()`; Fastify: a Node stream payload; web core: a
 * ReadableStream body), with `maxBodyBytes` at `--bound-kib`. The client reads the
 * body, checks its length and asks the server for its peak RSS (getrusage's maxrss)
 * before and after the request. A memory bound, not a rate: nothing is timed.
 *
 * Prints one line: `framework=… body_mib=… bound_kib=… complete=… baseline_rss_mib=…
 * peak_rss_mib=… replay_omitted=…`. Starts Postgres natively unless DATABASE_URL is set.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import express from 'express';
import Fastify from 'fastify';
import pg from 'pg';
import { intOption } from '../../kit/args.js';
import { ensureServices } from '../services.js';
import { createIdempotency } from '../../src/http/index.js';
import { idempotentExpress } from '../../adapters/express/index.js';
import { idempotencyPlugin } from '../../adapters/fastify/index.js';
import { requestUrl, sendResponse, webRequest } from '../../src/http/node-bridge.js';

/** `express-flushed`: the Express handler calls `res.flushHeaders()` before writing. */
type Framework = 'express' | 'express-flushed' | 'fastify' | 'web';
const FRAMEWORKS: readonly string[] = ['express', 'express-flushed', 'fastify', 'web'];
const SCHEMA = 'eo_bench_export_rss';

interface Settings {
  framework: Framework;
  mib: number;
  boundKib: number;
  chunkKib: number;
}

function parse(argv: string[]): Settings & { serve: boolean } {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      framework: { type: 'string', default: 'express' },
      mib: { type: 'string' },
      'bound-kib': { type: 'string' },
      'chunk-kib': { type: 'string' },
      serve: { type: 'boolean', default: false },
    },
  });
  const framework = values.framework;
  if (!FRAMEWORKS.includes(framework))
    throw new Error(`--framework: one of ${FRAMEWORKS.join(', ')}, not ${framework}`);
  return {
    framework: framework as Framework,
    mib: intOption('mib', values.mib, 400, 1, 100_000),
    boundKib: intOption('bound-kib', values['bound-kib'], 1024, 1, 1_000_000),
    chunkKib: intOption('chunk-kib', values['chunk-kib'], 64, 1, 65_536),
    serve: values.serve,
  };
}

const peakRssMib = (): number => Math.round(process.resourceUsage().maxRSS / 1024);

/** The export's chunks, made as they are asked for (the source itself holds one). */
function* chunks(settings: Settings): Generator<Buffer> {
  const chunk = Buffer.alloc(settings.chunkKib * 1024, 'x');
  const total = settings.mib * 1024 * 1024;
  for (let sent = 0; sent < total; sent += chunk.length)
    yield total - sent >= chunk.length ? chunk : chunk.subarray(0, total - sent);
}

/** The child: the endpoint, on the chosen framework; prints its port. */
async function serve(settings: Settings, databaseUrl: string): Promise<void> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 4 });
  const idempotency = createIdempotency({
    pool,
    scope: 'bench',
    schema: SCHEMA,
    maxBodyBytes: settings.boundKib * 1024,
    handlerTimeoutMs: 0,
    retention: false,
  });
  const effect = (tx: pg.PoolClient) =>
    tx.query(`INSERT INTO ${SCHEMA}.exports (at) VALUES (now())`);
  let port: number;
  if (settings.framework === 'express' || settings.framework === 'express-flushed') {
    const flush = settings.framework === 'express-flushed';
    const app = express();
    app.post(
      '/export',
      idempotentExpress(idempotency, async (_req, res, { tx }) => {
        await effect(tx);
        res.status(200).type('text/plain');
        if (flush) res.flushHeaders();
        for (const chunk of chunks(settings)) if (!res.write(chunk)) await once(res, 'drain');
        res.end();
      }),
    );
    const server = http.createServer(app);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as { port: number }).port;
  } else if (settings.framework === 'fastify') {
    const app = Fastify();
    await app.register(idempotencyPlugin, { idempotency });
    app.post('/export', async (request, reply) => {
      const ctx = request.idempotency;
      if (ctx === null) throw new Error('not idempotent');
      await effect(ctx.tx);
      return reply.type('text/plain').send(Readable.from(chunks(settings)));
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = (app.server.address() as { port: number }).port;
  } else {
    const endpoint = idempotency.handler(async (_request, { tx }) => {
      await effect(tx);
      const source = chunks(settings);
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          const next = source.next();
          if (next.done === true) controller.close();
          else controller.enqueue(next.value);
        },
      });
      return new Response(body, { headers: { 'content-type': 'text/plain' } });
    });
    // Plain node:http in front of the fetch-style endpoint, through the adapters' bridge.
    const server = http.createServer((req, res) => {
      const url = requestUrl('http', req.headers.host, req.url ?? '/');
      void endpoint(webRequest(url, req.method ?? 'GET', req.headers, req)).then((response) =>
        sendResponse(response, res),
      );
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as { port: number }).port;
  }
  // The peak so far, asked for over stdin: one line in, one line out.
  createInterface({ input: process.stdin }).on('line', () =>
    process.stdout.write(`${peakRssMib()}\n`),
  );
  process.stdout.write(`${port}\n`);
}

async function main(): Promise<void> {
  const settings = parse(process.argv.slice(2));
  if (settings.serve) {
    const url = process.env['BENCH_DATABASE_URL'];
    if (url === undefined) throw new Error('BENCH_DATABASE_URL is not set');
    await serve(settings, url);
    return;
  }
  const services = await ensureServices(null);
  const url = services.endpoints.databaseUrl;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await admin.query(`CREATE SCHEMA ${SCHEMA}`);
  await admin.query(`CREATE TABLE ${SCHEMA}.exports (at timestamptz NOT NULL)`);
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      fileURLToPath(import.meta.url),
      '--serve',
      `--framework=${settings.framework}`,
      `--mib=${settings.mib}`,
      `--bound-kib=${settings.boundKib}`,
      `--chunk-kib=${settings.chunkKib}`,
    ],
    { env: { ...process.env, BENCH_DATABASE_URL: url }, stdio: ['pipe', 'pipe', 'inherit'] },
  );
  try {
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const next = async (): Promise<number> => {
      const line = await lines.next();
      if (line.done === true) throw new Error('the server exited');
      return Number(line.value);
    };
    const port = await next();
    const peak = async (): Promise<number> => {
      child.stdin.write('\n');
      return next();
    };
    const baseline = await peak();
    const key = `export-${process.pid}-${Date.now()}`;
    const send = () =>
      fetch(`http://127.0.0.1:${port}/export`, {
        method: 'POST',
        headers: { 'idempotency-key': key, 'content-type': 'text/plain' },
        body: 'export',
      });
    const first = await send();
    let received = 0;
    for await (const chunk of first.body ?? []) received += (chunk as Uint8Array).byteLength;
    const after = await peak();
    const replay = await send();
    await replay.arrayBuffer();
    const complete = first.status === 200 && received === settings.mib * 1024 * 1024;
    console.log(
      `framework=${settings.framework} body_mib=${settings.mib} bound_kib=${settings.boundKib} ` +
        `status=${first.status} complete=${complete} baseline_rss_mib=${baseline} ` +
        `peak_rss_mib=${after} replay_omitted=${replay.headers.get('idempotent-body-omitted') ?? 'none'}`,
    );
  } finally {
    child.kill('SIGTERM');
    await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).catch(() => undefined);
    await admin.end();
    await services.stop();
  }
}

await main();
