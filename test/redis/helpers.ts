// Shared checks for the Redis store tests: a seeded differential run against MemoryStore, and a real-time smoke of every operation.
import assert from 'node:assert/strict';
import {
  ALGORITHMS,
  BLOCK_FOREVER,
  ManualClock,
  MemoryStore,
  RateLimiter,
  type Algorithm,
  type Operation,
  type OperationKind,
  type Outcome,
  type Policy,
  type Store,
} from '../../src/index.js';
import { mulberry32 } from '../accuracy/traffic.js';

/** Options of {@link differential}. */
export interface DifferentialOptions {
  /** Builds the store under test around the shared clock. */
  makeStore(clock: () => number): Store;
  seed: number;
  /** Random policies to try. */
  policies: number;
  /** Ticks per policy; each tick issues 1–6 operations without awaiting in between. */
  ticks: number;
  /** Distinct prefix so runs never share keys. */
  prefix: string;
}

const TIME_BASES = [1_000_000, 1_700_006_400_000, 1_700_006_400_000 + 999, 4_102_444_800_000];
const WINDOWS = [1, 7, 100, 1000, 1500, 60_000];

/**
 * Applies the same random operations to the store under test and to a
 * MemoryStore on one ManualClock, and asserts identical outcomes. Operations
 * of a tick are issued back to back, with the clock moving between some of
 * them, so they share one flush (one script call per key) on Redis.
 */
export async function differential(options: DifferentialOptions): Promise<number> {
  const random = mulberry32(options.seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const int = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));
  let checked = 0;

  for (let p = 0; p < options.policies; p++) {
    const clock = new ManualClock(pick(TIME_BASES) + int(0, 5000));
    const store = options.makeStore(clock.now);
    const memory = new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
    const algorithm: Algorithm = ALGORITHMS[p % ALGORITHMS.length]!;
    const windowMs = pick(WINDOWS);
    const limit = random() < 0.15 && algorithm !== 'sliding-log' ? int(100, 100_000) : int(1, 12);
    const policy: Policy = Object.freeze({ algorithm, limit, windowMs, blockMs: pick([0, 0, 0, 3, 250, 5000]) });
    const keys = [0, 1, 2].map((k) => `${options.prefix}:${options.seed}:${p}:${k}`);
    const units = () => (random() < 0.7 ? int(1, Math.min(3, limit)) : int(1, limit));

    for (let t = 0; t < options.ticks; t++) {
      const pending: { op: Operation; got: Promise<Outcome>; want: Promise<Outcome>; at: number }[] = [];
      const n = int(1, 6);
      for (let i = 0; i < n; i++) {
        const r = random();
        if (r < 0.35) clock.advance(0);
        else if (r < 0.8) clock.advance(int(1, Math.max(1, Math.floor(windowMs / 3))));
        else clock.advance(int(0, windowMs * 2));
        const x = random();
        const kind: OperationKind =
          x < 0.5 ? 'consume' : x < 0.6 ? 'peek' : x < 0.72 ? 'reward' : x < 0.84 ? 'penalty' : x < 0.93 ? 'block' : 'reset';
        let amount = 0;
        if (kind === 'consume' || kind === 'reward' || kind === 'penalty') amount = units();
        if (kind === 'block') amount = random() < 0.25 ? BLOCK_FOREVER : int(1, windowMs * 2);
        const op: Operation = { kind, key: pick(keys), amount, policy };
        pending.push({ op, got: store.apply(op), want: memory.apply(op), at: clock.now() });
      }
      for (const { op, got, want, at } of pending) {
        assert.deepEqual(
          await got,
          await want,
          `seed ${options.seed}, policy ${JSON.stringify(policy)}, tick ${t}, at ${at}: ${op.kind} ${op.amount} on ${op.key}`,
        );
        checked++;
      }
    }
    await memory.close();
  }
  return checked;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Every operation and every algorithm through a RateLimiter on Redis time
 * (no injected clock): the operations on a 1-minute window (so a slow,
 * loaded machine cannot see the window roll over between two steps), then a
 * 200 ms window so expiry is observed for real.
 */
