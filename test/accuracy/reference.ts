// The exact reference the accuracy suite checks admissions against: interval counts, the GCRA bound, and exact sliding-log and GCRA deciders.
//
// Time is whole milliseconds, as every clock in floodgate is. An "interval of
// length d" is the half-open [t, t+d): it holds the whole ms t, t+1, …, t+d−1,
// so two requests in it are at most d−1 ms apart. The trailing window a
// limiter sees at `now` is (now−W, now] = [now−W+1, now+1), one of them.

/** One admitted consume: its time in ms and the units it spent. */
export interface Admission {
  t: number;
  cost: number;
}

/** The most units admitted in one interval of a given length, and where it starts. */
export interface Peak {
  units: number;
  /** Start of the first interval holding `units` (the time of an admission). */
  start: number;
}

/**
 * The most units admitted in any interval [t, t+d). Admissions must be sorted
 * by time. A busiest interval can always be slid right until it starts on an
 * admission, so only those starts are tried: two pointers, O(n).
 */
export function maxInInterval(admitted: readonly Admission[], d: number): Peak {
  let best: Peak = { units: 0, start: admitted[0]?.t ?? 0 };
  let sum = 0;
  let j = 0;
  for (let i = 0; i < admitted.length; i++) {
    const start = admitted[i]!.t;
    while (j < admitted.length && admitted[j]!.t < start + d) sum += admitted[j++]!.cost;
    if (sum > best.units) best = { units: sum, start };
    sum -= admitted[i]!.cost;
  }
  return best;
}

/**
 * The average over-admission of a run: the mean, over every interval
 * [t, t+W) with whole-ms t in [0, end−W], of max(0, units − limit) ÷ limit.
 * Quiet stretches count as intervals within the limit, so this is "how far
 * over, on average, a window-length interval picked at random is".
 */
export function meanOvershoot(admitted: readonly Admission[], limit: number, windowMs: number, end: number): number {
  if (end < windowMs) return 0;
  const perMs = new Float64Array(end);
  for (const a of admitted) perMs[a.t]! += a.cost;
  let inWindow = 0;
  for (let t = 0; t < windowMs; t++) inWindow += perMs[t]!;
  let total = Math.max(0, inWindow - limit);
  for (let t = 1; t <= end - windowMs; t++) {
    inWindow += perMs[t + windowMs - 1]! - perMs[t - 1]!;
    total += Math.max(0, inWindow - limit);
  }
  return total / (end - windowMs + 1) / limit;
}

/*
 * The token bucket as GCRA, and the bound it guarantees.
 *
 * With emission interval T = W/L, GCRA keeps a theoretical arrival time TAT;
 * a consume of cost c at `now` computes TAT' = max(TAT, now) + c·T and is
 * admitted iff TAT' − now ≤ W (a full bucket is L units). Unrolling the
 * recursion over the admissions (a_1, c_1) … (a_k, c_k):
 *
 *   TAT_k = max over i ≤ k of ( a_i + T · (c_i + … + c_k) )
 *
 * so admitting k is the same as, for every earlier-or-equal admission i,
 *
 *   W · (c_i + … + c_k) ≤ L · (W + a_k − a_i)                      (★)
 *
 * i.e. "at most L units at once, plus L per W of elapsed time". (★) for every
 * pair is the exact guarantee; it is checked in O(n) below because its left
 * minus right side splits into g(k) − h(i) with a running minimum of h.
 * In an interval [t, t+d) the first and last admissions are ≤ d−1 ms apart,
 * hence at most L + ⌊(d−1)·L/W⌋ units (tokenBucketBound). It is reached: a
 * full bucket spent at t, then every unit the moment it refills. For d = W it
 * is 2L − ⌈L/W⌉: a token bucket promises a burst of L and a rate of L per W,
 * not L per sliding window.
 */

/** The most units a token bucket (GCRA) of `limit` per `windowMs` admits in any interval of `d` ≥ 1 ms. */
export function tokenBucketBound(limit: number, windowMs: number, d: number): number {
  return limit + Math.floor(((d - 1) * limit) / windowMs);
}

/** The worst pair of admissions against (★): `excess` ≤ 0 means the run conforms. */
export interface GcraCheck {
  /** max over i ≤ k of W·(c_i+…+c_k) − L·(W + a_k − a_i), in units of 1/W unit. */
  excess: number;
  /** Indexes of the admissions of the worst pair. */
  from: number;
  to: number;
}

