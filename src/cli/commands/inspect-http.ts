import { ConfigurationError, InvalidKeyError } from '../../errors.js';
import { IdempotencyKeyInvalidError } from '../../http/errors.js';
import { parseIdempotencyKey } from '../../http/key.js';
import { checkStoredScope } from '../../http/options.js';
import { qualifiedTable } from '../../store/identifiers.js';
import { storedAnswer, type InFlight, type StoredAnswer } from '../key-status.js';
import { flag } from '../args.js';
import { EXIT, type CommandContext, type CommandOutput } from '../command.js';
import type { SelectedFamily } from '../families.js';
import { MAX_KEY_LENGTH } from '../../shared-options.js';
import { formatBytes, formatFields } from '../output.js';
import { describeInFlight, inFlightOf } from './in-flight.js';

/** The longest `maxKeyLength` an endpoint accepts: no stored key is longer. */
const LONGEST_KEY = MAX_KEY_LENGTH;

/**
 * `inspect --family http-keys`: what was answered to one key of one scope, and when.
 * The scope is required, so a lookup for one tenant can never show another's answer.
 */
export async function inspectHttpKey(
  ctx: CommandContext,
  { ref, rows, group: scope }: SelectedFamily,
): Promise<CommandOutput> {
  if (scope === undefined)
    throw new ConfigurationError(
      '--scope',
      'is required with --family http-keys: a key belongs to one scope (tenant), and inspect never reads across scopes (`stats --family http-keys` lists them)',
    );
  try {
    checkStoredScope(scope);
  } catch {
    throw new ConfigurationError(
      '--scope',
      'no request could have stored this scope: at most 1024 characters, no NUL, no lone surrogate',
    );
  }
  const key = httpKey(ctx.args.positionals[0] ?? '');
  const withBody = flag(ctx.args, 'body');
  const pool = await ctx.pool();
  let record = await storedAnswer(pool, ref, scope, key, withBody);
  let inFlight: InFlight | null = null;
  if (record === null) {
    const probeRow = flag(ctx.args, 'probe') ? rows.probeRow(scope, key) : undefined;
    const found = await inFlightOf(pool, ref, probeRow);
    if (found === 'committed') record = await storedAnswer(pool, ref, scope, key, withBody);
    else inFlight = found;
  }
  const hint = '--probe checks this key';
  const where = `scope ${JSON.stringify(scope)} in ${qualifiedTable(ref)}`;
  const lines =
    record === null
      ? [`Key ${JSON.stringify(key)}: no committed record in ${where}.`]
      : [`Key ${JSON.stringify(key)} of ${where}:`, ...recordText(record, withBody)];
  if (inFlight !== null) lines.push(`In flight: ${describeInFlight(inFlight, hint)}`);
  return {
    json: {
      family: 'http-keys',
      key,
      scope,
      schema: ref.schema,
      table: ref.table,
      claimed: record !== null,
      record: record === null ? null : recordJson(record),
      inFlight:
        inFlight === null ? null : { ...inFlight, detail: describeInFlight(inFlight, hint) },
    },
    text: lines.join('\n'),
    exitCode: record === null ? EXIT.notClaimed : EXIT.ok,
  };
}

/** The key as the endpoint stored it: a header value, raw or an RFC 8941 String. */
function httpKey(text: string): string {
  try {
    return parseIdempotencyKey(text, '<key>', LONGEST_KEY) ?? '';
  } catch (error) {
    if (!(error instanceof IdempotencyKeyInvalidError)) throw error;
    throw new InvalidKeyError(
      `no request could have stored it (an Idempotency-Key is 1 to ${LONGEST_KEY} printable ASCII characters): ${String(error.details.problem)}`,
    );
  }
}

const OMITTED: Record<string, string> = {
  'too-large':
    'none stored: larger than maxBodyBytes (a replay sends status and headers, an empty body and Idempotent-Body-Omitted: too-large)',
  stream:
    'none stored: streamed (a replay sends status and headers, an empty body and Idempotent-Body-Omitted: stream)',
};

function bodyLine(record: StoredAnswer, withBody: boolean): string {
  if (record.bodyOmitted !== null) return OMITTED[record.bodyOmitted] ?? record.bodyOmitted;
  if (record.bodyBytes === null) return 'none (the response had no body)';
  const size =
    record.bodyBytes < 10 * 1024
      ? `${record.bodyBytes} bytes`
      : `${record.bodyBytes} bytes (${formatBytes(record.bodyBytes)})`;
  return withBody ? size : `${size} (--body prints it)`;
}

function recordText(record: StoredAnswer, withBody: boolean): string[] {
  const lines = [
    formatFields([
      ['created_at', record.createdAt.toISOString()],
      ['method', record.method],
      ['route', record.route],
      ['fingerprint', `${record.fingerprint} (sha256 of method, route, query and body)`],
      [
        'status',
        record.status === null
          ? 'none stored: the transaction committed without its response, so a retry of this key cannot be replayed'
          : String(record.status),
      ],
      ['body', bodyLine(record, withBody)],
    ]),
  ];
  // jsonb keeps keys shortest first; names in order read better.
  const headers = Object.entries(record.headers ?? {}).sort(([a], [b]) => (a < b ? -1 : 1));
  lines.push(
    '',
    headers.length === 0 ? 'Stored headers: none' : 'Stored headers:',
    ...headers.map(([name, value]) => `  ${name}: ${value}`),
  );
  if (withBody && record.body != null) {
    const text = utf8(record.body);
    lines.push(
      '',
      text === null ? 'Body (not UTF-8 text; base64):' : 'Body:',
      text ?? record.body.toString('base64'),
    );
  }
  return lines;
}

function recordJson(record: StoredAnswer): Record<string, unknown> {
  const { body, createdAt, ...rest } = record;
  return {
    createdAt: createdAt.toISOString(),
    ...rest,
    ...(body === undefined
      ? {}
      : { body: body === null ? null : { base64: body.toString('base64'), text: utf8(body) } }),
  };
}

/** The bytes as text when they are valid UTF-8, else null. */
function utf8(bytes: Buffer): string | null {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}