export async function smokeAllOperations(store: Store, prefix: string): Promise<void> {
  for (const algorithm of ALGORITHMS) {
    const l = new RateLimiter({ store, algorithm, limit: 2, window: 60_000, prefix: `${prefix}:${algorithm}` });
    const first = await l.consume('k');
    assert.equal(first.allowed, true, algorithm);
    assert.equal(first.remaining, 1, algorithm);
    assert.equal(first.source, 'store');
    assert.ok(first.resetMs > 0 && first.resetMs <= 120_000, `${algorithm} resetMs ${first.resetMs}`);
    assert.equal((await l.consume('k')).allowed, true, algorithm);
    const refused = await l.consume('k');
    assert.equal(refused.allowed, false, algorithm);
    assert.ok(refused.retryAfterMs > 0 && refused.retryAfterMs <= 120_000, `${algorithm} retryAfterMs ${refused.retryAfterMs}`);

    const peek = await l.peek('k');
    assert.deepEqual([peek.allowed, peek.remaining], [false, 0], algorithm);
    const rewarded = await l.reward('k', 1);
    assert.deepEqual([rewarded.allowed, rewarded.remaining], [true, 1], algorithm);
    const penalised = await l.penalty('k', 1);
    assert.deepEqual([penalised.allowed, penalised.remaining], [false, 0], algorithm);

    await l.reset('k');
    assert.deepEqual([(await l.peek('k')).remaining], [2], algorithm);
    const blocked = await l.block('k', 'forever');
    assert.deepEqual([blocked.allowed, blocked.retryAfterMs, blocked.resetMs], [false, Infinity, Infinity], algorithm);
    assert.equal((await l.consume('k')).retryAfterMs, Infinity, algorithm);
    await l.reset('k');

    // Sub-second window, on Redis's clock: spent, then whole again once the window has passed.
    const sub = new RateLimiter({ store, algorithm, limit: 2, window: 200, prefix: `${prefix}:${algorithm}:sub` });
    const spent = await sub.consume('w', 2);
    assert.equal(spent.allowed, true, algorithm);
    assert.ok(spent.resetMs > 0 && spent.resetMs <= 400, `${algorithm} resetMs ${spent.resetMs}`);
    assert.equal((await sub.consume('w')).allowed, false, algorithm);
    const block = await sub.block('b', 150);
    assert.ok(block.retryAfterMs > 0 && block.retryAfterMs <= 150, `${algorithm} block ${block.retryAfterMs}`);
    await sleep(algorithm === 'sliding-window' ? 420 : 220);
    assert.equal((await sub.consume('w')).allowed, true, `${algorithm} after the window`);
    assert.equal((await sub.consume('b')).allowed, true, `${algorithm} after the block`);
  }
}

/** Sends one raw command on the client under test: glide's customCommand, node-redis's sendCommand. */
export type SendCommand = (args: string[]) => Promise<unknown>;

/**
 * Twelve consumes alternating over two keys in one tick, after CONFIG RESETSTAT: what each left, and INFO commandstats read
 * right after, from which the caller counts the script calls its client made (a client may send a new script by text first).
 */
export async function consumeTwoKeysInOneTick(
  store: Store,
  send: SendCommand,
  key: string,
): Promise<{ remaining: number[]; info: string }> {
  const p: Policy = Object.freeze({ algorithm: 'fixed-window', limit: 4, windowMs: 60_000, blockMs: 0 });
  await send(['CONFIG', 'RESETSTAT']);
  const results = await Promise.all(
    Array.from({ length: 12 }, (_, i) => store.apply({ kind: 'consume', key: `${key}:${i % 2}`, amount: 1, policy: p })),
  );
  const info = String(await send(['INFO', 'commandstats']));
  return { remaining: results.map((o) => o.remaining), info };
}

/** SCRIPT FLUSH between two calls: the store sends its script again, for a key it knew and a new one in one flush alike. */
export async function checkScriptFlushRecovery(store: Store, send: SendCommand, key: string): Promise<void> {
  const p: Policy = Object.freeze({ algorithm: 'sliding-log', limit: 5, windowMs: 60_000, blockMs: 0 });
  assert.equal((await store.apply({ kind: 'consume', key, amount: 1, policy: p })).remaining, 4);
  await send(['SCRIPT', 'FLUSH']);
  const both = await Promise.all([
    store.apply({ kind: 'consume', key, amount: 1, policy: p }),
    store.apply({ kind: 'consume', key: `${key}:2`, amount: 1, policy: p }),
  ]);
  assert.deepEqual(
    both.map((o) => o.remaining),
    [3, 4],
  );
}
