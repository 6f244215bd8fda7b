/**
 * Issue 20's "Operating it": `stats`, `prune` and `inspect` on the HTTP key table
 * (`--family http-keys`), through the built bin, against rows that real requests
 * stored through `createIdempotency` on the test Postgres.
 */
import { beforeAll, describe, expect, it } from '@jest/globals';
import {
  createIdempotency,
  fingerprint,
  pruneIdempotencyKeys,
  type Idempotency,
} from '../../../src/http/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import { cliFixture, jsonOf, runOnSchema, runCli } from './built-cli.js';

const endpoints: Idempotency[] = [];
const fixture = cliFixture('cli_http', async () => {
  for (const e of endpoints) await e.close();
});
let db: TestDatabase;
let main: string;
beforeAll(() => {
  ({ db, main } = fixture());
});

/** Runs the bin on the test schema's key table `table`. */
const eo = runOnSchema(fixture, '--http-keys-table');

const json = jsonOf;

/** An endpoint on key table `table` whose tenant is the X-Tenant header. */
function endpoint(table: string, extra: { maxBodyBytes?: number } = {}): Idempotency {
  const idempotency = createIdempotency({
    pool: db.pool,
    schema: db.schema,
    table,
    retention: false,
    scope: (request) => request.headers.get('x-tenant') ?? 'public',
    ...extra,
  });
  endpoints.push(idempotency);
  return idempotency;
}

const charge = (tenant: string, key: string, body: string, path = '/charges'): Request =>
  new Request(`http://api.test${path}`, {
    method: 'POST',
    headers: { 'idempotency-key': key, 'x-tenant': tenant, 'content-type': 'application/json' },
    body,
  });

/** Stores one answer per [tenant, key], then ages each row by its interval. */
async function seed(table: string, rows: Array<[tenant: string, key: string, age: string]>) {
  const handle = endpoint(table).handler((request, { scope, key }) =>
    Response.json({ scope, key }, { status: 201, headers: { location: `/charges/${key}` } }),
  );
  for (const [tenant, key] of rows)
    expect((await handle(charge(tenant, key, '{}'))).status).toBe(201);
  for (const [tenant, key, age] of rows)
    await db.pool.query(
      `UPDATE ${db.table(table)} SET created_at = now() - $3::interval WHERE scope = $1 AND idempotency_key = $2`,
      [tenant, key, age],
    );
}

const keysOf = async (table: string): Promise<string[]> => {
  const { rows } = await db.pool.query<{ k: string }>(
    `SELECT scope || '/' || idempotency_key AS k FROM ${db.table(table)} ORDER BY 1`,
  );
  return rows.map((r) => r.k);
};

const HISTORY: Array<[string, string, string]> = [
  ['acme', 'a1', '3 days'],
  ['acme', 'a2', '30 hours'],
  ['acme', 'a3', '40 minutes'],
  ['bravo', 'b1', '2 days'],
  ['bravo', 'b2', '5 minutes'],
  ['cobalt', 'c1', '10 minutes'],
];

