/** Under-admission of the leasing stores: 8 processes share one fixed-window key at 90 % of its rate, through local-first (Redis) and the cluster store's leases, in 1 s and 200 ms windows; prints the share refused (npx tsx bench/lease-accuracy.ts [--seconds S] [--rate PER_SECOND]). */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ClusterStorePrimary } from '../src/stores/cluster/index.js';
import { startRedis } from '../test/support/redis-server.js';
import type { HammerGo, HammerResult, HammerRun } from './lib/lease-hammer.js';

const CHILD = fileURLToPath(new URL('./lib/lease-hammer.ts', import.meta.url));
const PROCESSES = 8;
/** The combined pace, as a share of the limit's rate: below it, every refusal is an under-admission. */
const PACE = 0.9;
const { values } = parseArgs({ options: { seconds: { type: 'string', default: '10' }, rate: { type: 'string', default: '1000' } } });
const seconds = Number(values.seconds);
if (!Number.isFinite(seconds) || seconds < 2) throw new Error(`--seconds must be a number of at least 2; got ${values.seconds}`);
/** The limit's rate per second (--rate): small limits give coarse leases, where stranded units weigh most. */
const rate = Number(values.rate);
if (!Number.isSafeInteger(rate) || rate < 5 || rate % 5 !== 0)
  throw new Error(`--rate must be a multiple of 5, at least 5; got ${values.rate}`);
/** Both window lengths at the same rate. */
const WINDOWS = [
  { limit: rate, windowMs: 1000 },
  { limit: rate / 5, windowMs: 200 },
] as const;

/** Admissions per window, windows told apart by their reported ends (≥ W apart; a report is late, never early). */
function perWindow(windowEnds: readonly number[], windowMs: number): number[] {
  const sorted = [...windowEnds].sort((a, b) => a - b);
  const counts: number[] = [];
  let groupStart = -Infinity;
  for (const end of sorted) {
    if (end - groupStart > windowMs / 2) {
      counts.push(0);
      groupStart = end;
    }
    counts[counts.length - 1]!++;
  }
  return counts;
}

function once(child: ChildProcess, type: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: { type?: string }): void => {
      if (m.type !== type) return;
      child.off('message', onMessage);
      resolve(m);
    };
    child.on('message', onMessage);
    child.once('exit', (code) => reject(new Error(`a hammer exited with ${code} before "${type}"`)));
  });
}

async function measure(mode: HammerRun['mode'], url: string, limit: number, windowMs: number): Promise<string> {
  const primary = mode === 'cluster' ? new ClusterStorePrimary({ cluster: false }) : undefined;
  const run: HammerRun = {
    mode,
    url,
    limit,
    windowMs,
    perMs: (PACE * limit) / windowMs / PROCESSES,
    key: `k-${mode}-${windowMs}-${Date.now()}`,
  };
  const children = Array.from({ length: PROCESSES }, () => {
    const child = fork(CHILD, [JSON.stringify(run)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    primary?.attach(child);
    return child;
  });
  try {
    await Promise.all(children.map((c) => once(c, 'ready')));
    const results = children.map((c) => once(c, 'result') as Promise<HammerResult>);
    // Every child is up before the clock starts, so none begins late and catches up in a burst. Each starts a
    // fraction of its own interval after the one before, so the combined stream is evenly spaced: in step, the
    // processes would send in bursts of PROCESSES, and a window catching one burst more than the average would
    // refuse at any store, exact or not.
    const startAt = Date.now() + 500;
    const interval = 1 / run.perMs;
    children.forEach((c, i) => {
      const offset = (i * interval) / PROCESSES;
      c.send({ type: 'go', startAt: startAt + offset, stopAt: startAt + offset + seconds * 1000 } satisfies HammerGo);
    });
    const all = await Promise.all(results);
    const attempts = all.reduce((s, r) => s + r.attempts, 0);
    const admitted = all.reduce((s, r) => s + r.admitted, 0);
    const counts = perWindow(
      all.flatMap((r) => r.windowEnds),
      windowMs,
    );
    const over = Math.max(0, ...counts.map((c) => c - limit));
    const refused = attempts - admitted;
    const resets = all.flatMap((r) => r.refusedResetMs).sort((x, y) => x - y);
    const where =
      resets.length === 0
        ? ''
        : `  refusals at ${resets[0]}–${resets[resets.length - 1]} ms before their window's end (median ${resets[resets.length >> 1]})`;
    const sum = (name: string): number => all.reduce((s, r) => s + Number(r.stats?.[name] ?? 0), 0);
    const leases =
      all[0]?.stats === undefined
        ? ''
        : `  lease calls ${sum('leaseCalls')}, units leased ${sum('unitsLeased')}, returned ${sum('unitsReturned')}`;
    return (
      `${mode.padEnd(12)} ${String(limit).padStart(5)} per ${String(windowMs).padStart(4)} ms  ` +
      `attempts ${String(attempts).padStart(6)}  refused ${String(refused).padStart(5)} = ${((100 * refused) / attempts).toFixed(2).padStart(5)} %  ` +
      `windows ${counts.length}  most in one window ${Math.max(...counts)}  over the limit ${over}${where}${leases}`
    );
  } finally {
    for (const c of children) c.kill();
    await primary?.close();
  }
}

const redis = await startRedis();
try {
  console.log(
    `${PROCESSES} processes, one key, ${PACE * 100} % of the limit's rate for ${seconds} s each; every refusal is an under-admission`,
  );
  for (const mode of ['local-first', 'cluster'] as const) {
    for (const { limit, windowMs } of WINDOWS) console.log(await measure(mode, redis.url, limit, windowMs));
  }
} finally {
  await redis.stop();
}
