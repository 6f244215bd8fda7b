import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createIdempotency, type IdempotencyContext } from 'effectively-once/http';
import { FRAMEWORKS } from '../../../kit/payments/payments.js';
import { appFixture, startApp } from './apps.js';
import { post } from './support.js';

const fixture = appFixture(
  'http_problems',
  `CREATE TABLE people (id serial PRIMARY KEY, key text NOT NULL);
   CREATE TABLE accounts (id int PRIMARY KEY);
   CREATE TABLE transfers (
     key text NOT NULL,
     account int,
     CONSTRAINT transfers_account_secret_fk FOREIGN KEY (account) REFERENCES accounts (id)
       DEFERRABLE INITIALLY DEFERRED
   )`,
);

const SSN = '123-45-6789';

/** The faults: each leaves text with a value, a constraint or a handler's message behind. */
const faults: Record<string, (ctx: IdempotencyContext) => Promise<void>> = {
  async swallowed(ctx) {
    await ctx.tx.query('INSERT INTO people (key) VALUES ($1)', [ctx.key]);
    // The handler catches the failure and goes on: COMMIT then rolls back.
    await ctx.tx.query('SELECT $1::int', [SSN]).catch(() => undefined);
  },
  async deferred(ctx) {
    await ctx.tx.query('INSERT INTO transfers (key, account) VALUES ($1, 424242)', [ctx.key]);
  },
  async terminated(ctx) {
    const { rows } = await ctx.tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    await fixture.db().pool.query('SELECT pg_terminate_backend($1)', [rows[0]?.pid]);
    await ctx.tx.query('INSERT INTO people (key) VALUES ($1)', [`${SSN} ${ctx.key}`]);
  },
  async 'read-only'(ctx) {
    // What a node that became a standby answers to a write: SQLSTATE 25006.
    await ctx.tx.query('SET transaction_read_only = on');
    await ctx.tx.query('INSERT INTO people (key) VALUES ($1)', [ctx.key]);
  },
  async 'read-only, swallowed'(ctx) {
    await ctx.tx.query('SET transaction_read_only = on');
    await ctx.tx.query('INSERT INTO people (key) VALUES ($1)', [ctx.key]).catch(() => undefined);
  },
};

interface Logged {
  level: string;
  err: unknown;
}

async function start(framework: (typeof FRAMEWORKS)[number], pool?: pg.Pool) {
  const db = fixture.db();
  const logged: Logged[] = [];
  const log =
    (level: string) =>
    (obj: object): void => {
      logged.push({ level, err: (obj as { err?: unknown }).err });
    };
  const idempotency = createIdempotency({
    pool: pool ?? db.pool,
    scope: 'public',
    schema: db.schema,
    retryAfterSeconds: 7,
    acquireTimeoutMs: 2000,
    logger: { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') },
  });
  fixture.track(idempotency);
  const app = await startApp({
    framework,
    idempotency,
    run: async (ctx, headers) => {
      const fault = headers.get('x-fault');
      if (fault !== null) await faults[fault]?.(ctx);
      else await ctx.tx.query('INSERT INTO people (key) VALUES ($1)', [ctx.key]);
      return { status: 201, body: { key: ctx.key } };
    },
  });
  fixture.track(app);
  return { app, logged };
}

/** Everything an error's text was made of, through its causes. */
function textOf(error: unknown): string {
  let text = '';
  for (let e = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++)
    text += ` ${e.message}`;
  return text;
}

async function people(key: string): Promise<number> {
  const { rows } = await fixture
    .db()
    .pool.query<{ n: number }>('SELECT count(*)::int AS n FROM people WHERE key = $1', [key]);
  return rows[0]?.n ?? -1;
}

describe.each(FRAMEWORKS)('%s: problem answers', (framework) => {
  it.each([
    ['swallowed', 500, 'rolled-back', SSN],
    ['deferred', 500, 'rolled-back', 'transfers_account_secret_fk'],
  ])(
    'a %s failure: %d, a fixed detail, the real error only in the log',
    async (fault, status, slug, secret) => {
      const { app, logged } = await start(framework);
      const key = randomUUID();
      const answer = await post(`${app.url}/run`, key, {}, { 'x-fault': fault });
      expect(answer.status).toBe(status);
      const problem = JSON.parse(answer.body) as { type: string; detail: string };
      expect(problem.type).toBe(`urn:effectively-once:problem:${slug}`);
      expect(answer.body).not.toContain(secret);
      expect(answer.body).not.toMatch(/violates|invalid input|constraint|syntax/i);
      expect(logged.some((l) => textOf(l.err).includes(secret))).toBe(true);
      expect(await people(key)).toBe(0);
    },
  );

  it.each(['terminated', 'read-only', 'read-only, swallowed'])(
    'infrastructure (%s): 503 + Retry-After, nothing stored, the retry runs',
    async (fault) => {
      const { app, logged } = await start(framework);
      const key = randomUUID();
      const answer = await post(`${app.url}/run`, key, {}, { 'x-fault': fault });
      expect(answer.status).toBe(503);
      expect(answer.headers['retry-after']).toBe('7');
      expect(answer.headers['content-type']).toBe('application/problem+json');
      expect(answer.body).not.toContain(SSN);
      expect(answer.body).not.toMatch(/read-only|terminat|administrator/i);
      expect(logged.length).toBeGreaterThan(0);
      // Nothing stored: the retry runs the handler and applies it once.
      const retry = await post(`${app.url}/run`, key, {});
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBeUndefined();
      expect(await people(key)).toBe(1);
    },
  );

  it('the database unreachable: 503 + Retry-After, no address in the answer', async () => {
    const dead = new pg.Pool({ host: '127.0.0.1', port: 1, connectionTimeoutMillis: 500 });
    dead.on('error', () => undefined);
    try {
      const { app, logged } = await start(framework, dead);
      const answer = await post(`${app.url}/run`, randomUUID(), {});
      expect(answer.status).toBe(503);
      expect(answer.headers['retry-after']).toBe('7');
      expect(answer.body).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|:1\b/);
      expect(logged.some((l) => /ECONNREFUSED/.test(textOf(l.err)))).toBe(true);
    } finally {
      await dead.end();
    }
  });
});
