// failureScope cases of the conformance suite: every target says how its store's calls fail (as one, or per Cluster master).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import type { RateLimiter, RateLimiterOptions, Store } from '../../src/index.js';
import { redisKeys } from '../../src/stores/redis/index.js';
import type { RedisCluster } from '../support/redis-server.js';

/**
 * How a target's store splits its failures (Store.failureScope), declared by every target and asserted by the cases below.
 * - `absent`: the store fails as one and has no failureScope (a limiter keeps one breaker).
 * - `shared`: the store fails as one and its failureScope gives every key the same scope.
 * - `per-master`: a Redis Cluster whose store knows the slot map: a key's scope is the `host:port` of the master serving
 *   its slot; `mastersOf` asks the Cluster itself (CLUSTER SLOTS, CLUSTER KEYSLOT), not the store's client.
 */
export type FailureScopeExpectation =
  | { readonly kind: 'absent' }
  | { readonly kind: 'shared' }
  | {
      readonly kind: 'per-master';
      /** Masters in the Cluster. */
      readonly masters: number;
      /** The `host:port` of the master serving each store key's slot, as the Cluster answers now. */
      mastersOf(storeKeys: readonly string[]): Promise<string[]>;
      /** SIGSTOPs the process serving the master `host:port` and returns its SIGCONT. */
      pause(master: string): () => void;
    };

/** The scopes of `keys` (undefined in place of the list: the store has no failureScope). */
export type ScopeReader = (keys: readonly string[]) => Promise<readonly (string | undefined)[] | undefined>;

/**
 * The `per-master` expectation for the fixture's Redis Cluster `cluster` (3 masters): each question opens one plain
 * connection to its first node, asks CLUSTER SLOTS and the CLUSTER KEYSLOT of each key's Redis state key, and closes it;
 * `pause` SIGSTOPs the process serving a master.
 */
export function clusterMasters(cluster: Pick<RedisCluster, 'nodes' | 'servers'>): FailureScopeExpectation {
  const node = cluster.nodes[0]!;
  return {
    kind: 'per-master',
    masters: 3,
    async mastersOf(storeKeys) {
      const redis = new Redis({ host: node.host, port: node.port, lazyConnect: true });
      try {
        await redis.connect();
        // Each range: [first slot, last slot, [master ip, master port, id, …], …replicas].
        const ranges = (await redis.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, ...unknown[]]][];
        const slots = await Promise.all(storeKeys.map((k) => redis.call('CLUSTER', 'KEYSLOT', redisKeys(k).state) as Promise<number>));
        return slots.map((slot) => {
          const range = ranges.find(([first, last]) => slot >= first && slot <= last);
          assert.ok(range, `CLUSTER SLOTS names no master for slot ${slot}`);
          return `${range[2][0]}:${range[2][1]}`;
        });
      } finally {
        redis.disconnect();
      }
    },
    pause(master) {
      const server = cluster.servers.find((s) => `${s.host}:${s.port}` === master);
      assert.ok(server, `no cluster process serves ${master}`);
      server.pause();
      return () => server.resume();
    },
  };
}

/** What the suite hands the failureScope cases. */
export interface FailureScopeContext {
  /** What the target declared. */
  expectation(): FailureScopeExpectation;
  /** The target's scopes, read from the store that really serves the calls. */
  scopes: ScopeReader;
  /** The store the suite's limiters are built on: it must show the same failureScope as the target's store. */
  limiterStore(): Store;
  /** The target's store. */
  store(): Store;
  /** A limiter on {@link limiterStore}, with a fresh prefix. */
  limiter(options: Omit<RateLimiterOptions, 'store'>): RateLimiter;
  /** Asynchronous store calls (apply, consumeAll) the suite's limiters made so far: those that may wait on Redis. */
  asks(): number;
}

/** 64 store keys, with braces (hash tags), colons and non-ASCII among them, as limiters make them. */
const KEYS = [
  ...Array.from({ length: 60 }, (_, i) => `fs:${process.pid}:k${i}`),
  `fs:${process.pid}:{tag}`,
  `fs:${process.pid}:}y{`,
  `fs:${process.pid}:ключ`,
  `fs:${process.pid}:${'x'.repeat(300)}`,
];

