// Accuracy harness: N real processes (1, 2, 4, 8) on one key; admissions per Redis window counted by the processes themselves (local-first and per-request Redis), and no lease spent past its window.
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import type { HammerConfig, HammerGo, HammerPhase, HammerReport } from '../support/local-first-hammer.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';

const CHILD = fileURLToPath(new URL('../support/local-first-hammer.ts', import.meta.url));
const LIMIT = 100;
const WINDOW_MS = 300;
/** Per phase: about 6 windows back to back. */
const PHASE_MS = 1800;
/** The paced phase asks for 90 % of the limit's rate in all, so leases are held as windows end. */
const PACE = 0.9;

let server: RedisServer;
const children = new Set<ChildProcess>();
before(async () => {
  server = await startRedis();
});
after(async () => {
  for (const child of children) child.kill('SIGKILL');
  await server.stop();
});

/**
 * Admissions per window, for per-request Redis. Windows are told apart by the window end each
 * decision reports (true window ends lie ≥ W apart; a report is late, never early), and counted from the
 * processes' own records.
 */
function perWindow(windowEnds: number[]): number[] {
  const order = windowEnds.map((_, i) => i).sort((a, b) => windowEnds[a]! - windowEnds[b]!);
  const counts: number[] = [];
  // A reported end is the true one plus how late the decision was seen (never earlier), so a group
  // is measured from its smallest end: chaining from the previous end would let late reports that
  // fill the gap between two windows merge them into one.
  let groupStart = -Infinity;
  for (const i of order) {
    if (windowEnds[i]! - groupStart > WINDOW_MS / 2) {
      counts.push(0);
      groupStart = windowEnds[i]!;
    }
    counts[counts.length - 1]!++;
  }
  return counts;
}

/**
 * Admissions per window, for local-first: by the end (Redis's clock) of the window each was charged
 * to, exact whatever the scheduling (a reported end is late by however late its process saw the
 * answer, by more than half a window on a loaded machine). Also the shortest gap between two ends.
 */
function perChargedWindow(chargedEnds: number[]): { ends: number[]; counts: number[]; minGapMs: number } {
  const byEnd = new Map<number, number>();
  for (const end of chargedEnds) byEnd.set(end, (byEnd.get(end) ?? 0) + 1);
  const ends = [...byEnd.keys()].sort((a, b) => a - b);
  let minGapMs = Infinity;
  for (let w = 1; w < ends.length; w++) minGapMs = Math.min(minGapMs, ends[w]! - ends[w - 1]!);
  return { ends, counts: ends.map((end) => byEnd.get(end)!), minGapMs };
}

/**
 * How far past the end of the window it was charged to (Redis's clock) an
 * admission was asked for, at the latest: a lease spent after its window
 * ended would show here, since the count alone cannot see it. Both times
 * are fixed before the decision (when it was asked) or by Redis (the
 * window), so a process descheduled around a decision cannot move it.
 */
function latestPastWindow(askedAt: number[], chargedEnds: number[]): number {
  let late = -Infinity;
  for (let i = 0; i < askedAt.length; i++) late = Math.max(late, askedAt[i]! - chargedEnds[i]!);
  return late;
}

