// Draws docs/img/bench-<scenario>.svg from bench/results/<scenario>.json (the output of `npm run --silent bench -- <scenario> --json`): throughput ratio to the bare baseline per variant, with p99 latency and server CPU per request (run: npx tsx scripts/bench-chart.ts).
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The fields of a bench result row (bench/lib/report.ts Row) the chart reads. */
interface ResultRow {
  readonly scenario: string;
  readonly variant: string;
  readonly ratio: number | null;
  readonly p99Ms: number | null;
  readonly serverCpuUsPerReq: number | null;
  /** What the bars measure when it is not requests/s ÷ the baseline's (the overload scenario's: goodput ÷ the upstream's capacity). */
  readonly ratioLabel?: string;
  /** Whether the row is floodgate's (blue), when its variant's name does not start with floodgate or gateway. */
  readonly floodgate?: boolean;
}

const root = fileURLToPath(new URL('..', import.meta.url));
const resultsDir = `${root}bench/results/`;
const imgDir = `${root}docs/img/`;

const WIDTH = 720;
const LABEL = 210;
const ROW = 26;
const TOP = 34;
const BAR_MAX = WIDTH - LABEL - 190;

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function format(value: number | null, digits: number, unit = ''): string {
  return value === null ? '–' : `${value.toFixed(digits)}${unit}`;
}

/** One scenario's chart: a bar per variant, its length the ratio (the baseline's bar is 1.0, drawn grey). */
function chart(scenario: string, rows: readonly ResultRow[]): string {
  const top = Math.max(1, ...rows.map((r) => r.ratio ?? 0));
  const scale = BAR_MAX / top;
  const height = TOP + rows.length * ROW + 30;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${height}" fill="#fff"/>`,
    `<text x="10" y="20" font-size="14" font-weight="bold">${escape(scenario)}: ${escape(rows[0]?.ratioLabel ?? 'requests/s as a ratio to the bare baseline (longer is faster)')}</text>`,
  ];
  const one = LABEL + scale;
  out.push(`<line x1="${one}" y1="${TOP - 6}" x2="${one}" y2="${TOP + rows.length * ROW}" stroke="#999" stroke-dasharray="3,3"/>`);
  rows.forEach((row, i) => {
    const y = TOP + i * ROW;
    const w = Math.max(1, (row.ratio ?? 0) * scale);
    const ours = row.floodgate ?? (row.variant.startsWith('floodgate') || row.variant.startsWith('gateway'));
    const colour = i === 0 ? '#aaa' : ours ? '#2a6fdb' : '#e07b39';
    out.push(`<text x="${LABEL - 8}" y="${y + 15}" text-anchor="end">${escape(row.variant)}</text>`);
    out.push(`<rect x="${LABEL}" y="${y + 3}" width="${w.toFixed(1)}" height="${ROW - 8}" fill="${colour}"/>`);
    out.push(
      `<text x="${LABEL + w + 6}" y="${y + 15}">${format(row.ratio, 3)}  p99 ${format(row.p99Ms, 1, ' ms')}  ${format(row.serverCpuUsPerReq, 1, ' µs/req')}</text>`,
    );
  });
  out.push(
    `<text x="10" y="${height - 10}" fill="#555">blue: floodgate; orange: peers; grey: baseline. Dashed line: 1.0. Source: bench/results/${escape(scenario)}.json</text>`,
  );
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

mkdirSync(imgDir, { recursive: true });
for (const file of readdirSync(resultsDir)
  .filter((f) => f.endsWith('.json'))
  .sort()) {
  const rows = JSON.parse(readFileSync(`${resultsDir}${file}`, 'utf8')) as ResultRow[];
  const scenario = rows[0]?.scenario ?? file.replace(/\.json$/, '');
  writeFileSync(`${imgDir}bench-${scenario}.svg`, chart(scenario, rows));
  console.log(`wrote docs/img/bench-${scenario}.svg`);
}
