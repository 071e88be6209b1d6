/** Composite decisions with shadow parts: a shadow part's refusal must not refuse, nor keep the enforced parts from spending. */
import type { Decision } from '../core/decision.js';
import { RateLimiter } from './rate-limiter.js';
import { shadowDecision } from './shadow.js';
import { combine, decisiveIndex, type CompositeDecision, type LimitPart } from './composite-decision.js';

/** True when some part's limiter is in shadow mode (checked before the parts are: a bad list goes on to prepare's errors). */
export function hasShadowPart(parts: readonly LimitPart[]): boolean {
  if (!Array.isArray(parts)) return false;
  for (const part of parts) if ((part as LimitPart | undefined)?.limiter instanceof RateLimiter && part.limiter.shadow) return true;
  return false;
}

/**
 * consumeAll with shadow parts. A shadow part never refuses, but the store
 * decides all or nothing: a composite refused by shadow parts alone is asked
 * again without them, so the enforced parts (and the shadow parts that
 * admit) spend as they would without the shadow ones. Each round drops at
 * least one part, so there are at most as many rounds as parts, and only
 * while shadow parts refuse.
 */
export async function consumeAllShadowed(
  parts: readonly LimitPart[],
  once: (parts: readonly LimitPart[]) => Promise<CompositeDecision>,
): Promise<CompositeDecision> {
  const out: (Decision | undefined)[] = new Array(parts.length);
  let live: number[] | undefined = parts.map((_, i) => i);
  while (live !== undefined) {
    const d = await once(live.map((i) => parts[i]!));
    live = afterShadowRefusal(parts, live, d, out);
  }
  return shadowCombined(out);
}

/**
 * Records a round's decisions (over the parts `live` names) in `out`, a
 * shadow part's refusal as its marked admission. Returns the parts to ask
 * again when only shadow parts refused, else undefined: the decision stands.
 */
function afterShadowRefusal(
  parts: readonly LimitPart[],
  live: readonly number[],
  d: CompositeDecision,
  out: (Decision | undefined)[],
): number[] | undefined {
  let onlyShadows = !d.allowed;
  for (let k = 0; k < live.length; k++) {
    const part = d.parts[k];
    if (part !== undefined && !part.allowed && !parts[live[k]!]!.limiter.shadow) onlyShadows = false;
  }
  const again: number[] = [];
  for (let k = 0; k < live.length; k++) {
    const i = live[k]!;
    const part = d.parts[k];
    if (part !== undefined && !part.allowed && parts[i]!.limiter.shadow) out[i] = shadowDecision(part);
    else if (onlyShadows) again.push(i);
    else out[i] = part;
  }
  // No shadow refusal to drop (a refusal no part carries): the decision stands as it is.
  if (onlyShadows && again.length === live.length) {
    for (let k = 0; k < live.length; k++) out[live[k]!] = d.parts[k];
    return undefined;
  }
  return onlyShadows && again.length > 0 ? again : undefined;
}

/** The composite of the parts' final decisions: admitted unless an enforced part refused; marked when a shadow part would have. */
function shadowCombined(out: readonly (Decision | undefined)[]): CompositeDecision {
  let allowed = true;
  let shadowLimited = false;
  for (const d of out) {
    if (d === undefined) continue;
    if (!d.allowed) allowed = false;
    if (d.shadowLimited === true) shadowLimited = true;
  }
  const combined = combine(out, allowed, decisiveIndex(out, allowed));
  return allowed && shadowLimited ? { ...combined, shadowLimited: true } : combined;
}

/**
 * consumeAllNow with shadow parts: the rounds of {@link consumeAllShadowed},
 * each decided synchronously by `now`; undefined as soon as one cannot be.
 */
export function consumeAllNowShadowed(
  parts: readonly LimitPart[],
  now: (parts: readonly LimitPart[]) => CompositeDecision | undefined,
): CompositeDecision | undefined {
  const out: (Decision | undefined)[] = new Array(parts.length);
  let live: number[] | undefined = parts.map((_, i) => i);
  while (live !== undefined) {
    const d = now(live.map((i) => parts[i]!));
    // Every earlier round was a refusal, which spent nothing: consumeAll can start over.
    if (d === undefined) return undefined;
    live = afterShadowRefusal(parts, live, d, out);
  }
  return shadowCombined(out);
}
