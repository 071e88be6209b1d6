// Prints the over-admission tables of docs/algorithms.md (run: npx tsx test/accuracy/report.ts [seeds] [windows]).
import { pathToFileURL } from 'node:url';
import { ALGORITHMS, type Algorithm } from '../../src/index.js';
import { drive, type RunPolicy } from './drive.js';
import { maxInInterval, meanOvershoot } from './reference.js';
import { generate, PATTERN_DESCRIPTIONS, PATTERNS, type Pattern } from './traffic.js';

/** What one algorithm did with one pattern, over every seed. */
export interface Measured {
  /** Worst and mean over seeds of the peak: most units admitted in any window-length interval ÷ limit. */
  worstPeak: number;
  meanPeak: number;
  /** Mean over seeds of the average over-admission ({@link meanOvershoot}). */
  overshoot: number;
  /** Mean over seeds of units admitted per window ÷ limit. */
  throughput: number;
}

/** Runs `pattern` through `algorithm` once per seed (1…seeds) and summarises the runs. */
export async function measure(
  algorithm: Algorithm,
  pattern: Pattern,
  policy: RunPolicy,
  windows: number,
  seeds: number,
): Promise<Measured> {
  const peaks: number[] = [];
  const overshoots: number[] = [];
  const throughputs: number[] = [];
  for (let seed = 1; seed <= seeds; seed++) {
    const { admitted } = await drive(algorithm, generate(pattern, { ...policy, windows, seed }), policy);
    const units = admitted.reduce((sum, a) => sum + a.cost, 0);
    peaks.push(maxInInterval(admitted, policy.windowMs).units / policy.limit);
    overshoots.push(meanOvershoot(admitted, policy.limit, policy.windowMs, windows * policy.windowMs));
    throughputs.push(units / (windows * policy.limit));
  }
  const mean = (xs: number[]) => xs.reduce((sum, x) => sum + x, 0) / xs.length;
  return { worstPeak: Math.max(...peaks), meanPeak: mean(peaks), overshoot: mean(overshoots), throughput: mean(throughputs) };
}

async function main(): Promise<void> {
  const seeds = Number(process.argv[2] ?? 20);
  const windows = Number(process.argv[3] ?? 100);
  const policy: RunPolicy = { limit: 20, windowMs: 1000 };
  const results = new Map<string, Measured>();
  for (const pattern of PATTERNS) {
    for (const algorithm of ALGORITHMS) results.set(`${pattern}/${algorithm}`, await measure(algorithm, pattern, policy, windows, seeds));
  }
  const header = `| pattern | ${ALGORITHMS.join(' | ')} |\n|---|${ALGORITHMS.map(() => '---:').join('|')}|`;
  const table = (cell: (m: Measured) => string) =>
    [header, ...PATTERNS.map((p) => `| ${p} | ${ALGORITHMS.map((a) => cell(results.get(`${p}/${a}`)!)).join(' | ')} |`)].join('\n');
  const x = (v: number) => `${v.toFixed(2)}×`;
  // Enough digits that a small non-zero value never prints as 0.
  const pct = (v: number) => (v === 0 ? '0' : `${(100 * v).toFixed(v < 0.001 ? 3 : 1)}%`);

  console.log(`limit ${policy.limit} per ${policy.windowMs} ms, one key, ${windows} windows per run, seeds 1–${seeds}\n`);
  for (const p of PATTERNS) console.log(`- ${p}: ${PATTERN_DESCRIPTIONS[p]}`);
  console.log('\nWorst over-admission — peak = most units admitted in any interval [t, t+window), ÷ limit; worst / mean over seeds.\n');
  console.log(table((m) => `${x(m.worstPeak)} / ${x(m.meanPeak)}`));
  console.log('\nAverage over-admission — mean over every interval [t, t+window) of max(0, units − limit) ÷ limit; mean over seeds.\n');
  console.log(table((m) => pct(m.overshoot)));
  console.log('\nThroughput — units admitted per window ÷ limit; mean over seeds.\n');
  console.log(table((m) => m.throughput.toFixed(2)));
}

// Only when run directly, so measure() can be imported without printing.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
