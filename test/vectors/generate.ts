// Regenerates test/vectors/algorithms.json: hand-written step sequences (calendar windows included), expectations from the TypeScript algorithms (run: npx tsx test/vectors/generate.ts).
// Review any changed expectation by hand before committing: the JSON is the contract the Lua scripts must meet.
import { writeFileSync } from 'node:fs';
import { ALGORITHMS, ManualClock, MemoryStore, RateLimiter, type Algorithm, type RateLimiterOptions } from '../../src/index.js';
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
  // Penalties past 2^53 (a caller charging a client's claimed cost without bound): usage saturates at 2^52, so every
  // number stays an exact integer in Lua as in TypeScript, and the key is over, not a store failure.
  {
    name: 'penalties past 2^53 saturate',
    limit: 5,
    windowMs: 60_000,
    steps: [
      ...c(0),
      op(1, 'penalty', 2 ** 53 - 1),
      op(2, 'penalty', 2 ** 53 - 1),
      op(3, 'peek'),
      ...c(4),
      op(5, 'reward', 3),
      op(6, 'peek'),
    ],
  },
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

/**
 * Token buckets whose burst (bucket size) is not their limit (the refill per window), and whose new keys start
 * with initialTokens instead of a full bucket: token-bucket only.
 */
const bucketScenarios: {
  name: string;
  limit: number;
  windowMs: number;
  burst?: number;
  initialTokens?: number;
  blockMs?: number;
  steps: Input[];
}[] = [
  {
    name: 'burst 5 refilled at 2 per second',
    limit: 2,
    windowMs: 1000,
    burst: 5,
    steps: [
      ...c(0, 6),
      ...c(250),
      ...c(500),
      op(1000, 'peek'),
      ...c(1000, 2),
      op(3000, 'peek'),
      ...c(4000, 6),
      op(7000, 'peek'),
      ...c(7000),
    ],
  },
  {
    name: 'burst 3 below a limit of 10 per second',
    limit: 10,
    windowMs: 1000,
    burst: 3,
    steps: [...c(0, 4), ...c(100), ...c(200, 2), op(250, 'consume', 3), ...c(1000, 4), op(1000, 'peek')],
  },
  {
    name: 'burst 50 at 10 per second',
    limit: 10,
    windowMs: 1000,
    burst: 50,
    steps: [
      op(0, 'consume', 49),
      ...c(0, 2),
      ...c(100),
      ...c(1000, 11),
      op(2000, 'consume', 10),
      op(2000, 'peek'),
      op(7000, 'consume', 50),
    ],
  },
  {
    name: 'a new key starts empty (initialTokens 0)',
    limit: 2,
    windowMs: 1000,
    burst: 4,
    initialTokens: 0,
    steps: [
      ...c(0),
      op(100, 'peek'),
      ...c(499),
      ...c(500, 2),
      ...c(1000),
      op(1500, 'peek'),
      ...c(2000, 2),
      // Full again at 3500 and forgotten: from then on a new key, empty again.
      op(3499, 'peek'),
      op(3500, 'peek'),
      ...c(10_000),
      ...c(10_500),
    ],
  },
  {
    name: 'initial tokens with costs, reward, penalty, block and reset',
    limit: 3,
    windowMs: 1000,
    burst: 6,
    initialTokens: 2,
    blockMs: 1000,
    steps: [
      op(0, 'consume', 2),
      op(0, 'consume', 1),
      ...c(999),
      ...c(1000),
      op(1100, 'reward', 10),
      op(1200, 'peek'),
      op(1300, 'penalty', 4),
      ...c(1400),
      op(1500, 'reset'),
      ...c(1500, 3),
      op(1600, 'consume', 6),
      op(5000, 'consume', 6),
    ],
  },
  {
    name: 'initial tokens only (burst = limit)',
    limit: 4,
    windowMs: 1000,
    initialTokens: 1,
    steps: [...c(0, 2), op(250, 'peek'), ...c(250, 2), ...c(2000, 5)],
  },
];

const H = 3_600_000;
const D = 24 * H;
/**
 * Calendar windows (fixed window only), each from its own absolute t0 (the
 * case's `t0`), in time order so a shared clock only moves forward: month
 * ends, a leap day, both DST changes in two zones, a week from Sunday.
 */
