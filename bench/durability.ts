/**
 * How durable the benches' Postgres is. Production runs `fsync = on` and
 * `synchronous_commit = on` (every managed Postgres does), where each COMMIT that wrote
 * something waits for its WAL flush and a transaction that wrote nothing waits for none;
 * the test cluster runs `fsync = off`, where every statement's CPU is the whole cost. The
 * HTTP and outbox benches run durable by default and `--no-fsync` for the CPU-bound run.
 */
import pg from 'pg';

export type Durability = 'durable' | 'no-fsync';

/** The settings that decide what a COMMIT waits for, as the server reported them. */
export interface DurabilitySettings {
  durability: Durability;
  fsync: string;
  synchronousCommit: string;
  fullPageWrites: string;
  walSyncMethod: string;
  sharedBuffers: string;
}

/** `latest-x` for a durable run, `latest-x-no-fsync` for the other: both tables side by side. */
export function durabilitySuffix(durability: Durability): string {
  return durability === 'durable' ? '' : '-no-fsync';
}

async function read(url: string): Promise<Omit<DurabilitySettings, 'durability'>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<Record<string, string>>(
      `SELECT current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS sc,
              current_setting('full_page_writes') AS fpw, current_setting('wal_sync_method') AS wsm,
              current_setting('shared_buffers') AS sb`,
    );
    const r = rows[0]!;
    return {
      fsync: r['fsync']!,
      synchronousCommit: r['sc']!,
      fullPageWrites: r['fpw']!,
      walSyncMethod: r['wsm']!,
      sharedBuffers: r['sb']!,
    };
  } finally {
    await client.end();
  }
}

/**
 * Puts the bench's own cluster (`owned`: the bench started it) in `durability`'s mode:
 * `fsync`, `full_page_writes` on (durable) or off, `synchronous_commit` on either way;
 * all three take a reload, no restart. A server the bench did not start (DATABASE_URL)
 * is left as it is and must already be in that mode: a run labelled durable against a
 * server that does not flush would report the CPU-bound figures under the wrong name.
 */
export async function ensureDurability(
  url: string,
  durability: Durability,
  owned: boolean,
): Promise<DurabilitySettings> {
  const on = durability === 'durable' ? 'on' : 'off';
  const matches = (s: Omit<DurabilitySettings, 'durability'>): boolean =>
    s.fsync === on && s.synchronousCommit === 'on';
  let settings = await read(url);
  if (!matches(settings) && owned) {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(`ALTER SYSTEM SET fsync = ${on}`);
      await client.query(`ALTER SYSTEM SET full_page_writes = ${on}`);
      await client.query(`ALTER SYSTEM SET synchronous_commit = on`);
      await client.query('SELECT pg_reload_conf()');
      await client.query('CHECKPOINT');
    } finally {
      await client.end();
    }
    // The postmaster applies a reload asynchronously; new sessions see it once it has.
    for (let i = 0; i < 50 && !matches(settings); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      settings = await read(url);
    }
  }
  if (!matches(settings))
    throw new Error(
      `bench: a ${durability} run needs fsync = ${on} and synchronous_commit = on; the server at ` +
        `DATABASE_URL has fsync = ${settings.fsync}, synchronous_commit = ${settings.synchronousCommit}` +
        (owned
          ? ''
          : ` (the bench changes only a server it started itself; ${durability === 'durable' ? 'pass --no-fsync or ' : 'drop --no-fsync or '}point DATABASE_URL elsewhere)`),
    );
  return { durability, ...settings };
}

/** One line for a report's header: what a COMMIT waited for. */
export function durabilityLine(s: DurabilitySettings): string {
  return s.durability === 'durable'
    ? `**Durable Postgres** (fsync = ${s.fsync}, synchronous_commit = ${s.synchronousCommit}, full_page_writes = ${s.fullPageWrites}, wal_sync_method = ${s.walSyncMethod}, shared_buffers = ${s.sharedBuffers}): a COMMIT that wrote waits for its WAL flush, as in production.`
    : `**CPU-bound Postgres** (\`--no-fsync\`: fsync = ${s.fsync}, full_page_writes = ${s.fullPageWrites}, synchronous_commit = ${s.synchronousCommit}, shared_buffers = ${s.sharedBuffers}): no COMMIT waits for a disk; every statement's CPU is the whole cost.`;
}
