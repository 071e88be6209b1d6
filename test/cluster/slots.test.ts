// Concurrency slots on the cluster store: decided in the primary on its own clock (heartbeats on real time through a MessagePort), and slot messages a worker of another release might send failed one by one without touching a slot.
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, test } from 'node:test';
import { MessageChannel } from 'node:worker_threads';
import { ConcurrencyLimiter, ErrorCode } from '../../src/index.js';
import { ClusterStore, ClusterStorePrimary } from '../../src/stores/cluster/index.js';
import { PROTOCOL_VERSION } from '../../src/stores/cluster/protocol.js';
import { SLOT_CODE } from '../../src/stores/cluster/slot-call.js';

const primary = new ClusterStorePrimary({ cluster: false });
after(() => primary.close());

test("two stores on one primary share slots; the heartbeat keeps a holder's slot past its ttl, and a released one is free at once", async () => {
  const channels = [new MessageChannel(), new MessageChannel()];
  const detach = channels.map(({ port1 }) => primary.attach(port1));
  const stores = channels.map(({ port2 }) => new ClusterStore({ transport: port2 }));
  const [a, b] = stores.map((store) => new ConcurrencyLimiter({ store, limit: 2, ttl: '1s', prefix: 'shared' }));
  try {
    const held = [await a!.acquire('k'), await b!.acquire('k')];
    assert.deepEqual(
      held.map((s) => [s.allowed, s.inFlight]),
      [
        [true, 1],
        [true, 2],
      ],
    );
    const refused = await a!.acquire('k');
    assert.equal(refused.allowed, false);
    assert.ok(refused.retryAfterMs > 900 && refused.retryAfterMs <= 1000, `retryAfterMs ${refused.retryAfterMs}`);
    await delay(1500);
    assert.equal((await b!.acquire('k')).allowed, false, 'both holders renewed past their first ttl');
    assert.equal(await held[0]!.release(), true);
    assert.equal((await b!.acquire('k')).allowed, true);
  } finally {
    await Promise.all(stores.map((s) => s.close()));
    detach.forEach((d) => d());
    channels.forEach(({ port1, port2 }) => (port1.close(), port2.close()));
  }
});

test('slot operations with a missing owner, a bad ttl or limit fail one by one with typed codes; a good one beside them is decided', async () => {
  const { port1, port2 } = new MessageChannel();
  const detach = primary.attach(port1);
  const replies: { data: Record<string, unknown> }[] = [];
  port2.on('message', (m) => replies.push(m));
  await delay(10);
  const key = `slots${process.pid}`;
  port2.postMessage({
    type: 'process:msg',
    data: {
      floodgate: PROTOCOL_VERSION,
      t: 'batch',
      id: 7,
      p: [],
      o: [SLOT_CODE.acquire, -1, key, 2, SLOT_CODE.acquire, -1, key, 0, SLOT_CODE.renew, -1, key, 0, SLOT_CODE.acquire, -1, key, 2],
      // No triple for operation 0; a limit of 0 for 1; a ttl of -5 for 2; a good acquire at 3.
      s: [1, 'o1', 1000, 2, 'o2', -5, 3, 'o3', 1000],
    },
  });
  await delay(50);
  const result = replies.map((r) => r.data).find((d) => d.t === 'result' && d.id === 7)!;
  assert.deepEqual(
    (result.e as unknown[][]).map((e) => [e[0], e[1]]),
    [
      [0, ErrorCode.INVALID_OPTIONS],
      [1, ErrorCode.INVALID_LIMIT],
      [2, ErrorCode.INVALID_DURATION],
    ],
  );
  assert.deepEqual((result.r as number[]).slice(15, 17), [1, 1], 'the good acquire took the only slot in use');
  detach();
  port1.close();
  port2.close();
});
