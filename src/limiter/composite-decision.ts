/** The types of a composite decision (parts in, decision out) and how the parts' decisions combine into one. */
import type { Decision } from '../core/decision.js';
import type { RateLimiter } from './rate-limiter.js';

/** One part of a composite decision: a limiter (its policy, prefix and guards), the key it limits, and the cost there. */
export interface LimitPart {
  /** The limiter whose policy decides this part. Every part's limiter must use the same store. */
  readonly limiter: RateLimiter;
  /** The key, as it would be passed to `limiter.consume`. */
  readonly key: string;
  /** Units to spend on this part. Default 1. */
  readonly cost?: number;
}

/**
 * The decision over every part. Its own fields are those of the part that
 * decides: when refused, the refusing part that frees up last (so
 * `retryAfterMs` is when a retry could pass every part); when admitted, the
 * part with the fewest units left.
 */
export interface CompositeDecision extends Decision {
  /**
   * One decision per part, in order. When the composite was refused, a part
   * whose `allowed` is true was not the reason, and spent nothing. Undefined
   * for a part that was not consulted: the in-memory block refused another
   * part before the store was asked.
   */
  readonly parts: readonly (Decision | undefined)[];
  /** Index of the part whose numbers this decision's own fields carry. */
  readonly decisive: number;
}

/** The refusing part that frees up last, or (admitted) the part with the fewest units left. */
export function decisiveIndex(parts: readonly (Decision | undefined)[], allowed: boolean): number {
  let best = -1;
  for (let i = 0; i < parts.length; i++) {
    const d = parts[i];
    if (d === undefined || (!allowed && d.allowed)) continue;
    const b = best < 0 ? undefined : parts[best]!;
    if (b === undefined || (allowed ? d.remaining < b.remaining : d.retryAfterMs > b.retryAfterMs)) best = i;
  }
  return best < 0 ? 0 : best;
}

/** The composite decision of `parts`, its own fields those of part `decisive`. */
export function combine(parts: readonly (Decision | undefined)[], allowed: boolean, decisive: number): CompositeDecision {
  const d = parts[decisive]!;
  return {
    allowed,
    limit: d.limit,
    windowMs: d.windowMs,
    remaining: d.remaining,
    resetMs: d.resetMs,
    retryAfterMs: allowed ? 0 : d.retryAfterMs,
    source: d.source,
    parts,
    decisive,
  };
}
