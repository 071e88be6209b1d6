// Helpers of the local-first tests (test/local-first/): waiting for the subscription, sleeping, polling, counting Redis commands.
import type { LocalFirstStore } from '../../src/stores/redis/index.js';

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
