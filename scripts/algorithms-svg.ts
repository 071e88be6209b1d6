// Draws docs/img/algorithms.svg: what each algorithm admits on the same traffic (run: npx tsx scripts/algorithms-svg.ts).
import { mkdirSync, writeFileSync } from 'node:fs';
import { ALGORITHMS, type Algorithm } from '../src/index.js';
import { drive, type Answered, type RunPolicy } from '../test/accuracy/drive.js';
import { maxInInterval, type Admission } from '../test/accuracy/reference.js';
import type { Request } from '../test/accuracy/traffic.js';

const POLICY: RunPolicy = { limit: 5, windowMs: 1000 };
const SPAN = 5000;

/**
 * Hand-placed traffic that shows each algorithm's weak spot in five seconds:
 * a request opening a fixed window at 200 ms, a burst either side of that
 * window's end (1150, 1210), a trickle, then a burst in the last ms of an
 * aligned window (3999) followed by a flood through the next one.
 */
function scenario(): Request[] {
  const out: Request[] = [];
  const at = (t: number, n = 1) => {
    for (let i = 0; i < n; i++) out.push({ t, cost: 1 });
  };
  at(200);
  at(1150, 5);
  at(1210, 5);
  for (const t of [2300, 2600, 2900, 3200]) at(t);
  at(3999, 5);
  for (let t = 4000; t < 5000; t += 50) at(t);
  return out;
}

// Geometry, in px.
const LEFT = 200;
const LABEL_X = 16;
const RIGHT = 30;
const PLOT = 1000;
const WIDTH = LEFT + PLOT + RIGHT;
const TOP = 70;
const TRAFFIC_H = 70;
const ROW_H = 130;
const CHART_H = 62;
const DOT_R = 3.2;
const DOT_STEP = 7;
const INK = '#222';
const MUTED = '#777';
const ADMIT = '#1b6ca8';
const REFUSE = '#d1495b';
const LIMIT = '#e8a33d';

const x = (t: number) => LEFT + (t / SPAN) * PLOT;
const f = (v: number) => (Number.isInteger(v) ? String(v) : v.toFixed(1));
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * Dots for requests, stacked upward from `base` when they would overlap
 * (requests a few ms apart share a column); filled = admitted, hollow = refused.
 */
function dots(answers: readonly (Request & { allowed?: boolean })[], base: number): string {
  const seen = new Map<number, number>();
  return answers
    .map((a) => {
      const column = Math.round(x(a.t) / DOT_STEP);
      const n = seen.get(column) ?? 0;
      seen.set(column, n + 1);
      const cx = f(x(a.t));
      const cy = f(base - n * DOT_STEP);
      if (a.allowed === undefined) return `<circle cx="${cx}" cy="${cy}" r="${DOT_R}" fill="${MUTED}"/>`;
      return a.allowed
        ? `<circle cx="${cx}" cy="${cy}" r="${DOT_R}" fill="${ADMIT}"/>`
        : `<circle cx="${cx}" cy="${cy}" r="${DOT_R - 0.6}" fill="#fff" stroke="${REFUSE}" stroke-width="1.2"/>`;
    })
    .join('');
}

/**
 * A step line of the units admitted in the trailing window (t−W, t] for every
 * ms, which is what "at most limit per window" is about; the dashed line is
 * the limit. The scale goes to 2·limit, the worst any algorithm here reaches.
 */
function trailingLine(admitted: readonly Admission[], top: number): string {
  const { limit: L, windowMs: W } = POLICY;
  const changes = new Map<number, number>();
  for (const a of admitted) {
    changes.set(a.t, (changes.get(a.t) ?? 0) + a.cost);
    changes.set(a.t + W, (changes.get(a.t + W) ?? 0) - a.cost);
  }
  const y = (units: number) => top + CHART_H - (units / (2 * L)) * CHART_H;
  let units = 0;
  let d = `M${f(x(0))},${f(y(0))}`;
  for (const t of [...changes.keys()].sort((a, b) => a - b)) {
    if (t >= SPAN) break;
    units += changes.get(t)!;
    d += ` H${f(x(t))} V${f(y(units))}`;
  }
  d += ` H${f(x(SPAN))}`;
  const grid = `<line x1="${LEFT}" x2="${LEFT + PLOT}" y1="${f(y(0))}" y2="${f(y(0))}" stroke="#ccc"/>`;
  const limit =
    `<line x1="${LEFT}" x2="${LEFT + PLOT}" y1="${f(y(L))}" y2="${f(y(L))}" stroke="${LIMIT}" stroke-width="1.5" stroke-dasharray="6 4"/>` +
    `<text x="${LEFT - 6}" y="${f(y(L) + 4)}" text-anchor="end" font-size="11" fill="${MUTED}">limit ${L}</text>` +
    `<text x="${LEFT - 6}" y="${f(y(2 * L) + 8)}" text-anchor="end" font-size="11" fill="${MUTED}">${2 * L}</text>` +
    `<text x="${LEFT - 6}" y="${f(y(0) + 4)}" text-anchor="end" font-size="11" fill="${MUTED}">0</text>`;
  return `${grid}${limit}<path d="${d}" fill="none" stroke="${INK}" stroke-width="1.6"/>`;
}

/** The fixed window's own windows: each opens at the first admission after the last one ended. */
function fixedWindows(admitted: readonly Admission[]): [number, number][] {
  const out: [number, number][] = [];
  for (const a of admitted) {
    const last = out[out.length - 1];
    if (!last || a.t >= last[1]) out.push([a.t, a.t + POLICY.windowMs]);
  }
  return out;
}

