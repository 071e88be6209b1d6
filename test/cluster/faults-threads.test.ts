// Lifecycle and fault tests with real worker threads: attached late, a stuck primary, a thread terminated mid-run.
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, test } from 'node:test';
import { ErrorCode, type Decision } from '../../src/index.js';
import { ClusterStorePrimary } from '../../src/stores/cluster/index.js';
import { killAll, startThread } from './support/remote.js';

const primary = new ClusterStorePrimary({ cluster: false });
after(() => primary.close());

function stall(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end);
}

test('a thread whose limiter runs before the primary attaches it: the call waits and goes through', async () => {
  const [onParent, onPort] = await Promise.all([startThread({ timeoutMs: 10_000 }), startThread({ timeoutMs: 10_000 }, true)]);
  try {
    for (const t of [onParent, onPort]) await t.call('limiter', 'l', { limit: 3, window: '10s', prefix: 'late' });
    const early = [onParent.call<Decision>('consume', 'l', 'k'), onPort.call<Decision>('consume', 'l', 'k')];
    await delay(300);
    primary.attach(onParent.worker);
    primary.attach(onPort.port!);
    const decisions = await Promise.all(early);
    assert.deepEqual(
      decisions.map((d) => d.source),
      ['store', 'store'],
    );
    assert.deepEqual(decisions.map((d) => d.remaining).sort(), [1, 2], 'one shared counter');
  } finally {
    await killAll([onParent, onPort]);
  }
});

test('a stuck primary gives the timeout path; a slow one is waited for', async () => {
  const t = await startThread({ timeoutMs: 500 });
  try {
    primary.attach(t.worker);
    await t.call('limiter', 'l', { limit: 10, window: '1m', breaker: false, prefix: 'stuck' });
    assert.equal((await t.call<Decision>('consume', 'l', 'k')).source, 'store');
    const slow = t.call<Decision>('consume', 'l', 'k');
    stall(100);
    assert.equal((await slow).source, 'store');
    const stuck = t.call<Decision>('consume', 'l', 'k');
    stall(1500);
    await assert.rejects(stuck, (error: { code?: string }) => error.code === ErrorCode.STORE_TIMEOUT);
    assert.equal((await t.call<Decision>('consume', 'l', 'k')).source, 'store');
  } finally {
    await t.kill();
  }
});

test('a thread terminated mid-run is detached; another keeps deciding on the shared counts', async () => {
  const [a, b] = await Promise.all([startThread({ timeoutMs: 2000 }), startThread({ timeoutMs: 2000 }, true)]);
  try {
    primary.attach(a.worker);
    primary.attach(b.port!);
    for (const t of [a, b]) await t.call('limiter', 'l', { limit: 1_000_000, window: '1m', prefix: 'killed' });
    await a.call('spin', 'l', 'k');
    while ((await a.call<number>('spun')) < 20) await delay(10);
    await a.kill();
    const d = await b.call<Decision>('consume', 'l', 'k');
    assert.equal(d.source, 'store');
    assert.ok(1_000_000 - d.remaining >= 200);
    assert.equal(primary.stats().attached, 1, 'only the live thread is attached');
  } finally {
    await killAll([a, b]);
  }
  await delay(50);
  assert.equal(primary.stats().attached, 0);
});
