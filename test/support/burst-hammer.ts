// Child process of the burst accuracy test: consumes from one token bucket with a burst on a real Redis or PostgreSQL in the phases it is told, then reports the time of every admitted unit.
/**
 * The store carries this process's clock with every operation (the store's `clock`), so the time
 * each decision was made at is known exactly and recorded; every child reads the same system clock.
 */
import { Redis } from 'ioredis';
import pg from 'pg';
import { RateLimiter, type Operation, type Outcome, type Store } from '../../src/index.js';
import { PostgresStore } from '../../src/stores/postgres/index.js';
import { RedisStore } from '../../src/stores/redis/index.js';

/** What a child reports once its phases are over. */
export interface BurstReport {
  type: 'report';
  /** The time (ms) each admitted unit was decided at. */
  admitted: number[];
  refused: number;
}

/** Consumes kept in flight during a phase. */
const IN_FLIGHT = 4;

const [url, prefix, limit, window, burst, initialTokens] = process.argv.slice(2);
if (initialTokens === undefined) {
  throw new Error('usage: burst-hammer.ts <redis:// or postgres:// url> <prefix> <limit> <window> <burst> <initialTokens>');
}

let lastTime = 0;
const clock = (): number => {
  lastTime = Date.now();
  return lastTime;
};
// Its own connection (a pool of 4 on PostgreSQL) per process, as separate app servers would have.
const postgres = url!.startsWith('postgres://');
const client = postgres ? new pg.Pool({ connectionString: url!, max: 4 }) : new Redis(url!);
const realStore: Store =
  client instanceof Redis ? new RedisStore({ client, clock }) : new PostgresStore({ client, clock, timeoutMs: 5000 });
const admitted: number[] = [];
let refused = 0;
// The real store, with each consume's time taken as the store read it (apply reads its clock at once).
const store = new Proxy(realStore, {
  get(target, property) {
    if (property === 'apply') {
      return (operation: Operation): Promise<Outcome> => {
        const answer = target.apply(operation);
        const at = lastTime;
        return answer.then((outcome) => {
          if (operation.kind === 'consume') {
            if (outcome.allowed) for (let i = 0; i < operation.amount; i++) admitted.push(at);
            else refused++;
          }
          return outcome;
        });
      };
    }
    const value: unknown = Reflect.get(target, property, target);
    return typeof value === 'function' ? value.bind(target) : value;
  },
});
const limiter = new RateLimiter({
  store,
  prefix: prefix!,
  algorithm: 'token-bucket',
  limit: Number(limit),
  window: Number(window),
  burst: Number(burst),
  initialTokens: Number(initialTokens),
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Keeps IN_FLIGHT consumes of the shared key going until `end` (wall ms). */
async function hammer(end: number): Promise<void> {
  const lane = async () => {
    while (Date.now() < end) {
      const d = await limiter.consume('hot');
      // A refused lane comes back soon, not at once: 8 processes share 2 cores with Redis.
      if (!d.allowed) await sleep(Math.min(5, Math.max(1, d.retryAfterMs)));
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
}

process.on('message', (message: { type?: string; start?: number; phases?: [number, number][] }) => {
  if (message?.type !== 'go') return;
  void (async () => {
    for (const [from, to] of message.phases!) {
      const wait = message.start! + from - Date.now();
      if (wait > 0) await sleep(wait);
      await hammer(message.start! + to);
    }
    await realStore.close!();
    if (client instanceof Redis) client.disconnect();
    else await client.end();
    process.send!({ type: 'report', admitted, refused } satisfies BurstReport, () => process.disconnect());
  })();
});
// Ready once the store has answered a first call (on another key): PostgresStore makes its schema at first use, under
// an advisory lock the 8 processes take in turn, and that must not eat into the first phase's second.
void limiter.peek(`warm-up:${process.pid}`).then(() => process.send!({ type: 'ready' }));