function row(algorithm: Algorithm, answers: readonly Answered[], admitted: readonly Admission[], top: number): string {
  const peak = maxInInterval(admitted, POLICY.windowMs);
  const units = admitted.reduce((s, a) => s + a.cost, 0);
  const parts: string[] = [];
  if (algorithm === 'fixed-window') {
    // Its windows are per key and start at first use, not on the grid.
    for (const [i, [s, e]] of fixedWindows(admitted).entries()) {
      parts.push(
        `<rect x="${f(x(s))}" y="${top}" width="${f(x(Math.min(e, SPAN)) - x(s))}" height="${ROW_H - 16}" fill="${i % 2 ? '#eef3f8' : '#e3ecf5'}"/>`,
      );
    }
  }
  parts.push(trailingLine(admitted, top + 4));
  parts.push(dots(answers, top + CHART_H + 44));
  parts.push(`<text x="${LABEL_X}" y="${top + 20}" font-size="15" font-weight="bold" fill="${INK}">${algorithm}</text>`);
  parts.push(`<text x="${LABEL_X}" y="${top + 40}" font-size="12" fill="${MUTED}">${units} of ${answers.length} admitted</text>`);
  parts.push(
    `<text x="${LABEL_X}" y="${top + 56}" font-size="12" fill="${peak.units > POLICY.limit ? REFUSE : MUTED}">at most ${peak.units} in 1 s</text>`,
  );
  return `<g>${parts.join('')}</g>`;
}

async function main(): Promise<void> {
  const requests = scenario();
  const rows: string[] = [];
  let top = TOP + TRAFFIC_H;
  const summary: string[] = [];
  for (const algorithm of ALGORITHMS) {
    const { answers, admitted } = await drive(algorithm, requests, POLICY);
    rows.push(row(algorithm, answers, admitted, top));
    summary.push(`${algorithm} admits ${admitted.length}, at most ${maxInInterval(admitted, POLICY.windowMs).units} in one window length`);
    top += ROW_H;
  }
  const height = top + 40;

  const boundaries: string[] = [];
  for (let t = 0; t <= SPAN; t += POLICY.windowMs) {
    boundaries.push(`<line x1="${f(x(t))}" x2="${f(x(t))}" y1="${TOP - 8}" y2="${top - 10}" stroke="#bbb" stroke-dasharray="2 3"/>`);
    boundaries.push(`<text x="${f(x(t))}" y="${top + 6}" text-anchor="middle" font-size="11" fill="${MUTED}">${t / 1000} s</text>`);
  }
  const legendY = top + 26;
  const legend =
    `<circle cx="${LEFT + 6}" cy="${legendY - 4}" r="${DOT_R}" fill="${ADMIT}"/><text x="${LEFT + 14}" y="${legendY}" font-size="12" fill="${INK}">admitted</text>` +
    `<circle cx="${LEFT + 86}" cy="${legendY - 4}" r="${DOT_R - 0.6}" fill="#fff" stroke="${REFUSE}" stroke-width="1.2"/><text x="${LEFT + 94}" y="${legendY}" font-size="12" fill="${INK}">refused</text>` +
    `<line x1="${LEFT + 160}" x2="${LEFT + 190}" y1="${legendY - 4}" y2="${legendY - 4}" stroke="${INK}" stroke-width="1.6"/><text x="${LEFT + 196}" y="${legendY}" font-size="12" fill="${INK}">units admitted in the trailing window (t−1 s, t]</text>` +
    `<rect x="${LEFT + 500}" y="${legendY - 10}" width="22" height="12" fill="#e3ecf5"/><text x="${LEFT + 528}" y="${legendY}" font-size="12" fill="${INK}">fixed window's own windows (start at first use)</text>` +
    `<text x="${LEFT + 820}" y="${legendY}" font-size="12" fill="${INK}">dashed: aligned 1 s grid</text>`;

  const title = `What each algorithm admits on the same traffic (limit ${POLICY.limit} per ${POLICY.windowMs / 1000} s, one key)`;
  const svg = [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height + 20}" viewBox="0 0 ${WIDTH} ${height + 20}" font-family="system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif" role="img" aria-labelledby="title desc">`,
    `<title id="title">${esc(title)}</title>`,
    `<desc id="desc">${esc(`Generated by scripts/algorithms-svg.ts. ${summary.join('; ')}.`)}</desc>`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="${LEFT}" y="28" font-size="17" font-weight="bold" fill="${INK}">${esc(title)}</text>`,
    `<text x="${LEFT}" y="48" font-size="12" fill="${MUTED}">Bursts either side of the fixed window's end (1.15 s, 1.21 s); a trickle; a burst in the last ms of an aligned window (3.999 s), then a request every 50 ms.</text>`,
    ...boundaries,
    `<text x="${LABEL_X}" y="${TOP + 20}" font-size="15" font-weight="bold" fill="${INK}">offered</text>`,
    `<text x="${LABEL_X}" y="${TOP + 40}" font-size="12" fill="${MUTED}">${requests.length} requests</text>`,
    dots(requests, TOP + TRAFFIC_H - 20),
    ...rows,
    legend,
    `</svg>`,
    '',
  ].join('\n');

  const out = new URL('../docs/img/algorithms.svg', import.meta.url);
  mkdirSync(new URL('.', out), { recursive: true });
  writeFileSync(out, svg);
  console.log(`wrote docs/img/algorithms.svg\n${summary.join('\n')}`);
}

await main();
