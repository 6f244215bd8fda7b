/** A column of {@link formatTable}: numbers are right-aligned. */
export interface Column {
  header: string;
  align?: 'left' | 'right';
}

/** Rows under a header, columns padded to their widest cell, two spaces apart. */
export function formatTable(
  columns: readonly Column[],
  rows: ReadonlyArray<readonly string[]>,
): string {
  const widths = columns.map((c, i) =>
    Math.max(c.header.length, ...rows.map((r) => (r[i] ?? '').length)),
  );
  const line = (cells: readonly string[]): string =>
    columns
      .map((c, i) => {
        const cell = cells[i] ?? '';
        const width = widths[i] ?? 0;
        return c.align === 'right' ? cell.padStart(width) : cell.padEnd(width);
      })
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.header)), ...rows.map(line)].join('\n');
}

/** `label: value` lines with the values aligned. */
export function formatFields(fields: ReadonlyArray<readonly [string, string]>): string {
  const width = Math.max(...fields.map(([label]) => label.length));
  return fields.map(([label, value]) => `${`${label}:`.padEnd(width + 1)}  ${value}`).join('\n');
}

/** A count with thousands separators: `10,000,000`. */
export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}

const BYTE_UNITS = ['bytes', 'kB', 'MB', 'GB', 'TB'];

/** Bytes as Postgres's `pg_size_pretty` prints them: 1024 steps from 10 units up, `9800 kB`, `12 MB`. */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 10 * 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${Math.round(value)} ${BYTE_UNITS[unit]}`;
}

/** An instant as ISO 8601 (UTC), or `-` for none. */
export function formatTime(time: Date | null): string {
  return time === null ? '-' : time.toISOString();
}

/** A value for JSON output: instants as ISO strings. */
export function isoOrNull(time: Date | null): string | null {
  return time === null ? null : time.toISOString();
}
