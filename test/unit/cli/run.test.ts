/**
 * The CLI's front end without a database: help, usage errors and their exit codes,
 * `migrate --print`. The commands against Postgres, through the built bin, are in
 * test/integration/cli/cli.test.ts.
 */
import { describe, expect, it } from '@jest/globals';
import { kafkaOffsetsTables } from '../../../src/store/kafka-offsets.js';
import { EXIT } from '../../../src/cli/command.js';
import { TABLE_FAMILIES } from '../../../src/cli/families.js';
import { idempotencyKeyTables } from '../../../src/http/store.js';
import { outboxTables } from '../../../src/outbox/table.js';
import { flowTables } from '../../../src/steps/table.js';
import { COMMANDS, runCli } from '../../../src/cli/run.js';
import { ledgerStatements, stepChecksum, stepScript } from '../../../src/store/ledger.js';
import { dedupTables } from '../../../src/store/migrate.js';
import type { TableFamily } from '../../../src/store/table-family.js';

async function cli(argv: string[], env: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, {
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    env,
    signal: new AbortController().signal,
  });
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}

describe('effectively-once help', () => {
  it('--help lists every command, the common options and the exit codes (exit 0)', async () => {
    for (const argv of [['--help'], ['-h'], ['help']]) {
      const { code, stdout, stderr } = await cli(argv);
      expect(code).toBe(0);
      expect(stderr).toBe('');
      const lines = stdout.split('\n');
      for (const c of COMMANDS) {
        expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^  ${c.name} +\\S`)));
        expect(lines.find((l) => l.startsWith(`  ${c.name} `))?.endsWith(c.summary)).toBe(true);
      }
      for (const flag of ['--database-url <url>', '--schema <name>', '--table <name>', '--json'])
        expect(stdout).toContain(flag);
      for (const line of [
        /^ +0 +done/m,
        /^ +1 +failed/m,
        /^ +2 +usage error/m,
        /^ +3 +inspect/m,
        /^ +130 +interrupted/m,
      ])
        expect(stdout).toMatch(line);
    }
  });

  it('no command prints the help on stderr and exits 2', async () => {
    const { code, stdout, stderr } = await cli([]);
    expect(code).toBe(EXIT.usage);
    expect(stdout).toBe('');
    expect(stderr).toContain('Usage: effectively-once <command> [options]');
  });

  it.each(COMMANDS)(
    '$name --help shows its usage, every option and an example',
    async (command) => {
      const { name } = command;
      for (const argv of [
        [name, '--help'],
        ['help', name],
        [name, '-h'],
      ]) {
        const { code, stdout } = await cli(argv);
        expect(code).toBe(0);
        expect(stdout).toContain(`Usage: effectively-once ${name} ${command.usage}`);
        for (const option of Object.keys(command.options)) expect(stdout).toContain(`--${option}`);
        expect(stdout).toContain(`  ${command.examples[0]}`);
      }
    },
  );
});

describe('usage errors exit 2 with one line naming the problem', () => {
  it.each([
    [
      ['frob'],
      'effectively-once: EO_CONFIGURATION: Invalid option "command": "frob" is not a command: use migrate, prune, stats, inspect, outbox (see effectively-once --help)',
    ],
    [
      ['prune'],
      'effectively-once prune: EO_CONFIGURATION: Invalid option "--older-than": is required (or --expired), e.g. --older-than 7d',
    ],
    [
      // The Kafka offsets table has no retention: one row per partition, only ever moved
      // forward, never deleted by the library (no pruner and no prune target).
      ['prune', '--family', 'kafka-offsets', '--expired'],
      'effectively-once prune: EO_CONFIGURATION: Invalid option "--family": "kafka-offsets" is not one of consumer, http-keys, flows; prune does not read the kafka-offsets table',
    ],
    [
      ['prune', '--older-than', '7d', '--expired'],
      'effectively-once prune: EO_CONFIGURATION: Invalid option "--expired": goes without --older-than: give one of them',
    ],
    [
      ['prune', '--older-than', '7'],
      'effectively-once prune: EO_CONFIGURATION: Invalid option "--older-than": "7" is not a duration: write a whole number and one unit, s, m (minutes), h, d or w, e.g. 90s, 15m, 7d, 2w',
    ],
    [
      ['prune', '--older-than', '7d', '--batch-size', '0'],
      'effectively-once prune: EO_CONFIGURATION: Invalid option "--batch-size": must be an integer from 1 to 100000',
    ],
    [
      ['prune', '--older-than', '7d', '--duty-cycle', '2'],
      'effectively-once prune: EO_CONFIGURATION: Invalid option "--duty-cycle": must be a number above 0 and at most 1',
    ],
    [
      ['stats', '--window', '1.5d'],
      'effectively-once stats: EO_CONFIGURATION: Invalid option "--window": "1.5d" is not a duration: write a whole number and one unit, s, m (minutes), h, d or w, e.g. 90s, 15m, 7d, 2w',
    ],
    [
      ['inspect'],
      'effectively-once inspect: EO_CONFIGURATION: Invalid option "<key>": is required: effectively-once inspect <key> [--consumer <name> | --family http-keys --scope <scope> [--body] | --family flows --scope <scope>] [--probe] [options]',
    ],
    [
      ['inspect', 'k1', '--probe'],
      'effectively-once inspect: EO_CONFIGURATION: Invalid option "--probe": needs --consumer: a claim belongs to one consumer',
    ],
    [
      ['inspect', '-k1'],
      'effectively-once inspect: EO_CONFIGURATION: Invalid option "-k": is not an option of inspect; an argument starting with "-" goes after "--"; see `effectively-once inspect --help`',
    ],
    [
      ['inspect', 'x'.repeat(1801), '--consumer', 'c'],
      'effectively-once inspect: EO_INVALID_KEY: Invalid message key: 1801 UTF-8 bytes exceeds the index limit of 1800',
    ],
    [
      ['migrate', '--only', 'consumer,queues'],
      'effectively-once migrate: EO_CONFIGURATION: Invalid option "--only": "queues" is not one of consumer, kafka-offsets, http-keys, outbox, flows (comma-separated)',
    ],
    [
      ['migrate', '--print', '--table', 'x'.repeat(64)],
      'effectively-once migrate: EO_CONFIGURATION: Invalid option "--table": must be at most 63 bytes (Postgres identifier limit)',
    ],
    [
      ['migrate', '--print', '--kafka-offsets-table', ''],
      'effectively-once migrate: EO_CONFIGURATION: Invalid option "--kafka-offsets-table": must be a non-empty name without NUL characters',
    ],
    [
      ['stats'],
      'effectively-once stats: EO_CONFIGURATION: Invalid option "--database-url": is missing: pass --database-url or set DATABASE_URL',
    ],
  ])('%j', async (argv, line) => {
    // A database URL that is never reached: every one of these fails before connecting.
    const env: Record<string, string> =
      argv[0] === 'stats' && argv.length === 1
        ? {}
        : { DATABASE_URL: 'postgres://127.0.0.1:1/none' };
    const { code, stdout, stderr } = await cli(argv, env);
    expect({ code, stdout, stderr }).toEqual({ code: EXIT.usage, stdout: '', stderr: line });
  });

  it('--json reports the error as one JSON document on stderr, with its code and details', async () => {
    const { code, stdout, stderr } = await cli(['prune', '--older-than', '7x', '--json']);
    expect(code).toBe(EXIT.usage);
    expect(stdout).toBe('');
    expect(JSON.parse(stderr)).toEqual({
      error: {
        code: 'EO_CONFIGURATION',
        message: expect.stringContaining('"7x" is not a duration'),
        details: { option: '--older-than' },
      },
    });
  });
});

describe('migrate --print', () => {
  const ref = (table: string) => ({ schema: 'billing', table });
  /** The SQL a family's steps print as for a fresh database: statements, then the ledger row. */
  const script = (family: TableFamily, table: string): string[] =>
    family.steps(ref(table)).flatMap((step) => stepScript(family, ref(table), step));

  it("--all prints every family's steps from their one owner, ledger rows included, with no database", async () => {
    const { code, stdout, stderr } = await cli([
      'migrate',
      '--print',
      '--all',
      '--schema',
      'billing',
      '--table',
      'dedup',
      '--kafka-offsets-table',
      'offsets',
      '--http-keys-table',
      'keys',
      '--outbox-table',
      'box',
      '--flows-table',
      'flows',
    ]);
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    const printed = [
      ...ledgerStatements('billing'),
      ...script(dedupTables, 'dedup'),
      ...script(kafkaOffsetsTables, 'offsets'),
      ...script(idempotencyKeyTables, 'keys'),
      ...script(outboxTables, 'box'),
      ...script(flowTables, 'flows'),
    ];
    // A statement ends with ';' at the end of a line followed by a comment, a blank line
    // or the end (function bodies have ';' at line ends too, never followed by those).
    const statements = `${stdout}\n`
      .split(/;\n(?=\n|--|$)/)
      .map((s) => s.replace(/^(--.*\n|\n)*/g, '').trim())
      .filter((s) => s !== '');
    expect(statements).toEqual(printed);
    expect(stdout).toMatch(/^-- 6 pending migration steps\. Run each section in one transaction/);
    expect(stdout).toContain(
      '-- consumer "billing"."dedup", step 1: the dedup table, its processed_at and expiry indexes\n' +
        `DELETE FROM "billing"."effectively_once_migrations" WHERE family = 'consumer' AND table_name = 'dedup';\n\n` +
        'CREATE TABLE IF NOT EXISTS "billing"."dedup" (',
    );
    expect(stdout).toContain(
      `INSERT INTO "billing"."effectively_once_migrations" (family, table_name, version, checksum, summary) VALUES ('consumer', 'dedup', 1, '${stepChecksum(dedupTables.steps(ref('dedup'))[0]!)}', `,
    );
  });

  it('--only picks families; --json gives the pending steps per family', async () => {
    const { code, stdout } = await cli([
      'migrate',
      '--print',
      '--all',
      '--only',
      'kafka-offsets',
      '--json',
    ]);
    expect(code).toBe(0);
    const [step] = kafkaOffsetsTables.steps({ schema: 'public', table: 'eo_kafka_offsets' });
    expect(JSON.parse(stdout)).toEqual({
      ledgers: [{ schema: 'public', statements: ledgerStatements('public') }],
      families: [
        {
          family: 'kafka-offsets',
          schema: 'public',
          table: 'eo_kafka_offsets',
          version: 0,
          unknown: [],
          pending: [
            {
              version: 1,
              summary: step!.summary,
              checksum: stepChecksum(step!),
              statements: stepScript(
                kafkaOffsetsTables,
                { schema: 'public', table: 'eo_kafka_offsets' },
                step!,
              ),
            },
          ],
        },
      ],
    });
  });

  it('--print without --all needs the database (it reads the ledger); --all needs --print', async () => {
    const noDatabase = await cli(['migrate', '--print']);
    expect(noDatabase).toMatchObject({ code: EXIT.usage, stdout: '' });
    expect(noDatabase.stderr).toContain("--print reads the database's migration ledger");
    expect(noDatabase.stderr).toContain('add --all');
    const allAlone = await cli(['migrate', '--all']);
    expect(allAlone).toMatchObject({ code: EXIT.usage, stdout: '' });
    expect(allAlone.stderr).toContain('Invalid option "--all": goes with --print');
  });

  it('only the dedup, HTTP key and flows tables have a prune target: no retention reaches the Kafka offsets', () => {
    expect(TABLE_FAMILIES.filter((f) => f.rows !== undefined).map((f) => f.family.name)).toEqual([
      'consumer',
      'http-keys',
      'flows',
    ]);
    // Every prunable family's rows carry their own expiry, so no prune shortens a writer's.
    for (const { rows } of TABLE_FAMILIES)
      if (rows !== undefined)
        expect(rows.target({ schema: 's', table: 't' }, undefined).expiresColumn).toBe(
          'expires_at',
        );
  });

  it('every registered family has a distinct name and table flag, and steps that quote its names', () => {
    const names = TABLE_FAMILIES.map((f) => f.family.name);
    const flags = TABLE_FAMILIES.map((f) => f.tableOption);
    expect(new Set(names).size).toBe(names.length);
    expect(new Set(flags).size).toBe(flags.length);
    for (const { family } of TABLE_FAMILIES) {
      const steps = family.steps({ schema: 's"x', table: `t'; DROP TABLE y; --` });
      expect(steps.map((s) => s.version)).toEqual(steps.map((_, i) => i + 1));
      for (const statement of steps.flatMap((s) => s.statements)) {
        expect(statement).toMatch(/( IF NOT EXISTS|^CREATE OR REPLACE FUNCTION) "/);
        expect(statement).toContain('"s""x".');
      }
      expect(steps[0]?.statements[0]).toContain(`"s""x"."t'; DROP TABLE y; --"`);
    }
  });
});
