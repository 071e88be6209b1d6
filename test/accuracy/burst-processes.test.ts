// Accuracy of a token bucket with a burst across processes: 8 forked children consume from one burst-50, 10/s bucket on one real redis-server, then on one real PostgreSQL, in phases with pauses that refill it; no interval of t ms ever holds more than 50 + 10·t/1000 admitted units.
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { startPostgres, type PostgresServer } from '../support/postgres-server.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { nextMessage } from '../support/child-messages.js';
import type { BurstReport } from '../support/burst-hammer.js';

const CHILD = fileURLToPath(new URL('../support/burst-hammer.ts', import.meta.url));
const PROCESSES = 8;
const LIMIT = 10;
const WINDOW_MS = 1000;
const BURST = 50;
/**
 * Demand (ms from the start): a burst at a full new bucket, a pause that refills 30 tokens, then demand
 * again, then a pause long enough that the bucket is full and forgotten, then demand again.
 */
const PHASES: [number, number][] = [
  [0, 1500],
  [4500, 6000],
  [12_000, 13_000],
];

let server: RedisServer;
let postgres: PostgresServer;
before(async () => {
  [server, postgres] = await Promise.all([startRedis(), startPostgres()]);
});
after(async () => {
  await Promise.all([server.stop(), postgres.stop()]);
});

/**
 * The interval of admitted units (sorted times) that most exceeds what the bucket allows, BURST + LIMIT·t/W for an
 * interval of t ms: for every pair of admissions i ≤ j, j − i + 1 units sit in [times[i], times[j]].
 */
function worstInterval(
  times: readonly number[],
  bound: (ms: number) => number,
): { from: number; to: number; units: number; allowed: number } {
  let worst = { from: 0, to: 0, units: 0, allowed: Infinity };
  for (let i = 0; i < times.length; i++) {
    for (let j = i; j < times.length; j++) {
      const units = j - i + 1;
      const allowed = bound(times[j]! - times[i]!);
      if (units - allowed > worst.units - worst.allowed) worst = { from: times[i]!, to: times[j]!, units, allowed };
    }
  }
  return worst;
}

/** Runs the children on the store at `url` (redis:// or postgres://) and checks every interval of their admissions. */
async function hammer(url: string, label: string): Promise<void> {
  const forked: ChildProcess[] = [];
  const prefix = `burstproc:${process.pid}`;
  for (let i = 0; i < PROCESSES; i++) {
    const args = [url, prefix, String(LIMIT), String(WINDOW_MS), String(BURST), String(BURST)];
    forked.push(fork(CHILD, args, { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }));
  }
  await Promise.all(forked.map((child) => nextMessage(child, 'ready')));
  const reports = forked.map((child) => nextMessage<BurstReport>(child, 'report'));
  const start = Date.now() + 300;
  for (const child of forked) child.send({ type: 'go', start, phases: PHASES });
  const all = await Promise.all(reports);

  const times = all.flatMap((r) => r.admitted).sort((a, b) => a - b);
  // Exactly: the bucket admits n units in [a, b] only if n ≤ BURST + (b − a)·LIMIT/W (GCRA's arrival time moves
  // W/LIMIT per unit and may run at most BURST·W/LIMIT ahead of the decision's time).
  const bound = (ms: number) => BURST + Math.floor((ms * LIMIT) / WINDOW_MS);
  const worst = worstInterval(times, bound);
  const inPhase = PHASES.map(([from, to]) => times.filter((t) => t >= start + from && t < start + to + 50).length);
  const firstBurst = times.filter((t) => t < times[0]! + 1000).length;
  console.log(
    `${label}: ${PROCESSES} processes, burst ${BURST}, ${LIMIT} per ${WINDOW_MS} ms: admitted ${times.length} (per phase ${inPhase.join(', ')}; ` +
      `per process ${all.map((r) => r.admitted.length).join(', ')}), refused ${all.reduce((n, r) => n + r.refused, 0)}; ` +
      `${firstBurst} in the first second; tightest interval ${worst.units} units in ${worst.to - worst.from} ms (allowed ${worst.allowed})`,
  );
  assert.ok(
    worst.units <= worst.allowed,
    `${worst.units} units admitted in [${worst.from}, ${worst.to}], over the ${worst.allowed} allowed`,
  );
  // The burst was there to be had, and taken: demand outran the bucket in every phase.
  assert.ok(firstBurst >= BURST, `only ${firstBurst} admitted in the first second`);
  // Phase 2 starts 3 s after phase 1 emptied the bucket (30 tokens back), phase 3 at a full bucket.
  assert.ok(inPhase[1]! >= 30 + 10, `phase 2 admitted ${inPhase[1]}`);
  assert.ok(inPhase[2]! >= BURST, `phase 3 admitted ${inPhase[2]}`);
}

test(`${PROCESSES} processes on one burst-${BURST}, ${LIMIT}/s bucket on Redis: no interval of t ms admits more than ${BURST} + ${LIMIT}·t/1000`, () =>
  hammer(server.url, 'redis'));

test(`${PROCESSES} processes on one burst-${BURST}, ${LIMIT}/s bucket on PostgreSQL: no interval of t ms admits more than ${BURST} + ${LIMIT}·t/1000`, () =>
  hammer(postgres.url, 'postgres'));
