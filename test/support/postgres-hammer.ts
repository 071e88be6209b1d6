// Child process of the PostgreSQL accuracy test: on each phase, sets its store's clock to the phase's instant and fires many consumes per algorithm and composites at once, then reports how many each admitted.
import pg from 'pg';
import { consumeAll, RateLimiter, type Algorithm } from '../../src/index.js';
import { PostgresStore } from '../../src/stores/postgres/index.js';

/** The phase the parent sends: the clock's instant and how many calls of each kind to keep in flight. */
export interface HammerPhase {
  type: 'phase';
  now: number;
  count: number;
}

/** What a child answers per phase: units admitted per algorithm's hot key, and composites admitted. */
export interface HammerDone {
  type: 'done';
  admitted: Record<Algorithm, number>;
  composites: number;
}

/** The policies the children share, which the parent models: one per algorithm, and the composite's two parts. */
export interface HammerLimits {
  limit: number;
  windowMs: number;
  compositeLimit: number;
  compositeWindowMs: number;
}

const ALGORITHMS: readonly Algorithm[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket'];
const [url, prefix, limits] = process.argv.slice(2);
if (limits === undefined) throw new Error('usage: postgres-hammer.ts <postgres url> <prefix> <HammerLimits as JSON>');

let now = 0;
const clock = (): number => now;
const client = new pg.Pool({ connectionString: url!, max: 4 });
const store = new PostgresStore({ client, clock, timeoutMs: 10_000 });
const { limit, windowMs, compositeLimit, compositeWindowMs } = JSON.parse(limits) as HammerLimits;
const limiters = ALGORITHMS.map(
  (algorithm) => new RateLimiter({ store, clock, limit, window: `${windowMs}ms`, algorithm, prefix: `${prefix}:${algorithm}` }),
);
// A composite of a window and a bucket, on keys of their own.
const compositeWindow = new RateLimiter({ store, clock, limit: compositeLimit, window: `${compositeWindowMs}ms`, prefix: `${prefix}:cw` });
const compositeBucket = new RateLimiter({
  store,
  clock,
  limit: compositeLimit,
  window: `${compositeWindowMs}ms`,
  algorithm: 'token-bucket',
  prefix: `${prefix}:cb`,
});

process.on('message', (message: HammerPhase | { type: 'stop' }) => {
  if (message.type === 'stop') {
    void store.close().then(() => client.end().then(() => process.disconnect()));
    return;
  }
  now = message.now;
  void (async () => {
    const admitted = Object.fromEntries(ALGORITHMS.map((a) => [a, 0])) as Record<Algorithm, number>;
    let composites = 0;
    const calls: Promise<void>[] = [];
    for (let i = 0; i < message.count; i++) {
      limiters.forEach((l, a) => {
        calls.push(l.consume('hot').then((d) => void (d.allowed && admitted[ALGORITHMS[a]!]++)));
      });
      calls.push(
        consumeAll([
          { limiter: compositeWindow, key: 'k' },
          { limiter: compositeBucket, key: 'k' },
        ]).then((d) => void (d.allowed && composites++)),
      );
    }
    await Promise.all(calls);
    process.send!({ type: 'done', admitted, composites } satisfies HammerDone);
  })().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
});
process.send!({ type: 'ready' });