describe('stats --family http-keys', () => {
  const table = 'keys_stats';
  beforeAll(() => seed(table, HISTORY));

  it('per scope: exact rows, oldest and newest created_at, what a window would prune; sizes', async () => {
    const doc = json(
      await eo(['stats', '--family', 'http-keys', '--window', '1d', '--json'], table),
    );
    const ages = await db.pool.query<{ scope: string; oldest: Date; newest: Date }>(
      `SELECT scope, min(created_at) AS oldest, max(created_at) AS newest FROM ${db.table(table)} GROUP BY scope ORDER BY scope`,
    );
    const iso = (i: number, end: 'oldest' | 'newest') => ages.rows[i]?.[end].toISOString();
    expect(doc).toMatchObject({
      family: 'http-keys',
      schema: db.schema,
      table,
      scope: null,
      window: { olderThan: '1d', olderThanMs: 86_400_000 },
      oldest: iso(0, 'oldest'),
      total: { rows: 6, olderThanWindow: 3 },
      scopes: [
        {
          scope: 'acme',
          rows: 3,
          oldest: iso(0, 'oldest'),
          newest: iso(0, 'newest'),
          olderThanWindow: 2,
        },
        {
          scope: 'bravo',
          rows: 2,
          oldest: iso(1, 'oldest'),
          newest: iso(1, 'newest'),
          olderThanWindow: 1,
        },
        { scope: 'cobalt', rows: 1, olderThanWindow: 0 },
      ],
      truncated: false,
    });
    const sizes = doc.sizes as { indexes: Array<{ name: string }>; tableBytes: number };
    expect(sizes.indexes.map((i) => i.name)).toEqual([
      'keys_stats_created_at_idx',
      'keys_stats_expires_at_idx',
      'keys_stats_pkey',
    ]);
    expect(sizes.tableBytes).toBeGreaterThan(0);

    const text = await eo(['stats', '--family', 'http-keys', '--window', '1d'], table);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`Table "${db.schema}"."keys_stats"`);
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^older than 1d: +3 \(created before \S+Z: what `prune --family http-keys --older-than 1d` deletes\)$/,
      ),
    );
    expect(lines.slice(-4)).toEqual([
      expect.stringMatching(/^scope +rows +oldest +newest +older than 1d$/),
      expect.stringMatching(/^acme +3 +\S+Z +\S+Z +2$/),
      expect.stringMatching(/^bravo +2 +\S+Z +\S+Z +1$/),
      expect.stringMatching(/^cobalt +1 +\S+Z +\S+Z +0$/),
    ]);
  });

  it('--scope narrows to one tenant; --limit lists fewer scopes, the totals still cover all', async () => {
    const one = json(
      await eo(['stats', '--family', 'http-keys', '--scope', 'bravo', '--json'], table),
    );
    expect(one).toMatchObject({ scope: 'bravo', total: { rows: 2 }, scopes: [{ scope: 'bravo' }] });
    expect(one.scopes).toHaveLength(1);

    const limited = await eo(['stats', '--family', 'http-keys', '--limit', '2'], table);
    expect(limited.stdout).toMatch(/^rows: +6$/m);
    expect(limited.stdout).toMatch(/^bravo +2 /m);
    expect(limited.stdout).not.toMatch(/^cobalt/m);
    expect(limited.stdout.trimEnd()).toMatch(
      /\n\(the first 2 scopes by name; --limit lists more\)$/,
    );
  });

  it('--estimate: scopes from the primary key, rows from the planner', async () => {
    await db.pool.query(`ANALYZE ${db.table(table)}`);
    for (const limit of [[], ['--limit', '2']]) {
      const doc = json(
        await eo(['stats', '--family', 'http-keys', '--estimate', '--json', ...limit], table),
      );
      const scopes = doc.scopes as Array<{ scope: string; rows: number; oldest: null }>;
      const expected = [
        ['acme', 3, null],
        ['bravo', 2, null],
        ['cobalt', 1, null],
      ];
      expect(scopes.map((s) => [s.scope, s.rows, s.oldest])).toEqual(
        expected.slice(0, limit.length === 0 ? 3 : 2),
      );
      expect(doc).toMatchObject({
        estimate: true,
        total: { rows: 6 },
        truncated: limit.length > 0,
      });
    }
    const one = json(
      await eo(
        ['stats', '--family', 'http-keys', '--estimate', '--scope', 'cobalt', '--json'],
        table,
      ),
    );
    expect(one).toMatchObject({ total: { rows: 1 }, scopes: [{ scope: 'cobalt', rows: 1 }] });
  });
});