async function run(n: number): Promise<HammerReport['results'][]> {
  const config: HammerConfig = {
    url: server.url,
    limit: LIMIT,
    windowMs: WINDOW_MS,
    channel: `acc-${process.pid}-${n}`,
    prefix: `acc${n}`,
    concurrency: 4,
  };
  const procs = Array.from({ length: n }, () => {
    const child = fork(CHILD, [JSON.stringify(config)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.add(child);
    child.once('exit', () => children.delete(child));
    return child;
  });
  const message = (child: ChildProcess, type: string) =>
    new Promise<unknown>((resolve, reject) => {
      const onMessage = (m: { type?: string }) => {
        if (m.type === type) {
          child.off('message', onMessage);
          resolve(m);
        }
      };
      child.on('message', onMessage);
      child.once('exit', (code) => reject(new Error(`child exited with ${code} before "${type}"`)));
    });
  await Promise.all(procs.map((c) => message(c, 'ready')));
  const t0 = Date.now() + 200;
  const kinds: Pick<HammerPhase, 'mode' | 'perMs'>[] = [
    { mode: 'local-first' },
    { mode: 'redis' },
    { mode: 'local-first', perMs: (PACE * LIMIT) / WINDOW_MS / n },
  ];
  const phases: HammerPhase[] = kinds.map((kind, i) => ({
    ...kind,
    key: `k-${i}`,
    startAt: t0 + i * (PHASE_MS + 300),
    stopAt: t0 + i * (PHASE_MS + 300) + PHASE_MS,
  }));
  const reports = procs.map((c) => message(c, 'report'));
  for (const c of procs) c.send({ type: 'go', phases } satisfies HammerGo);
  return ((await Promise.all(reports)) as HammerReport[]).map((r) => r.results);
}

for (const n of [1, 2, 4, 8]) {
  test(`${n} process(es) on one key, limit ${LIMIT} per ${WINDOW_MS} ms: no window over the limit`, async () => {
    const results = await run(n);
    for (const [i, name] of ['local-first', 'redis', 'local-first paced'].entries()) {
      const mine = results.map((r) => r[i]!);
      const localFirst = name !== 'redis';
      const chargedEnds = mine.flatMap((r) => r.chargedEnds);
      const charged = localFirst ? perChargedWindow(chargedEnds) : undefined;
      const counts = charged?.counts ?? perWindow(mine.flatMap((r) => r.windowEnds));
      const lateMs = latestPastWindow(
        mine.flatMap((r) => r.askedAt),
        chargedEnds,
      );
      // The first and last windows are cut by the phase's start and stop.
      const full = counts.slice(1, -1);
      const over = Math.max(0, ...counts.map((c) => c - LIMIT));
      const under = full.map((c) => LIMIT - c);
      const attempts = mine.reduce((s, r) => s + r.attempts, 0);
      const timeouts = mine.reduce((s, r) => s + r.timeouts, 0);
      // The documented bound (docs/local-first.md): Σ over processes of 1.5 × its largest grant.
      const bound = Math.floor(1.5 * mine.reduce((s, r) => s + Number(r.stats?.maxGrant ?? 0), 0));
      console.log(
        `N=${n} ${name.padEnd(17)} windows ${JSON.stringify(counts)}  over ${over}  under max ${Math.max(0, ...under)}` +
          ` (bound ${localFirst ? bound : '-'})  asked past its window ${localFirst ? `${lateMs} ms at most` : '-'}  attempts ${attempts}` +
          (localFirst ? `  lease calls ${mine.reduce((s, r) => s + Number(r.stats!.leaseCalls), 0)}` : '') +
          (timeouts > 0 ? `  store timeouts ${timeouts}` : ''),
      );
      assert.ok(full.length >= 3, `${name}: only ${full.length} full windows: ${JSON.stringify(counts)}`);
      assert.equal(over, 0, `${name}: a window admitted more than ${LIMIT}: ${JSON.stringify(counts)}`);
      if (localFirst) {
        assert.ok(
          chargedEnds.every((end) => end > 0),
          `${name}: an admission charged to no leased window`,
        );
        // Distinct Redis windows: each opens at a consume after the previous one ended.
        assert.ok(charged!.minGapMs >= WINDOW_MS, `${name}: window ends ${charged!.minGapMs} ms apart`);
        // A lease stops being spent before its window can have ended (spendDeadline), so every admission
        // was asked for before the end of the window it was charged to (the host's clock is Redis's).
        assert.ok(lateMs < 0, `${name}: an admission asked for ${lateMs} ms after the end of the window it was charged to`);
      }
      // Under-admission only means something in a window Redis ran out of (someone was refused in it):
      // then what was not admitted sits in leases. A process descheduled through a window asks too
      // little to exhaust it, and that is no under-admission; nor is a grant whose reply timed out.
      if (name === 'local-first' && timeouts === 0) {
        const exhausted = new Set(mine.flatMap((r) => r.refusedIn));
        const ends = charged!.ends.slice(1, -1);
        under.forEach((u, w) => {
          if (exhausted.has(ends[w]!)) assert.ok(u <= bound, `under-admission ${u} above the bound ${bound}: ${JSON.stringify(counts)}`);
        });
      }
    }
  });
}
