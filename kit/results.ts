/**
 * Where a bench, compare or chaos run writes what it measured: the raw JSON, the
 * markdown table and the chart, under `.cache/runs/<name>` (git-ignored). A run's raw
 * figures are an artefact of that run, not source: the repository keeps only the tables
 * the docs cite (bench/results/*.md, *.svg), rendered from a run's JSON by
 * `tsx bench/render.ts <run>/latest-*.json --to bench/results`, or copied from the run
 * directory for the tables that have no JSON renderer.
 */
export const RESULTS_RUN_DIR = '.cache/runs';

/** The default `--out` of the run called `name` (`bench`, `compare-http`, ...). */
export function runDir(name: string): string {
  return `${RESULTS_RUN_DIR}/${name}`;
}

/** Where the tables the docs cite are kept (committed). */
export const PUBLISHED_DIR = 'bench/results';