describe('prune --family http-keys', () => {
  it('deletes what Idempotency.prune deletes: by created_at on the database clock, per scope or all', async () => {
    // Two copies of one history: the CLI prunes one, the library's function the other.
    await seed('keys_cli', HISTORY);
    await seed('keys_lib', HISTORY);
    const dry = json(
      await eo(
        [
          'prune',
          '--family',
          'http-keys',
          '--older-than',
          '1d',
          '--scope',
          'acme',
          '--dry-run',
          '--json',
        ],
        'keys_cli',
      ),
    );
    expect(dry).toMatchObject({ family: 'http-keys', scope: 'acme', dryRun: true, wouldDelete: 2 });
    expect(await keysOf('keys_cli')).toHaveLength(6);

    const one = await eo(
      ['prune', '--family', 'http-keys', '--older-than', '1d', '--scope', 'acme'],
      'keys_cli',
    );
    expect(one).toMatchObject({ code: 0, stderr: '' });
    expect(one.stdout).toMatch(
      new RegExp(
        `^Deleted 2 rows of scope "acme" in "${db.schema}"\\."keys_cli" created before \\S+Z \\(older than 1d by the database's clock\\) whose own expiry passed \\(or that have none\\)\\.\\n$`,
      ),
    );
    await pruneIdempotencyKeys(db.pool, {
      schema: db.schema,
      table: 'keys_lib',
      olderThan: 86_400_000,
      scope: 'acme',
    });
    expect(await keysOf('keys_cli')).toEqual(await keysOf('keys_lib'));

    const all = json(
      await eo(
        ['prune', '--family', 'http-keys', '--older-than', '1h', '--batch-size', '1', '--json'],
        'keys_cli',
      ),
    );
    expect(all).toMatchObject({ scope: null, dryRun: false, deleted: 1, interrupted: false });
    await pruneIdempotencyKeys(db.pool, {
      schema: db.schema,
      table: 'keys_lib',
      olderThan: 3_600_000,
    });
    expect(await keysOf('keys_cli')).toEqual(await keysOf('keys_lib'));
    expect(await keysOf('keys_cli')).toEqual(['acme/a3', 'bravo/b2', 'cobalt/c1']);
  });
});

describe("prune --family http-keys and each key's own expiry", () => {
  it('never deletes a key before its own expiry, whatever the window; without one, the expired keys', async () => {
    const table = 'keys_expiry';
    await seed(table, [
      ['acme', 'kept', '3 days'],
      ['acme', 'expired', '3 days'],
      ['acme', 'forever', '3 days'],
      ['acme', 'legacy', '3 days'],
    ]);
    // As configurations with a week's, an hour's and no retention would have claimed them,
    // and the version before expires_at (lifetime unknown: only a window deletes it).
    await db.pool.query(
      `UPDATE ${db.table(table)} SET expires_at = CASE idempotency_key
         WHEN 'kept' THEN now() + interval '4 days' WHEN 'expired' THEN now() - interval '1 minute'
         WHEN 'legacy' THEN NULL
         ELSE expires_at END`, // 'forever': infinity, as retention: false writes it
    );
    const byExpiry = json(
      await eo(['prune', '--family', 'http-keys', '--expired', '--json'], table),
    );
    expect(byExpiry).toMatchObject({ olderThan: null, cutoff: null, deleted: 1 });
    expect(await keysOf(table)).toEqual(['acme/forever', 'acme/kept', 'acme/legacy']);
    const dry = json(
      await eo(
        ['prune', '--family', 'http-keys', '--older-than', '1d', '--dry-run', '--json'],
        table,
      ),
    );
    expect(dry).toMatchObject({ wouldDelete: 2 });
    // stats --window counts what prune --older-than deletes: not the key still kept.
    const stats = json(
      await eo(['stats', '--family', 'http-keys', '--window', '1d', '--json'], table),
    );
    expect(stats.total).toMatchObject({ rows: 3, olderThanWindow: 2 });
    await eo(['prune', '--family', 'http-keys', '--older-than', '1d'], table);
    expect(await keysOf(table)).toEqual(['acme/kept']);
  });
});

