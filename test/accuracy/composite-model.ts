// The composite accuracy test's shared limits and its exact model: what each part's state must be after a phase, from the units the processes report admitted, and the comparison with the store's state.

/** The limits every process and the model share. */
export const COMPOSITE_LIMITS = {
  /** Per-user fixed window, shorter than the org's, so windows of different lengths overlap. */
  userWindow: { limit: 10, windowMs: 2000, prefix: 'cu' },
  /** Per-organisation fixed window, shared by the organisation's users: less than its users' sum (6 × 10 per 2 s), so it binds. */
  orgWindow: { limit: 60, windowMs: 5000, prefix: 'co' },
  /** Per-user token bucket: 8 a second, bursts of 8. */
  userBucket: { limit: 8, windowMs: 1000, prefix: 'cb' },
} as const;

/** Organisations, and users per organisation. */
export const ORGS = 4;
export const USERS_PER_ORG = 6;
export const USERS = ORGS * USERS_PER_ORG;

/** The part order of every composite. */
export const PART_NAMES = ['user window', 'org window', 'user bucket'] as const;

/** The key of user `u` (0-based over every org); its org's key is the common hash tag, so one composite stays in one slot. */
export function userKey(u: number): string {
  return `{o${orgOf(u)}}:u${u % USERS_PER_ORG}`;
}

/** The key of organisation `o`. */
export function orgKey(o: number): string {
  return `{o${o}}`;
}

/** The organisation of user `u`. */
export function orgOf(u: number): number {
  return Math.floor(u / USERS_PER_ORG);
}

/** Parent → child: decide `count` composites at time `now`, all in flight at once. */
export interface PhaseMessage {
  type: 'phase';
  now: number;
  count: number;
}

/** One composite's result as a child saw it. */
export interface CompositeResult {
  user: number;
  cost: number;
  allowed: boolean;
  decisive: number;
  /** Each part's `remaining` as decided (after spending, when admitted). */
  remaining: number[];
}

/** Child → parent. */
export type ChildMessage = { type: 'ready' } | { type: 'done'; results: CompositeResult[] } | { type: 'error'; message: string };

/** A fixed window as the Lua keeps it: `c` units used, `r` the window's end. */
export interface WindowState {
  c: number;
  r: number;
}

/** A token bucket as the Lua keeps it (GCRA): arrival time `m` + `r`/limit ms. */
export interface BucketState {
  m: number;
  r: number;
}

/** A bucket as a peek shows it: whole units left and ms until full. */
export interface BucketView {
  remaining: number;
  resetMs: number;
}

/**
 * What the store holds for every part, as read back after a phase;
 * undefined where the key has no state. Redis is read raw (`buckets`); a
 * store read through peeks gives each bucket's view (`bucketViews`), exact
 * to the ms rather than to the 1/limit ms.
 */
export interface StoredState {
  userWindows: (WindowState | undefined)[];
  orgWindows: (WindowState | undefined)[];
  buckets?: (BucketState | undefined)[];
  bucketViews?: BucketView[];
}

/** The window a peek's numbers describe (fixed window: remaining = limit − c, resetMs = r − now while c > 0). */
export function windowFromPeek(remaining: number, resetMs: number, limit: number, now: number): WindowState | undefined {
  return remaining < limit ? { c: limit - remaining, r: now + resetMs } : undefined;
}

/** What a peek of a bucket with `debt` shows (src/algorithms/token-bucket.ts). */
export function bucketView(debt: number): BucketView {
  const { limit, windowMs } = COMPOSITE_LIMITS.userBucket;
  return { remaining: Math.max(0, Math.floor((windowMs * limit - debt) / windowMs)), resetMs: Math.ceil(debt / limit) };
}

/** Debt of a bucket at `now`, in 1/limit ms (src/algorithms/token-bucket.ts): 0 = full. */
export function bucketDebt(state: BucketState | undefined, now: number): number {
  if (state === undefined) return 0;
  return Math.max(0, (state.m - now) * COMPOSITE_LIMITS.userBucket.limit + state.r);
}

/** Whether a window counts at `now`. */
function live(state: WindowState | undefined, now: number): state is WindowState {
  return state !== undefined && now < state.r;
}

/**
 * Every part's state, advanced phase by phase. Each phase's composites are
 * all decided at one instant, so a part's state after the phase depends on
 * its state before, that instant, and the units admitted on it in the phase
 * — not on the order in which the store ran them. The model therefore knows
 * the exact state after each phase from the processes' reports alone.
 */
export class CompositeModel {
  readonly userWindows: (WindowState | undefined)[] = new Array<WindowState | undefined>(USERS).fill(undefined);
  readonly orgWindows: (WindowState | undefined)[] = new Array<WindowState | undefined>(ORGS).fill(undefined);
  readonly buckets: (BucketState | undefined)[] = new Array<BucketState | undefined>(USERS).fill(undefined);
  /** Every window (user and org, by its end) whose stored count was compared with the admitted units. */
  readonly windowsChecked = new Set<string>();
  /** Comparisons of one part's stored state with the model's. */
  comparisons = 0;

