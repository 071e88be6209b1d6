// When a key's in-memory block ends, the first store call is the only one in flight for it: later consumes wait for its answer.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  ManualClock,
  MemoryStore,
  RateLimiter,
  type Decision,
  type Operation,
  type Outcome,
  type RateLimiterOptions,
  type Store,
} from '../../src/index.js';

/** A real MemoryStore answering after a delay, as a remote store would, counting calls; it can be made to fail, or to lose calls. */
class SlowStore implements Store {
  readonly name = 'slow';
  calls = 0;
  failing = false;
  /** The next this many calls never settle (a store without a timeout losing a request). */
  loseNext = 0;
  private readonly inner: MemoryStore;
  constructor(
    clock: () => number,
    public delayMs: number,
  ) {
    this.inner = new MemoryStore({ clock, sweepIntervalMs: 0 });
  }
  apply(operation: Operation): Promise<Outcome> {
    this.calls++;
    if (this.loseNext > 0) {
      this.loseNext--;
      return new Promise(() => {});
    }
    return new Promise((resolve, reject) =>
      setTimeout(() => (this.failing ? reject(new Error('connection reset')) : resolve(this.inner.apply(operation))), this.delayMs),
    );
  }
}

/** ms `promise` took to settle. */
async function timed(promise: Promise<unknown>): Promise<number> {
  const started = performance.now();
  await promise;
  return performance.now() - started;
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * A limiter with the in-memory block on a SlowStore answering after `delayMs`,
 * whose `key` was filled past the limit, refused from memory, and whose
 * block has just ended (the clock moved to its end).
 */
async function justUnblocked(
  key: string,
  delayMs: number,
  options: Omit<RateLimiterOptions, 'store' | 'clock' | 'window' | 'inMemoryBlock'>,
): Promise<{ clock: ManualClock; store: SlowStore; l: RateLimiter }> {
  const clock = new ManualClock();
  const store = new SlowStore(clock.now, delayMs);
  const l = new RateLimiter({ window: '1s', ...options, store, clock: clock.now, inMemoryBlock: true });
  const decisions = await Promise.all(Array.from({ length: l.policy.limit + 1 }, () => l.consume(key)));
  const over = decisions.at(-1)!;
  assert.equal(over.allowed, false);
  assert.equal((await l.consume(key)).source, 'memory-block');
  clock.advance(over.retryAfterMs);
  return { clock, store, l };
}

/** Starts `perTurn[i]` consumes in each of successive event-loop turns, without awaiting them. */
async function consumeOverTurns(l: RateLimiter, key: string, perTurn: number[]): Promise<Promise<Decision>[]> {
  const pending: Promise<Decision>[] = [];
  for (const [i, n] of perTurn.entries()) {
    if (i > 0) await nextTurn();
    for (let j = 0; j < n; j++) pending.push(l.consume(key));
  }
  return pending;
}

test('after a block ends, consumes of later turns wait for the first store answer and are refused from memory', async () => {
  const { store, l } = await justUnblocked('hot', 30, { limit: 5 });
  const before = store.calls;

  const pending = await consumeOverTurns(l, 'hot', [8, 10, 10, 10]);
  const decisions = await Promise.all(pending);

  assert.equal(decisions.filter((d) => d.allowed).length, 5, 'exactly the limit is admitted');
  // The first turn's 8 went to the store; the 30 of later turns waited and were refused from memory.
  assert.equal(store.calls - before, 8);
  assert.deepEqual(
    decisions.slice(8).map((d) => d.source),
    Array(30).fill('memory-block'),
  );
});

test('when the first answer does not block the key again, the waiting consumes go to the store', async () => {
  const { store, l } = await justUnblocked('k', 20, { limit: 5 });
  const before = store.calls;

  const pending = await consumeOverTurns(l, 'k', [1, 2, 1]);
  const decisions = await Promise.all(pending);

  assert.deepEqual(
    decisions.map((d) => [d.allowed, d.remaining, d.source]),
    [
      [true, 4, 'store'],
      [true, 3, 'store'],
      [true, 2, 'store'],
      [true, 1, 'store'],
    ],
  );
  assert.equal(store.calls - before, 4, 'each waiting consume made its own call once the first was answered');
});

test('a failing first call leaves no consume waiting: each gets its own answer from the fallback', async () => {
  const { store, l } = await justUnblocked('k', 20, { limit: 2, onStoreFailure: 'fail-open' });
  store.failing = true;

  const decisions = await Promise.all(await consumeOverTurns(l, 'k', [1, 3]));

  assert.deepEqual(
    decisions.map((d) => d.source),
    ['fail-open', 'fail-open', 'fail-open', 'fail-open'],
  );
});

test("peek, penalty and other keys do not wait for a key's first call after its block", async () => {
  const { store, l } = await justUnblocked('k', 50, { limit: 2 });
  const first = l.consume('k');
  await nextTurn();
  const before = store.calls;
  await Promise.all([l.peek('k'), l.penalty('k', 1), l.consume('other')]);
  assert.equal(store.calls - before, 3, 'each went to the store at once');
  assert.equal((await first).allowed, true);
});

test("a store call that never settles holds the key's later consumes back for a second at most", async () => {
  const { store, l } = await justUnblocked('k', 5, { limit: 5 });
  store.loseNext = 1;
  void l.consume('k');
  await nextTurn();
  const ms = await timed(l.consume('k'));
  assert.ok(ms >= 900 && ms < 1500, `answered after ${ms.toFixed(0)} ms`);
  assert.equal((await l.consume('k')).source, 'store', 'the key is not held any more');
});

test("when the store fails the first turn's calls, the consumes held back get the fallback at once rather than failing again", async () => {
  const { store, l } = await justUnblocked('k', 5, { limit: 5, onStoreFailure: 'fail-open' });
  // A store that fails after 200 ms, as one timing out would.
  store.delayMs = 200;
  store.failing = true;
  const first = l.consume('k');
  await nextTurn();
  const before = store.calls;
  const held = l.consume('k');
  const ms = await timed(held);
  assert.equal((await held).source, 'fail-open');
  assert.equal((await first).source, 'fail-open');
  assert.ok(ms < 300, `answered after ${ms.toFixed(0)} ms, about one store failure`);
  assert.equal(store.calls, before, 'no second call to a failing store');
});

test('while the circuit breaker is open or probing, consumes of a just-unblocked key fall back at once', async () => {
  const { clock, store, l } = await justUnblocked('k', 5, {
    limit: 5,
    onStoreFailure: 'fail-open',
    breaker: { failureThreshold: 2, cooldown: '1s' },
  });
  store.delayMs = 200;
  store.failing = true;
  await Promise.all([l.consume('a'), l.consume('b')]);
  assert.equal(l.circuitOpen(), true);
  clock.advance(1000);
  // The cooldown is over: this call is both the breaker's probe and the key's first after its block.
  const first = l.consume('k');
  await nextTurn();
  const held = l.consume('k');
  const ms = await timed(held);
  assert.equal((await held).source, 'fail-open');
  assert.ok(ms < 50, `answered after ${ms.toFixed(0)} ms`);
  await first;
});

for (const undo of ['reset', 'reward'] as const) {
  test(`${undo} releases the consumes held back, so the store decides them on the new count`, async () => {
    const { l } = await justUnblocked('k', 30, { limit: 5 });
    const firstTurn = Array.from({ length: 8 }, () => l.consume('k'));
    await nextTurn();
    const undone = undo === 'reset' ? l.reset('k') : l.reward('k', 5);
    const after = await l.consume('k');
    await Promise.all([undone, ...firstTurn]);
    assert.deepEqual([after.allowed, after.source], [true, 'store']);
  });
}