const calendarScenarios: {
  name: string;
  t0: string;
  limit: number;
  calendar: NonNullable<VectorCase['calendar']>;
  blockMs?: number;
  steps: Input[];
}[] = [
  {
    // 23:00 in Berlin on Jan 31: the month ends in an hour; February has 28 days.
    name: 'month Jan → Feb, Europe/Berlin',
    t0: '2026-01-31T22:00:00Z',
    limit: 3,
    calendar: { unit: 'month', timeZone: 'Europe/Berlin' },
    steps: [...c(0, 4), op(H - 1, 'peek'), ...c(H - 1), ...c(H, 3), op(H + 1, 'reward', 1), ...c(H + 2, 2), op(29 * D, 'peek')],
  },
  {
    name: 'month with a block across its end, UTC',
    t0: '2026-01-31T23:00:00Z',
    limit: 1,
    calendar: { unit: 'month', timeZone: 'UTC' },
    blockMs: 2 * H,
    steps: [...c(0, 2), op(H, 'peek'), ...c(H + H / 2), ...c(2 * H), op(2 * H + 1, 'peek')],
  },
  {
    name: 'day across spring forward (23 hours), Europe/Berlin',
    t0: '2026-03-28T23:00:00Z',
    limit: 2,
    calendar: { unit: 'day', timeZone: 'Europe/Berlin' },
    steps: [...c(0), ...c(2 * H, 2), ...c(23 * H - 1), ...c(23 * H), op(23 * H, 'penalty', 1), ...c(47 * H - 1), ...c(47 * H)],
  },
  {
    // Saturday 23:00 in New York; weeks start on Sunday, and the next one loses an hour to DST.
    name: 'week from Sunday across spring forward, America/New_York',
    t0: '2026-03-08T04:00:00Z',
    limit: 2,
    calendar: { unit: 'week', timeZone: 'America/New_York', weekStart: 0 },
    steps: [...c(0, 3), ...c(H), ...c(H + 167 * H - 1, 2), ...c(168 * H)],
  },
  {
    name: 'day across spring forward (23 hours), America/New_York',
    t0: '2026-03-08T05:00:00Z',
    limit: 1,
    calendar: { unit: 'day', timeZone: 'America/New_York' },
    steps: [...c(0, 2), ...c(23 * H - 1), ...c(23 * H, 2)],
  },
  {
    name: 'day across fall back (25 hours), Europe/Berlin',
    t0: '2026-10-24T22:00:00Z',
    limit: 2,
    calendar: { unit: 'day', timeZone: 'Europe/Berlin' },
    steps: [op(0, 'consume', 2), ...c(3 * H), ...c(25 * H - 1), ...c(25 * H), op(25 * H + 1, 'peek')],
  },
  {
    name: 'day across fall back (25 hours), America/New_York',
    t0: '2026-11-01T04:00:00Z',
    limit: 3,
    calendar: { unit: 'day', timeZone: 'America/New_York' },
    steps: [op(0, 'consume', 3), ...c(6 * H), op(12 * H, 'block', H), ...c(12 * H + 1), ...c(25 * H - 1), ...c(25 * H, 4)],
  },
  {
    // Feb 29 2028 ends the month; March has 31 days.
    name: 'leap day → March, UTC',
    t0: '2028-02-29T23:59:00Z',
    limit: 2,
    calendar: { unit: 'month', timeZone: 'UTC' },
    steps: [...c(0, 3), ...c(59_999), ...c(60_000, 3), op(60_000 + 31 * D - 1, 'peek'), ...c(60_000 + 31 * D)],
  },
  {
    name: 'leap day → March, America/New_York',
    t0: '2028-03-01T04:00:00Z',
    limit: 1,
    calendar: { unit: 'month', timeZone: 'America/New_York' },
    steps: [...c(0, 2), ...c(H), ...c(H + 1)],
  },
];

interface Run {
  name: string;
  t0: number;
  calendar?: VectorCase['calendar'];
  options: {
    algorithm: Algorithm;
    limit: number;
    window: RateLimiterOptions['window'];
    blockDuration?: number;
    burst?: number;
    initialTokens?: number;
  };
  steps: Input[];
}

const runs: Run[] = [];
for (const algorithm of ALGORITHMS as readonly Algorithm[]) {
  for (const s of scenarios) {
    const options = { algorithm, limit: s.limit, window: s.windowMs, ...(s.blockMs ? { blockDuration: s.blockMs } : {}) };
    runs.push({ name: `${algorithm}: ${s.name}`, t0: T0, options, steps: s.steps });
  }
}
for (const s of bucketScenarios) {
  const options = {
    algorithm: 'token-bucket' as const,
    limit: s.limit,
    window: s.windowMs,
    ...(s.burst === undefined ? {} : { burst: s.burst }),
    ...(s.initialTokens === undefined ? {} : { initialTokens: s.initialTokens }),
    ...(s.blockMs ? { blockDuration: s.blockMs } : {}),
  };
  runs.push({ name: `token-bucket: ${s.name}`, t0: T0, options, steps: s.steps });
}
for (const s of calendarScenarios) {
  const window = {
    calendar: s.calendar.unit,
    timeZone: s.calendar.timeZone,
    ...(s.calendar.weekStart === undefined ? {} : { weekStart: s.calendar.weekStart }),
  };
  const options = { algorithm: 'fixed-window' as const, limit: s.limit, window, ...(s.blockMs ? { blockDuration: s.blockMs } : {}) };
  runs.push({ name: `fixed-window: calendar ${s.name}`, t0: Date.parse(s.t0), calendar: s.calendar, options, steps: s.steps });
}

const cases: VectorCase[] = [];
for (const run of runs) {
  {
    const s = run.options;
    const clock = new ManualClock(run.t0);
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }), clock: clock.now, ...s });
    const steps: VectorStep[] = [];
    for (const step of run.steps) {
      clock.set(run.t0 + step.t);
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
    const policy = limiter.policy;
    const calendar = policy.calendar;
    cases.push({
      name: run.name,
      ...(run.t0 === T0 ? {} : { t0: run.t0 }),
      policy: {
        algorithm: policy.algorithm,
        limit: policy.limit,
        windowMs: policy.windowMs,
        blockMs: policy.blockMs,
        ...(policy.burst === undefined ? {} : { burst: policy.burst }),
        ...(policy.initialTokens === undefined ? {} : { initialTokens: policy.initialTokens }),
      },
      ...(calendar ? { calendar: run.calendar! } : {}),
      steps,
    });
  }
}
writeFileSync(new URL('./algorithms.json', import.meta.url), JSON.stringify({ t0: T0, cases }, null, 1) + '\n');
console.log(`wrote ${cases.length} cases`);