/** Checks (★) for every pair of admissions, exactly, in integers. Admissions must be sorted by time. */
export function checkGcra(admitted: readonly Admission[], limit: number, windowMs: number): GcraCheck {
  // (★) ⇔ g(k) − h(i) ≤ L·W with g(k) = W·P_k − L·a_k and h(i) = W·P_{i−1} − L·a_i,
  // P_k being the units of admissions 1…k.
  let best: GcraCheck = { excess: -Infinity, from: 0, to: 0 };
  let prefix = 0;
  let minH = Infinity;
  let minAt = 0;
  for (let k = 0; k < admitted.length; k++) {
    const a = admitted[k]!;
    const h = windowMs * prefix - limit * a.t;
    if (h < minH) {
      minH = h;
      minAt = k;
    }
    prefix += a.cost;
    const excess = windowMs * prefix - limit * a.t - minH - limit * windowMs;
    if (excess > best.excess) best = { excess, from: minAt, to: k };
  }
  return best;
}

/** ⌈a / b⌉ for integers, b > 0, without trusting float division near integers. */
function ceilDiv(a: number, b: number): number {
  const q = Math.floor(a / b);
  return q * b < a ? q + 1 : q;
}

/**
 * The exact sliding log, written from its definition rather than from the
 * implementation: admit iff the units admitted in (now−W, now] plus `cost`
 * stay within the limit. Greedy is exact here: every interval [t, t+W) that
 * holds `now` also holds a subset of what (now−W, now] holds.
 */
export class ExactSlidingLog {
  private readonly log: Admission[] = [];
  private head = 0;
  private inWindow = 0;

  /** @param limit - units per window; @param windowMs - the window in ms */
  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
  ) {}

  private slide(now: number): void {
    while (this.head < this.log.length && this.log[this.head]!.t <= now - this.windowMs) this.inWindow -= this.log[this.head++]!.cost;
  }

  /** Whether `cost` units at `now` keep every window-length interval within the limit. */
  fits(now: number, cost: number): boolean {
    this.slide(now);
    return this.inWindow + cost <= this.limit;
  }

  /** Records an admission at `now` (times must not go back). */
  admit(now: number, cost: number): void {
    this.slide(now);
    this.log.push({ t: now, cost });
    this.inWindow += cost;
  }

  /** The first time ≥ now at which `cost` fits, if nothing else is admitted meanwhile. */
  earliest(now: number, cost: number): number {
    this.slide(now);
    // Walk back from the newest admission; the one that makes the kept units
    // exceed limit − cost must leave the window first.
    let kept = 0;
    for (let i = this.log.length - 1; i >= this.head; i--) {
      kept += this.log[i]!.cost;
      if (kept > this.limit - cost) return Math.max(now, this.log[i]!.t + this.windowMs);
    }
    return now;
  }
}

/** The exact GCRA decider: admit iff (★) holds for every pair ending at the new consume. */
export class ExactGcra {
  private units = 0;
  private minH = Infinity;

  /** @param limit - the bucket size; @param windowMs - time to refill the whole bucket, in ms */
  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
  ) {}

  /** Whether `cost` units at `now` satisfy (★) against every earlier admission. */
  fits(now: number, cost: number): boolean {
    const { limit: L, windowMs: W } = this;
    // The pair (new, new) needs cost ≤ L, which the limiter enforces on input.
    if (cost > L) return false;
    return this.minH === Infinity || W * (this.units + cost) - L * now - this.minH <= L * W;
  }

  /** Records an admission at `now`. */
  admit(now: number, cost: number): void {
    this.minH = Math.min(this.minH, this.windowMs * this.units - this.limit * now);
    this.units += cost;
  }

  /** The first time ≥ now at which `cost` fits, if nothing else is admitted meanwhile. */
  earliest(now: number, cost: number): number {
    if (this.minH === Infinity) return now;
    const { limit: L, windowMs: W } = this;
    // (★) for the worst i: L·t ≥ W·(P + cost) − L·W − min h.
    return Math.max(now, ceilDiv(W * (this.units + cost) - L * W - this.minH, L));
  }
}
