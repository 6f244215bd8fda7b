/**
 * Summarises a V8 `.cpuprofile` (what `--profile` writes) as a self-time table: the
 * functions, or the files, where the sampled CPU time was spent, as Markdown.
 *
 *   tsx bench/profile-summary.ts <file.cpuprofile> [--top 25] [--by function|file|package|owner]
 *                                 [--window eachBatch]
 *
 * `--by owner` charges Node's own frames (socket writes, timers, crypto) to the nearest
 * caller in a file of the project or a package.
 *
 * Self time is the share of samples where a function was on top of the stack; `(idle)`
 * and `(program)` are V8's own entries (waiting for I/O, and native work outside any JS
 * function). Samples are counted, not their time deltas: on a loaded machine the
 * process is descheduled for tens of ms at a time, and a delta would charge that wait
 * to whatever function the next sample lands in. `--window fn,fn2` keeps only the samples
 * from the first to the last one with one of these functions on the stack (e.g.
 * `eachBatch,processed`: the drain, without the start-up's module loading). The flame graph itself: open the file in Chrome's
 * DevTools (Performance) or speedscope.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

type Grouping = 'function' | 'file' | 'package' | 'owner';

/** Samples per group; with `window`, only from the first to the last sample with that function on the stack. */
export function selfSamples(
  profile: CpuProfile,
  by: Grouping,
  window: string | undefined,
): Map<string, number> {
  const label = new Map<number, string>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    label.set(node.id, groupOf(node, by));
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  let from = 0;
  let to = profile.samples.length - 1;
  if (window !== undefined) {
    const names = new Set(window.split(','));
    const name = new Map(profile.nodes.map((n) => [n.id, n.callFrame.functionName]));
    const inWindow = (id: number): boolean => {
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at))
        if (names.has(name.get(at) ?? '')) return true;
      return false;
    };
    from = profile.samples.findIndex(inWindow);
    to = profile.samples.findLastIndex(inWindow);
    if (from < 0) throw new Error(`--window: no sample has ${window} on its stack`);
  }
  // `owner`: the file of the nearest frame that is not Node's own (a socket write is its caller's).
  const owner = (id: number): string => {
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const file = label.get(at) ?? '';
      if (file.includes('/') && !file.startsWith('node:')) return file;
    }
    return label.get(id) ?? '?';
  };
  const totals = new Map<string, number>();
  for (let i = from; i <= to; i++) {
    const id = profile.samples[i]!;
    const name = by === 'owner' ? owner(id) : (label.get(id) ?? '?');
    totals.set(name, (totals.get(name) ?? 0) + 1);
  }
  return totals;
}

function groupOf(node: ProfileNode, by: Grouping): string {
  const { functionName, url, lineNumber, columnNumber } = node.callFrame;
  const file = shortPath(url);
  if (file === '') return functionName === '' ? '(anonymous)' : functionName;
  if (by === 'file' || by === 'owner') return file;
  if (by === 'package') return packageOf(file);
  return `${functionName === '' ? '(anonymous)' : functionName} ${file}:${lineNumber + 1}:${columnNumber + 1}`;
}

function shortPath(url: string): string {
  const path = url.replace(/^file:\/\//, '');
  const modules = path.lastIndexOf('node_modules/');
  if (modules >= 0) return path.slice(modules);
  const repo = path.search(/\/(src|adapters|bench)\//);
  return repo >= 0 ? path.slice(repo + 1) : path;
}

function packageOf(file: string): string {
  const match = /^node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file);
  if (match) return match[1]!;
  if (file.startsWith('node:')) return 'node (built-in)';
  return file.split('/').slice(0, 2).join('/');
}

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      top: { type: 'string', default: '25' },
      by: { type: 'string', default: 'function' },
      window: { type: 'string' },
    },
  });
  const file = positionals[0];
  const by = values.by as Grouping;
  if (file === undefined || !['function', 'file', 'package', 'owner'].includes(by)) {
    console.error(
      'usage: tsx bench/profile-summary.ts <file.cpuprofile> [--top 25] [--by function|file|package|owner] [--window fn]',
    );
    process.exit(2);
  }
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const totals = selfSamples(profile, by, values.window);
  let all = 0;
  for (const v of totals.values()) all += v;
  const busy = all - (totals.get('(idle)') ?? 0);
  const rows = [...totals.entries()].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top));
  console.log(`${file}: ${all} samples, ${busy} not idle\n`);
  console.log(`| samples | % of non-idle | ${by} |\n|--:|--:|---|`);
  for (const [name, count] of rows) {
    const pct = name === '(idle)' ? '' : ((100 * count) / busy).toFixed(1);
    console.log(`| ${count} | ${pct} | ${name.replace(/\|/g, '\\|')} |`);
  }
}

main();
