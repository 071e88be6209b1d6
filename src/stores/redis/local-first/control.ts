/** LocalFirstStore's control operations (peek, reward, penalty, block, reset): applied by Redis, then broadcast and mirrored in the local entries. */
import { FloodgateError } from '../../../errors.js';
import type { Operation, Outcome } from '../../../policy.js';
import type { LocalFirstHost } from './host.js';
import { forgetUsage, withLease } from './lease.js';

/** Applies `op` in Redis; a reset or block first stops this process spending what it leased, and every process hears of it. */
export async function applyControl(host: LocalFirstHost, op: Operation): Promise<Outcome> {
  const before = host.entries.get(op.key);
  // No unit leased before a reset or block is asked for is spent after it from here.
  if (before && op.kind === 'reset') {
    forgetUsage(before);
  } else if (before && op.kind === 'block') {
    host.giveBack(op.key, before);
  }
  const outcome = await host.inner.apply(op);
  const t = host.readTime();
  if (t instanceof FloodgateError) throw t;
  const e = host.entries.get(op.key);
  switch (op.kind) {
    case 'reset':
      if (e) forgetUsage(e);
      host.publish('reset', 0, op.key);
      break;
    case 'reward':
      if (e) e.exhaustedUntil = 0;
      host.publish('available', 0, op.key);
      break;
    case 'block': {
      const entry = host.touch(op.key, t);
      entry.blockedUntil = outcome.retryAfterMs === Infinity ? Infinity : t + outcome.retryAfterMs;
      host.giveBack(op.key, entry);
      host.publish('blocked', op.amount, op.key);
      return outcome;
    }
    default:
      break;
  }
  return e === undefined ? outcome : withLease(outcome, e, t);
}