  /**
   * Applies one phase's admitted units and returns every violation: a part
   * over its limit, two admitted composites that saw the same count (not
   * serial), or a stored state other than the model's.
   */
  phase(now: number, results: readonly CompositeResult[], stored: StoredState): string[] {
    const problems: string[] = [];
    const byUser = new Array<number>(USERS).fill(0);
    const byOrg = new Array<number>(ORGS).fill(0);
    for (const r of results) {
      if (!r.allowed) continue;
      byUser[r.user]! += r.cost;
      byOrg[orgOf(r.user)]! += r.cost;
    }
    const { userWindow, orgWindow, userBucket } = COMPOSITE_LIMITS;
    for (let u = 0; u < USERS; u++) {
      this.userWindows[u] = this.spend(this.userWindows[u], byUser[u]!, now, userWindow.windowMs);
      const debt = bucketDebt(this.buckets[u], now) + byUser[u]! * userBucket.windowMs;
      if (byUser[u]! > 0) {
        this.buckets[u] = { m: now + Math.floor(debt / userBucket.limit), r: debt % userBucket.limit };
        if (debt > userBucket.windowMs * userBucket.limit)
          problems.push(`user ${userKey(u)} bucket over its limit at ${now}: debt ${debt} > ${userBucket.windowMs * userBucket.limit}`);
      }
    }
    for (let o = 0; o < ORGS; o++) this.orgWindows[o] = this.spend(this.orgWindows[o], byOrg[o]!, now, orgWindow.windowMs);
    for (const [name, windows, limit] of [
      ['user', this.userWindows, userWindow.limit],
      ['org', this.orgWindows, orgWindow.limit],
    ] as const) {
      windows.forEach((w, i) => {
        if (w !== undefined && w.c > limit) problems.push(`${name} ${i} window ending ${w.r} over its limit: ${w.c} > ${limit}`);
      });
    }
    problems.push(...serial(results), ...this.compare(now, stored));
    return problems;
  }

  private spend(state: WindowState | undefined, units: number, now: number, windowMs: number): WindowState | undefined {
    if (units === 0) return state;
    return live(state, now) ? { c: state.c + units, r: state.r } : { c: units, r: now + windowMs };
  }

  private compare(now: number, stored: StoredState): string[] {
    const problems: string[] = [];
    const windows = (name: string, model: (WindowState | undefined)[], store: (WindowState | undefined)[]): void => {
      model.forEach((m, i) => {
        const s = store[i];
        this.comparisons++;
        if (live(m, now)) {
          this.windowsChecked.add(`${name} ${i} ${m.r}`);
          if (s?.c !== m.c || s.r !== m.r)
            problems.push(`${name} ${i} at ${now}: the store holds ${JSON.stringify(s)}, the admitted units make ${JSON.stringify(m)}`);
        } else if (live(s, now)) {
          problems.push(`${name} ${i} at ${now}: the store holds a live window ${JSON.stringify(s)} nobody was admitted in`);
        }
      });
    };
    windows('user window', this.userWindows, stored.userWindows);
    windows('org window', this.orgWindows, stored.orgWindows);
    this.buckets.forEach((m, u) => {
      this.comparisons++;
      const expected = bucketDebt(m, now);
      if (stored.buckets) {
        const actual = bucketDebt(stored.buckets[u], now);
        if (expected !== actual)
          problems.push(`user bucket ${u} at ${now}: the store's debt is ${actual}, the admitted units make ${expected}`);
      } else {
        const view = bucketView(expected);
        const actual = stored.bucketViews?.[u];
        if (actual?.remaining !== view.remaining || actual.resetMs !== view.resetMs)
          problems.push(
            `user bucket ${u} at ${now}: the store shows ${JSON.stringify(actual)}, the admitted units make ${JSON.stringify(view)}`,
          );
      }
    });
    return problems;
  }
}

/**
 * Within one phase (one instant), the composites admitted on one window key
 * ran one after another, so each saw a different count: their `remaining`
 * values differ. Two equal ones would mean two composites both spent from
 * the same count.
 */
function serial(results: readonly CompositeResult[]): string[] {
  const seen = new Map<string, number>();
  const problems: string[] = [];
  for (const r of results) {
    if (!r.allowed) continue;
    for (const [part, key] of [
      [0, userKey(r.user)],
      [1, orgKey(orgOf(r.user))],
    ] as const) {
      const id = `${PART_NAMES[part]} ${key} remaining ${r.remaining[part]}`;
      seen.set(id, (seen.get(id) ?? 0) + 1);
      if (seen.get(id) === 2) problems.push(`two admitted composites saw the same count: ${id}`);
    }
  }
  return problems;
}
