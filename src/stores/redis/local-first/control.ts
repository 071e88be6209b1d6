/** LocalFirstStore's control operations (peek, reward, penalty, block, reset). */
/**
 * Applied by Redis, then broadcast and mirrored in the local entries; and a reservation's reward or penalty settled in
 * the lease instead.
 */
import { FloodgateError } from '../../../core/errors.js';
import { samePolicy, type Operation, type Outcome } from '../../../core/policy.js';
import { settleInLease } from '../../lease-core.js';
import type { LocalFirstHost } from './host.js';
import { forgetUsage, withLease } from './lease.js';

/** Applies `op` in Redis; a reset or block first stops this process spending what it leased, and every process hears of it. */
export function applyControl(host: LocalFirstHost, op: Operation): Promise<Outcome> {
  if (op.kind !== 'peek') return applyChange(host, op);
  // A peek (a composite's part another part refused, on every such request) changes nothing here: Redis's answer seen
  // with the lease in hand, without an async function's promise and turn around the call.
  try {
    return host.inner.apply(op).then((outcome) => {
      const t = host.readTime();
      if (t instanceof FloodgateError) throw t;
      const e = host.entries.get(op.key);
      return e === undefined ? outcome : withLease(outcome, e, t);
    });
  } catch (error) {
    return Promise.reject(error);
  }
}

/** {@link applyControl} of a reward, penalty, block or reset. */
async function applyChange(host: LocalFirstHost, op: Operation): Promise<Outcome> {
  // No unit leased before a reset or block is asked for is spent after it from here.
  const before = host.entries.get(op.key);
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

/**
 * A reservation's give-back or excess charge (`op`, a reward or penalty)
 * settled in the key's lease (see settleInLease), or undefined when Redis
 * must take it: no lease under this policy for the current window, a
 * blocked key (its lease went back), an excess the lease does not cover, or
 * a give-back while the subscription is down (`live` false: no surplus is
 * held then, since a block broadcast meanwhile would not be heard). An
 * excess the lease does not cover goes to Redis with the lease left as it
 * is, unless it is more than Redis had left at the last grant: then the
 * charge takes the key past its limit, and the lease goes back first, so
 * this process is refused too rather than spending units it leased before
 * (and the units returned lower the count, maybe back under the limit).
 */
export function settleLeased(host: LocalFirstHost, op: Operation, live: boolean): Outcome | undefined {
  const e = host.entries.get(op.key);
  if (e === undefined || (op.kind !== 'reward' && op.kind !== 'penalty') || op.policy.algorithm !== 'fixed-window') return undefined;
  if (e.policy === undefined || (e.policy !== op.policy && !samePolicy(e.policy, op.policy))) return undefined;
  const t = host.readTime();
  if (t instanceof FloodgateError || e.blockedUntil > t || (op.kind === 'reward' && !live)) return undefined;
  const outcome = settleInLease(e, op.kind, op.amount, t);
  if (outcome === undefined && op.kind === 'penalty' && e.units > 0 && op.amount > e.remote) host.giveBack(op.key, e);
  return outcome;
}
