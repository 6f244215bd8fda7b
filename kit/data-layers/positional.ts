/**
 * `$1…` statement text to `?` placeholders with the values in the order they appear, for
 * a raw call that only knows `?` (Knex's `raw`). The harnesses' own statements are the
 * only input: no `?` and no `$n` inside their literals.
 */
export function positional(
  text: string,
  values: readonly unknown[],
): { text: string; values: unknown[] } {
  const ordered: unknown[] = [];
  const converted = text.replace(/\$(\d+)/g, (_, n: string) => {
    ordered.push(values[Number(n) - 1]);
    return '?';
  });
  return { text: converted, values: ordered };
}