describe('inspect --family http-keys', () => {
  const table = 'keys_inspect';
  const args = (key: string, scope: string, ...more: string[]) =>
    eo(['inspect', key, '--family', 'http-keys', '--scope', scope, ...more], table);

  it("what was answered to key K of tenant T, and when; the body only with --body; never another tenant's", async () => {
    const handle = endpoint(table).handler((request, { scope }) =>
      Response.json(
        { charged: scope },
        { status: 201, headers: { location: '/charges/1', 'x-trace': 'not stored' } },
      ),
    );
    const body = '{"amountCents":1999}';
    const first = await handle(charge('acme', 'k-1', body));
    const sent = await first.text();
    expect(first.status).toBe(201);
    expect((await handle(charge('bravo', 'k-1', '{}'))).status).toBe(201);

    const doc = json(await args('k-1', 'acme', '--json'));
    const expectedFingerprint = fingerprint({
      method: 'POST',
      route: '/charges',
      search: '',
      body: Buffer.from(body),
      contentType: 'application/json',
    }).toString('hex');
    expect(doc).toEqual({
      family: 'http-keys',
      key: 'k-1',
      scope: 'acme',
      schema: db.schema,
      table,
      claimed: true,
      record: {
        createdAt: expect.stringMatching(/Z$/),
        method: 'POST',
        route: '/charges',
        fingerprint: expectedFingerprint,
        status: 201,
        headers: { 'content-type': 'application/json', location: '/charges/1' },
        bodyBytes: Buffer.byteLength(sent),
        bodyOmitted: null,
      },
      inFlight: null,
    });

    const text = await args('k-1', 'acme');
    expect(text).toMatchObject({ code: 0, stderr: '' });
    expect(text.stdout.trimEnd().split('\n')).toEqual([
      `Key "k-1" of scope "acme" in "${db.schema}"."${table}":`,
      expect.stringMatching(/^created_at: +\S+Z$/),
      expect.stringMatching(/^method: +POST$/),
      expect.stringMatching(/^route: +\/charges$/),
      expect.stringMatching(new RegExp(`^fingerprint: +${expectedFingerprint} \\(sha256`)),
      expect.stringMatching(/^status: +201$/),
      expect.stringMatching(
        new RegExp(`^body: +${Buffer.byteLength(sent)} bytes \\(--body prints it\\)$`),
      ),
      '',
      'Stored headers:',
      '  content-type: application/json',
      '  location: /charges/1',
    ]);
    expect(text.stdout).not.toContain(sent);

    const withBody = await args('k-1', 'acme', '--body');
    expect(withBody.stdout.trimEnd().endsWith(`\n\nBody:\n${sent}`)).toBe(true);
    const bodyDoc = json(await args('k-1', 'acme', '--body', '--json'));
    expect(bodyDoc.record).toMatchObject({
      body: { base64: Buffer.from(sent).toString('base64'), text: sent },
    });

    // The header's value as the draft quotes it is the same key.
    expect(json(await args('"k-1"', 'acme', '--json'))).toMatchObject({
      key: 'k-1',
      claimed: true,
    });

    // The same key under the other tenant is the other tenant's answer.
    const bravo = json(await args('k-1', 'bravo', '--body', '--json'));
    expect(bravo.record).toMatchObject({ body: { text: '{"charged":"bravo"}' } });
    // A key only acme used, looked up for bravo: not found (exit 3), acme's row unread.
    expect((await handle(charge('acme', 'k-acme-only', '{}'))).status).toBe(201);
    const elsewhere = await args('k-acme-only', 'bravo');
    expect(elsewhere).toMatchObject({ code: 3, stderr: '' });
    expect(elsewhere.stdout).toContain(`Key "k-acme-only": no committed record in scope "bravo"`);
  });

  it('a body not stored (too large, streamed), a binary body, a row committed without its response', async () => {
    const small = endpoint(table, { maxBodyBytes: 8 }).handler((request, ctx) => {
      const path = new URL(request.url).pathname;
      if (path === '/big') return new Response('x'.repeat(100), { status: 200 });
      if (path === '/stream') return ctx.streamed(new Response('streamed', { status: 200 }));
      return new Response(new Uint8Array([0xff, 0x00, 0xfe]), {
        status: 200,
        headers: { 'content-type': 'application/octet-stream' },
      });
    });
    for (const path of ['/big', '/stream', '/bin'])
      expect((await small(charge('acme', `k${path}`, '{}', path))).status).toBe(200);
    const big = await args('k/big', 'acme');
    expect(big.stdout).toMatch(/^body: +none stored: larger than maxBodyBytes/m);
    expect(json(await args('k/stream', 'acme', '--json')).record).toMatchObject({
      bodyBytes: null,
      bodyOmitted: 'stream',
    });
    const bin = await args('k/bin', 'acme', '--body');
    expect(bin.stdout.trimEnd().endsWith('\n\nBody (not UTF-8 text; base64):\n/wD+')).toBe(true);

    await db.pool.query(
      `INSERT INTO ${db.table(table)} (scope, idempotency_key, method, route, fingerprint) VALUES ('acme', 'k-bare', 'POST', '/x', '\\x00')`,
    );
    const bare = await args('k-bare', 'acme');
    expect(bare.code).toBe(0);
    expect(bare.stdout).toMatch(
      /^status: +none stored: the transaction committed without its response/m,
    );
  });

  it('a request still running: invisible to a read; --probe waits on its claim and rolls back', async () => {
    let release = (): void => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const handle = endpoint(table).handler(async () => {
      await held;
      return new Response('done', { status: 201 });
    });
    const running = handle(charge('acme', 'k-running', '{}'));
    try {
      await waitFor(
        async () => {
          const { rows } = await db.pool.query(
            `SELECT 1 FROM pg_stat_activity WHERE state = 'idle in transaction' AND strpos(query, $1) > 0`,
            [`${table}_claim_v1`],
          );
          return rows.length > 0;
        },
        { what: "k-running's claim in flight" },
      );
      const unknown = await args('k-running', 'acme');
      expect(unknown.code).toBe(3);
      expect(unknown.stdout).toMatch(
        /^In flight: unknown: 1 other transaction\(s\) hold a write lock on the table.*; --probe checks this key$/m,
      );
      const probed = json(await args('k-running', 'acme', '--probe', '--json'));
      expect(probed).toMatchObject({ claimed: false, inFlight: { state: 'yes', how: 'probe' } });
      const free = json(await args('k-free', 'acme', '--probe', '--json'));
      expect(free).toMatchObject({ claimed: false, inFlight: { state: 'no', how: 'probe' } });
    } finally {
      release();
    }
    expect((await running).status).toBe(201);
    expect(json(await args('k-running', 'acme', '--json'))).toMatchObject({
      claimed: true,
      record: { status: 201 },
    });
    const { rows } = await db.pool.query(
      `SELECT 1 FROM ${db.table(table)} WHERE idempotency_key = 'k-free'`,
    );
    expect(rows).toHaveLength(0); // the probe rolled back
  });
});

