// Lifecycle and fault tests with real node:cluster workers (and a child_process.fork child): late primary, no primary, stuck primary, a worker killed mid-run, conflicting limiters, batching, bounded memory.
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { test } from 'node:test';
import { ErrorCode, type Decision } from '../../src/index.js';
import { ClusterStorePrimary } from '../../src/stores/cluster/index.js';
import { forkChild, forkWorker, killAll, type Remote } from './support/remote.js';

/** Blocks this process's event loop, as a primary stuck in synchronous work would be. */
function stall(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end);
}

/** 'pending' when `promise` has not settled within `ms`. */
async function stateAfter(promise: Promise<unknown>, ms: number): Promise<'settled' | 'pending'> {
  return Promise.race([
    promise.then(
      () => 'settled' as const,
      () => 'settled' as const,
    ),
    delay(ms).then(() => 'pending' as const),
  ]);
}

async function withWorkers(n: number, timeoutMs: number, body: (remotes: Remote[]) => Promise<void>): Promise<void> {
  const remotes = await Promise.all(Array.from({ length: n }, () => forkWorker({ timeoutMs })));
  try {
    await body(remotes);
  } finally {
    await killAll(remotes);
  }
}

test('a limiter created before the primary exists: its call waits, is not lost, and goes through once the primary starts', async () => {
  await withWorkers(1, 10_000, async ([w]) => {
    await w!.call('limiter', 'a', { limit: 2, window: '10s' });
    const early = w!.call<Decision>('consume', 'a', 'k');
    assert.equal(await stateAfter(early, 400), 'pending', 'waits for the primary');
    const primary = new ClusterStorePrimary();
    try {
      const d = await early;
      assert.equal(d.allowed, true);
      assert.equal(d.remaining, 1);
      assert.equal(d.source, 'store');
      assert.equal(primary.stats().operations, 1, 'sent exactly once');
    } finally {
      await primary.close();
    }
  });
});

test('with no primary at all, a call times out with STORE_TIMEOUT (never hangs), and insurance decides instead', async () => {
  await withWorkers(1, 300, async ([w]) => {
    await w!.call('limiter', 'plain', { limit: 2, window: '10s' });
    await w!.call('limiter', 'insured', { limit: 2, window: '10s', insurance: { limit: 1, window: '10s' } });
    const started = Date.now();
    await assert.rejects(w!.call('consume', 'plain', 'k'), (error: { code?: string }) => error.code === ErrorCode.STORE_TIMEOUT);
    const took = Date.now() - started;
    assert.ok(took >= 250 && took < 3000, `timed out after ${took} ms`);
    const d = await w!.call<Decision>('consume', 'insured', 'k');
    assert.equal(d.source, 'insurance');
    assert.equal(d.allowed, true);
  });
});

test('a slow primary is waited for; a stuck one gives the timeout path; the worker recovers when it answers again', async () => {
  const primary = new ClusterStorePrimary();
  try {
    await withWorkers(1, 400, async ([w]) => {
      await w!.call('limiter', 'plain', { limit: 100, window: '1m', breaker: false, prefix: 'plain' });
      await w!.call('limiter', 'insured', {
        limit: 100,
        window: '1m',
        breaker: false,
        prefix: 'insured',
        insurance: { limit: 1, window: '1m' },
      });
      assert.equal((await w!.call<Decision>('consume', 'insured', 'k')).source, 'store');

      // Slow: busy for less than the timeout.
      const slow = w!.call<Decision>('consume', 'insured', 'k');
      stall(150);
      assert.equal((await slow).source, 'store');

      // Stuck: busy for longer than the timeout. The requests reach the
      // worker (IPC writes go out at once); its batch gets no answer in time.
      const insured = w!.call<Decision>('consume', 'insured', 'k');
      const plain = w!.call<Decision>('consume', 'plain', 'k');
      stall(1200);
      const fallback = await insured;
      assert.equal(fallback.source, 'insurance');
      assert.equal(fallback.allowed, true);
      await assert.rejects(plain, (error: { code?: string }) => error.code === ErrorCode.STORE_TIMEOUT);

      // Answering again: the worker handshakes anew and the store decides.
      const after = await w!.call<Decision>('consume', 'insured', 'k');
      assert.equal(after.source, 'store');
      // The stuck batch was applied late by the primary (the worker had given up on it): 4 consumed.
      assert.equal(after.remaining, 100 - 4);
    });
  } finally {
    await primary.close();
  }
});

