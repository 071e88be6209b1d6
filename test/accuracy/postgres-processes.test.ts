// Accuracy of PostgresStore across processes: 8 forked children, each with its own pg.Pool to one real PostgreSQL, consume one hot key per algorithm and a window-and-bucket composite at one clock instant per phase; every phase admits exactly what the pure algorithms admit (never more, never fewer).
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { applyComposite, applyOperation, type Algorithm, type KeyState, type Policy } from '../../src/index.js';
import { nextMessage } from '../support/child-messages.js';
import type { HammerDone, HammerLimits } from '../support/postgres-hammer.js';
import { startPostgres, type PostgresServer } from '../support/postgres-server.js';

const CHILD = fileURLToPath(new URL('../support/postgres-hammer.ts', import.meta.url));
const PROCESSES = 8;
/** Calls of each kind per child per phase: 8 × 8 = 64 per hot key, about three times what a phase can admit. */
const PER_PHASE = 8;
const PHASES = 40;
/** Clock time between phases: 40 × 150 ms = 6 s, six windows, and refills in between. */
const STEP_MS = 150;
const START = 1_800_000_000_000;
const LIMITS: HammerLimits = { limit: 20, windowMs: 1000, compositeLimit: 15, compositeWindowMs: 700 };
const ALGORITHMS: readonly Algorithm[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket'];

let server: PostgresServer;
const children: ChildProcess[] = [];
before(async () => {
  server = await startPostgres();
});
after(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  await server.stop();
});

/** One key's state as the memory store keeps it: the pure algorithm's state until its expiry. */
class ModelKey {
  private state: KeyState | undefined;
  private expiresAt = 0;
  constructor(readonly policy: Policy) {}
  at(now: number): KeyState | undefined {
    return this.state && this.expiresAt > now ? this.state : undefined;
  }
  set(state: KeyState | undefined, expiresAt: number): void {
    this.state = state;
    this.expiresAt = expiresAt;
  }
  /** Consumes one unit `demand` times at `now`; returns how many were admitted. */
  consume(demand: number, now: number): number {
    let admitted = 0;
    for (let i = 0; i < demand; i++) {
      const applied = applyOperation(this.at(now), 'consume', 1, this.policy, now);
      this.set(applied.state, applied.expiresAt);
      if (applied.outcome.allowed) admitted++;
    }
    return admitted;
  }
}

/** Composites of one unit on each key, `demand` times at `now`; returns how many were admitted. */
function consumeComposites(keys: ModelKey[], demand: number, now: number): number {
  let admitted = 0;
  for (let i = 0; i < demand; i++) {
    const decided = applyComposite(
      keys.map((k) => ({ state: k.at(now), amount: 1, policy: k.policy })),
      now,
    );
    decided.writes.forEach((w, p) => w && keys[p]!.set(w.state, w.expiresAt));
    if (decided.allowed) admitted++;
  }
  return admitted;
}

test(`${PROCESSES} processes on one PostgreSQL: every algorithm and a composite admit exactly what the pure algorithms admit, phase after phase`, async () => {
  const { limit, windowMs, compositeLimit, compositeWindowMs } = LIMITS;
  const prefix = `pgproc:${process.pid}`;
  const forked: ChildProcess[] = [];
  for (let i = 0; i < PROCESSES; i++) {
    const child = fork(CHILD, [server.url, prefix, JSON.stringify(LIMITS)], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    // nextMessage listens for the child's exit once per phase.
    child.setMaxListeners(PHASES + 5);
    children.push(child);
    forked.push(child);
  }
  await Promise.all(forked.map((child) => nextMessage(child, 'ready')));

  const models = new Map<Algorithm, ModelKey>(
    ALGORITHMS.map((algorithm) => [algorithm, new ModelKey({ algorithm, limit, windowMs, blockMs: 0 })]),
  );
  const composite = [
    new ModelKey({ algorithm: 'fixed-window', limit: compositeLimit, windowMs: compositeWindowMs, blockMs: 0 }),
    new ModelKey({ algorithm: 'token-bucket', limit: compositeLimit, windowMs: compositeWindowMs, blockMs: 0 }),
  ];
  const demand = PROCESSES * PER_PHASE;
  const totals = new Map<string, number>();
  let over = 0;
  for (let phase = 0; phase < PHASES; phase++) {
    const now = START + phase * STEP_MS;
    const replies = forked.map((child) => nextMessage<HammerDone>(child, 'done'));
    for (const child of forked) child.send({ type: 'phase', now, count: PER_PHASE });
    const done = await Promise.all(replies);
    const expected: Record<string, number> = { composite: consumeComposites(composite, demand, now) };
    const got: Record<string, number> = { composite: done.reduce((n, d) => n + d.composites, 0) };
    for (const algorithm of ALGORITHMS) {
      expected[algorithm] = models.get(algorithm)!.consume(demand, now);
      got[algorithm] = done.reduce((n, d) => n + d.admitted[algorithm], 0);
    }
    for (const [name, n] of Object.entries(got)) {
      totals.set(name, (totals.get(name) ?? 0) + n);
      over += Math.max(0, n - expected[name]!);
    }
    assert.deepEqual(got, expected, `phase ${phase} (clock ${now}): admitted per hot key`);
  }
  console.log(
    `postgres, ${PROCESSES} processes × ${PER_PHASE} calls per key per phase, ${PHASES} phases: admitted ` +
      `${[...totals].map(([name, n]) => `${name} ${n}`).join(', ')} of ${demand * PHASES} each; over-admitted ${over}`,
  );
  const exits = forked.map((child) => new Promise((resolve) => child.once('exit', resolve)));
  for (const child of forked) child.send({ type: 'stop' });
  await Promise.all(exits);
});