describe('bad input exits 2 with one line; a missing table exits 1', () => {
  it.each([
    [['inspect', 'k-1', '--family', 'http-keys'], '"--scope": is required with --family http-keys'],
    [
      ['inspect', 'k-1', '--family', 'nope'],
      '"--family": "nope" is not one of consumer, http-keys',
    ],
    [
      ['stats', '--family', 'outbox'],
      'stats does not read the outbox table (see `effectively-once outbox`)',
    ],
    [['stats', '--scope', 'acme'], '"--scope": is for --family http-keys'],
    [
      ['prune', '--older-than', '1d', '--family', 'http-keys', '--consumer', 'a'],
      '"--consumer": is for --family consumer',
    ],
    [
      ['stats', '--family', 'http-keys', '--table', 'x'],
      '"--table": names the consumer table; use --http-keys-table',
    ],
    [
      ['stats', '--http-keys-table', 'x'],
      '"--http-keys-table": names the http-keys table; add --family http-keys',
    ],
    [['inspect', 'k-1', '--body'], '"--body": is for --family http-keys'],
    [['stats', '--family', 'http-keys', '--limit', '0'], '"--limit"'],
    [['inspect', 'k\u00e9', '--family', 'http-keys', '--scope', 'acme'], 'EO_INVALID_KEY'],
    [
      ['inspect', 'k-1', '--family', 'http-keys', '--scope', 's'.repeat(1025)],
      '"--scope": no request could have stored',
    ],
  ])('%j', async (argv, problem) => {
    const run = await runCli(main, [...argv, '--schema', db.schema]);
    expect(run).toMatchObject({ code: 2, stdout: '' });
    expect(run.stderr).toContain(problem);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('a key table that does not exist', async () => {
    const run = await eo(['stats', '--family', 'http-keys', '--json'], 'no_such_keys');
    expect(run).toMatchObject({ code: 1, stdout: '' });
    expect(JSON.parse(run.stderr)).toMatchObject({
      error: {
        code: 'EO_DATABASE',
        sqlstate: '42P01',
        message: expect.stringContaining('--http-keys-table'),
      },
    });
  });
});