test('a worker killed mid-run leaves nothing behind; the others keep deciding on the shared counts', async () => {
  const primary = new ClusterStorePrimary();
  const errors: unknown[] = [];
  const onError = (error: unknown) => errors.push(error);
  process.on('uncaughtException', onError);
  try {
    await withWorkers(2, 2000, async ([a, b]) => {
      for (const w of [a!, b!]) await w.call('limiter', 'l', { limit: 1_000_000, window: '1m' });
      await a!.call('spin', 'l', 'k');
      // Let it get going, then kill it with batches in flight.
      while ((await a!.call<number>('spun')) < 20) await delay(10);
      await a!.kill();
      await delay(100);
      const d = await b!.call<Decision>('consume', 'l', 'k');
      assert.equal(d.source, 'store');
      assert.equal(d.allowed, true);
      const used = 1_000_000 - d.remaining;
      assert.ok(used >= 200, `the killed worker's consumes stay counted: ${used}`);
      const again = await b!.call<Decision>('consume', 'l', 'k');
      assert.equal(again.remaining, d.remaining - 1);
      assert.equal(primary.stats().attached, 0);
      assert.equal(primary.stats().keys, 1);
    });
    assert.deepEqual(errors, []);
  } finally {
    process.off('uncaughtException', onError);
    await primary.close();
  }
});

test('two limiters with the same prefix but different options fail loudly instead of sharing', async () => {
  const primary = new ClusterStorePrimary();
  const warnings: Error[] = [];
  const onWarning = (warning: Error) => warnings.push(warning);
  process.on('warning', onWarning);
  try {
    await withWorkers(2, 2000, async ([a, b]) => {
      await a!.call('limiter', 'api', { limit: 5, window: '10s', prefix: 'api' });
      await b!.call('limiter', 'api', { limit: 10, window: '10s', prefix: 'api' });
      await b!.call('limiter', 'same', { limit: 5, window: '10s', prefix: 'api' });
      assert.equal((await a!.call<Decision>('consume', 'api', 'user')).remaining, 4);
      await assert.rejects(b!.call('consume', 'api', 'user'), (error: { code?: string; message?: string }) => {
        assert.equal(error.code, ErrorCode.CONFLICTING_OPTIONS);
        assert.match(error.message!, /limit 5 .* limit 10/);
        return true;
      });
      // The same options in another process share the counter, as they should.
      assert.equal((await b!.call<Decision>('consume', 'same', 'user')).remaining, 3);
    });
    assert.equal(warnings.filter((w) => (w as { code?: string }).code === ErrorCode.CONFLICTING_OPTIONS).length, 1);
  } finally {
    process.off('warning', onWarning);
    await primary.close();
  }
});

test('all calls a worker makes in one turn travel in one message, and exactly the limit is admitted', async () => {
  const primary = new ClusterStorePrimary();
  try {
    await withWorkers(1, 2000, async ([w]) => {
      await w!.call('limiter', 'l', { limit: 20, window: '10s' });
      await w!.call('consume', 'l', 'warm'); // handshake done
      const before = primary.stats();
      const decisions = await w!.call<Decision[]>('burst', 'l', 'k', 50);
      const after = primary.stats();
      assert.equal(after.batches - before.batches, 1, 'one batch message');
      assert.equal(after.operations - before.operations, 50);
      assert.equal(decisions.filter((d) => d.allowed).length, 20);
    });
  } finally {
    await primary.close();
  }
});

test("the primary's memory is bounded by maxKeys", async () => {
  const primary = new ClusterStorePrimary({ maxKeys: 50 });
  try {
    await withWorkers(1, 5000, async ([w]) => {
      await w!.call('limiter', 'l', { limit: 1, window: '1m' });
      assert.equal(await w!.call('spread', 'l', 'u', 2000), 2000);
      const { keys, bindings } = primary.stats();
      assert.ok(keys <= 50, `keys ${keys}`);
      assert.ok(bindings <= 50, `bindings ${bindings}`);
    });
  } finally {
    await primary.close();
  }
});

test('a child_process.fork child, attached, shares the counters with cluster workers and is detached when it dies', async () => {
  const primary = new ClusterStorePrimary();
  const child = await forkChild({ timeoutMs: 2000 });
  try {
    primary.attach(child.child);
    await withWorkers(1, 2000, async ([w]) => {
      for (const r of [child, w!]) await r.call('limiter', 'l', { limit: 5, window: '1m', prefix: 'child' });
      assert.equal((await child.call<Decision>('consume', 'l', 'k')).remaining, 4);
      assert.equal((await w!.call<Decision>('consume', 'l', 'k')).remaining, 3);
      assert.equal((await child.call<Decision>('consume', 'l', 'k')).remaining, 2);
    });
    assert.equal(primary.stats().attached, 1);
    await child.kill();
    assert.equal(primary.stats().attached, 0);
  } finally {
    await child.kill();
    await primary.close();
  }
});
