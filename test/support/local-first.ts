// Helpers of the local-first tests (test/local-first/): live stores, waiting for the subscription or a broadcast, sleeping, polling, counting Redis commands.
import { Redis } from 'ioredis';
import type { RateLimiter } from '../../src/index.js';
import { LocalFirstStore } from '../../src/stores/redis/index.js';

/** Resolves after `ms`. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `check` every 10 ms until it is true, or throws after `ms`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** Waits until the store's pub/sub subscription is confirmed, so leases may hold a surplus. */
export function untilLive(store: LocalFirstStore, ms = 5000): Promise<void> {
  return until('the local-first subscription', () => store.stats().live, ms);
}

/**
 * A LocalFirstStore on its own ioredis client at `url` (its errors ignored), on `channel` unless `options` say otherwise, once its
 * subscription is live; hands `cleanup` what closes the store and then its client.
 */
export async function openLiveStore(
  url: string,
  channel: string,
  options: Partial<ConstructorParameters<typeof LocalFirstStore>[0]>,
  cleanup: (fn: () => unknown) => void,
): Promise<LocalFirstStore> {
  const client = new Redis(url);
  client.on('error', () => {});
  const s = new LocalFirstStore({ client, channel, ...options });
  cleanup(async () => {
    await s.close();
    client.disconnect();
  });
  await untilLive(s);
  return s;
}

/**
 * Polls until `limiter` (on `store`) refuses `key` without a lease call: the store has heard another store's broadcast that the
 * key is exhausted, and refuses it from memory.
 */
export function untilHeardExhausted(what: string, store: LocalFirstStore, limiter: RateLimiter, key = 'k'): Promise<void> {
  return until(what, async () => {
    const calls = store.stats().leaseCalls;
    return !(await limiter.consume(key)).allowed && store.stats().leaseCalls === calls;
  });
}

/** Sum of calls over INFO commandstats (script-internal commands included), without INFO and CONFIG themselves. */
export async function commandCount(admin: { info(section: string): Promise<string> }): Promise<number> {
  const info = await admin.info('commandstats');
  let total = 0;
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (m[1] === 'info' || m[1]!.startsWith('config')) continue;
    total += Number(m[2]);
  }
  return total;
}