/** Registers the failureScope cases inside a conformance `describe`. */
export function failureScopeCases(ctx: FailureScopeContext): void {
  test('failureScope: a store that fails as one has no failureScope, or gives every key one scope, as its target declares', async (t) => {
    const expected = ctx.expectation();
    if (expected.kind === 'per-master') return t.skip('this target fails per Cluster master');
    const scopes = await ctx.scopes(KEYS);
    if (expected.kind === 'absent') {
      assert.equal(scopes, undefined, 'declared without failureScope');
    } else {
      assert.ok(scopes !== undefined, 'declared with one scope for every key');
      const distinct = new Set(scopes);
      assert.equal(distinct.size, 1, `one scope for every key; got ${[...distinct].join(', ')}`);
      assert.equal(typeof [...distinct][0], 'string');
    }
    assert.equal(ctx.limiterStore().failureScope === undefined, ctx.store().failureScope === undefined, 'limiters see the store as it is');
  });

  test('failureScope: on a Redis Cluster a key always gets the same scope, the host:port of the master CLUSTER SLOTS names for its slot', async (t) => {
    const expected = ctx.expectation();
    if (expected.kind !== 'per-master') return t.skip('this target fails as one');
    const scopes = await ctx.scopes(KEYS);
    assert.ok(scopes !== undefined, 'a store on a Redis Cluster has a failureScope');
    assert.deepEqual(await ctx.scopes(KEYS), scopes, 'the same key, the same scope');
    assert.deepEqual(scopes, await expected.mastersOf(KEYS));
    const limiterStore = ctx.limiterStore();
    assert.deepEqual(
      KEYS.map((k) => limiterStore.failureScope?.(k)),
      scopes,
      'limiters built on the store see the same scopes',
    );
  });

  test('failureScope: 64 keys on a Redis Cluster fall in one scope per master, every master among them', async (t) => {
    const expected = ctx.expectation();
    if (expected.kind !== 'per-master') return t.skip('this target fails as one');
    const scopes = (await ctx.scopes(KEYS)) ?? [];
    const distinct = new Set(scopes);
    assert.equal(distinct.size, expected.masters, `scopes seen: ${[...distinct].join(', ')}`);
    assert.deepEqual(distinct, new Set(await expected.mastersOf(KEYS)));
  });

  test("failureScope: a limiter on a Redis Cluster whose one master hangs sends only that master's keys to the fallback", async (t) => {
    const expected = ctx.expectation();
    if (expected.kind !== 'per-master') return t.skip('this target fails as one');
    // A cooldown the suite's ManualClock never reaches: an opened breaker stays open.
    const l = ctx.limiter({ limit: 100, window: '1m', onStoreFailure: 'fail-open', breaker: { failureThreshold: 1, cooldown: '1h' } });
    const keys = Array.from({ length: 32 }, (_, i) => `hang${i}`);
    const masters = await expected.mastersOf(keys.map((k) => l.storeKey(k)));
    // The master serving the most of them, so it has more than one.
    const count = (m: string): number => masters.filter((x) => x === m).length;
    const hung = masters.reduce((most, m) => (count(m) > count(most) ? m : most));
    const onHung = keys.filter((_, i) => masters[i] === hung);
    const elsewhere = keys.filter((_, i) => masters[i] !== hung);
    assert.ok(onHung.length > 1 && elsewhere.length > 0, `keys per master: ${masters.join(', ')}`);
    const resume = expected.pause(hung);
    try {
      assert.equal((await l.consume(onHung[0]!)).source, 'fail-open', "the store's timeout opens the hung master's breaker");
      const asks = ctx.asks();
      for (const k of onHung.slice(1)) assert.equal((await l.consume(k)).source, 'fail-open', k);
      assert.equal(ctx.asks(), asks, 'no call waits on the hung master while its breaker is open');
      for (const k of elsewhere) assert.equal((await l.consume(k)).source, 'store', `${k} is served by another master`);
      assert.equal(l.circuitOpen(), true);
    } finally {
      resume();
    }
  });
}
