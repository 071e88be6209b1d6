// Regenerates test/vectors/composite.json: seeded step sequences, expectations from the TypeScript consumeAll (run: npx tsx test/vectors/generate-composite.ts).
// Review changed expectations by hand before committing: the JSON is the contract every store's consumeAll (and the Lua script) must meet.
import { writeFileSync } from 'node:fs';
import { ManualClock, MemoryStore } from '../../src/index.js';
import { T0 } from './format.js';
import { caseLimiters, runStep, type CompositeCase, type CompositeStep, type PartRef } from './composite-format.js';

type Policies = CompositeCase['policies'];
type Input = { t: number; parts: PartRef[] } | { t: number; op: 'block' | 'penalty' | 'peek'; part: PartRef };

/** A small seeded generator (mulberry32), so the file is the same on every run. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sets: { name: string; policies: Policies; users: number; maxCost: number }[] = [
  {
    name: 'per-second bucket and per-minute window per user, shared sliding per org',
    policies: [
      { algorithm: 'token-bucket', limit: 4, windowMs: 1000, blockMs: 0 },
      { algorithm: 'fixed-window', limit: 12, windowMs: 60_000, blockMs: 0 },
      { algorithm: 'sliding-window', limit: 20, windowMs: 10_000, blockMs: 0 },
    ],
    users: 3,
    maxCost: 2,
  },
  {
    name: 'sliding log per user, fixed window per org with a block',
    policies: [
      { algorithm: 'sliding-log', limit: 5, windowMs: 2000, blockMs: 0 },
      { algorithm: 'fixed-window', limit: 8, windowMs: 3000, blockMs: 5000 },
    ],
    users: 2,
    maxCost: 3,
  },
  {
    name: 'every algorithm on one user, one with a block',
    policies: [
      { algorithm: 'fixed-window', limit: 6, windowMs: 1000, blockMs: 0 },
      { algorithm: 'sliding-window', limit: 9, windowMs: 2000, blockMs: 0 },
      { algorithm: 'sliding-log', limit: 7, windowMs: 1500, blockMs: 0 },
      { algorithm: 'token-bucket', limit: 5, windowMs: 700, blockMs: 2500 },
    ],
    users: 1,
    maxCost: 2,
  },
];

const cases: CompositeCase[] = [];
for (const [s, set] of sets.entries()) {
  const rnd = random(1000 + s);
  const clock = new ManualClock(T0);
  const store = new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
  const limiters = caseLimiters({ name: set.name, policies: set.policies, steps: [] }, store, clock, `gen${s}`);
  const orgLevel = set.policies.length - 1;
  const steps: CompositeStep[] = [];
  let t = 0;
  for (let i = 0; i < 60; i++) {
    t += Math.floor(rnd() * rnd() * 900);
    clock.set(T0 + t);
    const user = `u${Math.floor(rnd() * set.users)}`;
    const roll = rnd();
    let input: Input;
    if (roll < 0.05) input = { t, op: 'block', part: [Math.floor(rnd() * set.policies.length), user, 300 + Math.floor(rnd() * 1500)] };
    else if (roll < 0.1) input = { t, op: 'penalty', part: [0, user, 1 + Math.floor(rnd() * 2)] };
    else if (roll < 0.15) input = { t, op: 'peek', part: [orgLevel, 'org', 0] };
    else {
      // The last policy counts the org when there are users to share it; else every part is the user's.
      const parts: PartRef[] = set.policies.map((_, p) => [
        p,
        set.users > 1 && p === orgLevel ? 'org' : user,
        1 + Math.floor(rnd() * set.maxCost),
      ]);
      input = { t, parts };
    }
    const expect = await runStep({ ...input, expect: null } as CompositeStep, limiters, '{gen}');
    steps.push({ ...input, expect } as CompositeStep);
  }
  cases.push({ name: set.name, policies: set.policies, steps });
  await store.close();
}
writeFileSync(new URL('./composite.json', import.meta.url), JSON.stringify({ t0: T0, cases }, null, 1) + '\n');
console.log(`wrote ${cases.length} composite cases`);
