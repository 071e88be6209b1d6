// Regenerates test/vectors/algorithms.json: hand-written step sequences, expectations from the TypeScript algorithms (run: npx tsx test/vectors/generate.ts).
// Review any changed expectation by hand before committing: the JSON is the contract the Lua scripts must meet.
import { writeFileSync } from 'node:fs';
import { ALGORITHMS, ManualClock, MemoryStore, RateLimiter, type Algorithm } from '../../src/index.js';
import { T0, type VectorCase, type VectorStep } from './format.js';

type Input = Omit<VectorStep, 'expect'>;
const c = (t: number, n = 1): Input[] => Array.from({ length: n }, () => ({ t, op: 'consume' as const }));
const op = (t: number, name: VectorStep['op'], amount?: number): Input =>
  amount === undefined ? { t, op: name } : { t, op: name, amount };

const scenarios: { name: string; limit: number; windowMs: number; blockMs?: number; steps: Input[] }[] = [
  {
    name: 'burst then refill',
    limit: 3,
    windowMs: 1000,
    steps: [...c(0, 4), ...c(500), ...c(999), ...c(1000), ...c(1001), op(1500, 'peek'), ...c(2500, 2), ...c(4100, 4)],
  },
  {
    name: 'costs',
    limit: 5,
    windowMs: 1000,
    steps: [
      op(0, 'consume', 3),
      op(0, 'consume', 3),
      op(0, 'consume', 2),
      op(700, 'consume', 1),
      op(700, 'peek'),
      op(1200, 'consume', 4),
      op(1900, 'consume', 5),
      op(3500, 'consume', 5),
    ],
  },
  {
    name: 'reward and penalty',
    limit: 4,
    windowMs: 1000,
    steps: [
      op(0, 'penalty', 6),
      ...c(10),
      op(20, 'reward', 3),
      ...c(30, 2),
      op(40, 'peek'),
      op(600, 'reward', 10),
      ...c(700),
      op(2600, 'peek'),
    ],
  },
  {
    name: 'blockDuration',
    limit: 2,
    windowMs: 1000,
    blockMs: 3000,
    steps: [...c(0, 3), ...c(1500), op(2999, 'peek'), ...c(3000), ...c(3001, 3)],
  },
  {
    name: 'explicit blocks and reset',
    limit: 3,
    windowMs: 1000,
    steps: [
      ...c(0),
      op(10, 'block', 500),
      ...c(20),
      ...c(510),
      op(600, 'block', -1),
      ...c(100_000),
      op(100_001, 'peek'),
      op(100_002, 'reward', 1),
      op(100_003, 'reset'),
      ...c(100_004, 2),
    ],
  },
  { name: 'window edge', limit: 3, windowMs: 1000, steps: [...c(990, 3), ...c(1010, 3), ...c(1500, 2), ...c(1990, 3), ...c(2010, 3)] },
  {
    name: 'odd numbers',
    limit: 7,
    windowMs: 333,
    steps: [
      op(5, 'consume', 2),
      op(6, 'consume', 5),
      op(7, 'consume', 1),
      op(50, 'consume', 2),
      op(100, 'peek'),
      op(333, 'consume', 3),
      op(400, 'consume', 4),
      op(401, 'consume', 1),
      op(700, 'consume', 7),
    ],
  },
  { name: 'sub-second', limit: 2, windowMs: 50, steps: [...c(0, 3), ...c(25), ...c(49), ...c(50, 3), ...c(130, 3)] },
  // A penalty beyond the limit: the sliding log keeps only `limit` of its points (the same refusals, so a reward frees it sooner); the others keep all.
  {
    name: 'penalty beyond the limit',
    limit: 3,
    windowMs: 1000,
    steps: [
      ...c(0),
      op(5, 'penalty', 1_000_000),
      ...c(10),
      op(500, 'peek'),
      op(600, 'reward', 3),
      ...c(610),
      ...c(1005),
      op(2100, 'peek'),
      ...c(2200),
    ],
  },
  {
    name: 'large limit',
    limit: 1000,
    windowMs: 60_000,
    steps: [
      op(0, 'consume', 999),
      op(1, 'consume', 2),
      op(59, 'consume', 1),
      op(30_000, 'consume', 600),
      op(45_000, 'peek'),
      op(61_000, 'consume', 1000),
    ],
  },
];

const cases: VectorCase[] = [];
for (const algorithm of ALGORITHMS as readonly Algorithm[]) {
  for (const s of scenarios) {
    const clock = new ManualClock(T0);
    const limiter = new RateLimiter({
      store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }),
      clock: clock.now,
      algorithm,
      limit: s.limit,
      window: s.windowMs,
      ...(s.blockMs ? { blockDuration: s.blockMs } : {}),
    });
    const steps: VectorStep[] = [];
    for (const step of s.steps) {
      clock.set(T0 + step.t);
      const key = 'v';
      let d;
      switch (step.op) {
        case 'consume':
          d = await limiter.consume(key, step.amount ?? 1);
          break;
        case 'peek':
          d = await limiter.peek(key);
          break;
        case 'reward':
          d = await limiter.reward(key, step.amount ?? 1);
          break;
        case 'penalty':
          d = await limiter.penalty(key, step.amount ?? 1);
          break;
        case 'block':
          d = await limiter.block(key, step.amount === -1 ? 'forever' : step.amount!);
          break;
        case 'reset':
          await limiter.reset(key);
          d = undefined;
          break;
      }
      const fmt = (n: number) => (n === Infinity ? 'Infinity' : n);
      steps.push({
        ...step,
        expect: d ? { allowed: d.allowed, remaining: d.remaining, resetMs: fmt(d.resetMs), retryAfterMs: fmt(d.retryAfterMs) } : null,
      });
    }
    cases.push({
      name: `${algorithm}: ${s.name}`,
      policy: { algorithm, limit: s.limit, windowMs: s.windowMs, blockMs: s.blockMs ?? 0 },
      steps,
    });
  }
}
writeFileSync(new URL('./algorithms.json', import.meta.url), JSON.stringify({ t0: T0, cases }, null, 1) + '\n');
console.log(`wrote ${cases.length} cases`);
