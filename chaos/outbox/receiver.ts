/**
 * Service B for the HTTP publisher: a plain HTTP server that applies each request once
 * per `Idempotency-Key` (the outbox id), and misbehaves the way real ones do: some
 * requests get a 503 before anything happens, some a 503 or a dropped connection after
 * the effect committed (so the relay sends again and the key must absorb it).
 */
import http from 'node:http';
import type pg from 'pg';
import { outboxTables, type Downstream, type OutboxNodeConfig } from './shared.js';

const EARLY_503 = 0.05;
const LATE_503 = 0.05;
const LATE_DROP = 0.05;

/** Listens on this B slot's port until the returned stop() is called. */
export async function startReceiver(
  cfg: OutboxNodeConfig,
  pool: pg.Pool,
): Promise<() => Promise<void>> {
  if (cfg.output.kind !== 'http') throw new Error('the receiver serves the HTTP output');
  const port = cfg.output.ports[cfg.index % cfg.output.ports.length]!;
  const t = outboxTables(cfg.schema);
  const dedup = cfg.control !== 'no-dedup';

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const key = String(req.headers['idempotency-key'] ?? '');
    if (key === '') return void res.writeHead(400).end('no Idempotency-Key');
    await pool.query(`INSERT INTO ${t.bRequests} (key) VALUES ($1)`, [key]);
    if (Math.random() < EARLY_503) return void res.writeHead(503).end('busy');
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Downstream;
    // One statement: the key and the effect commit together; a second request of the
    // key waits for the first's key row, then finds it and applies nothing.
    await pool.query(
      dedup
        ? `WITH fresh AS (INSERT INTO ${t.bSeen} (key) VALUES ($3) ON CONFLICT DO NOTHING RETURNING 1)
           INSERT INTO ${t.bApplied} (op, account, outbox_id, pid) SELECT $1::text, $2::text, $3::text, $4::int FROM fresh`
        : `INSERT INTO ${t.bApplied} (op, account, outbox_id, pid) VALUES ($1, $2, $3, $4)`,
      [body.op, body.account, key, process.pid],
    );
    const roll = Math.random();
    if (roll < LATE_DROP) return void res.destroy();
    if (roll < LATE_DROP + LATE_503) return void res.writeHead(503).end('applied, but say 503');
    res.writeHead(200).end('ok');
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500).end('error');
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
}
