/** A rate limit service descriptor's status, and what the code that counts a descriptor knows of it. */
/**
 * The status every answer is made of, in one object shape, from a limiter's decision or a checker's.
 */
import type { Decision, RateLimiter } from '../../index.js';
import { UNIT_SECONDS, type RlsMetadata, type RlsUnit } from './rls-config.js';
import type { RecentCounts } from './rls-recent.js';

/** How one descriptor ended, for `floodgate_rls_decisions_total`. */
export type RlsOutcome = 'ok' | 'over_limit' | 'shadow_over_limit' | 'unlimited' | 'no_limit' | 'store_error';

/** The status of one descriptor. */
export interface RlsStatus {
  /** OK or OVER_LIMIT (a shadow descriptor is always OK). */
  readonly code: 'OK' | 'OVER_LIMIT';
  /** The limit that applied; undefined when none did (no match, replaced, unlimited). */
  readonly limit?: { readonly requestsPerUnit: number; readonly unit: RlsUnit; readonly name: string | undefined } | undefined;
  /** Units left (0 when over; 4294967295 for an unlimited descriptor). */
  readonly remaining: number;
  /** ms until the window resets; undefined without a limit. */
  readonly resetMs?: number | undefined;
  /** The metric outcome. */
  readonly outcome: RlsOutcome;
  /** The metric's descriptor label: the limit's place in the tree, or with `detailed_metric` the full descriptor; '' without a limit. */
  readonly metricKey: string;
  /** The RateLimit field's policy name when names are exposed (the limit's `name`, else its place); undefined without a limit. */
  readonly policyName?: string | undefined;
  /** The `metadata` of the config entry whose limit applied, for the response's dynamic metadata; undefined without. */
  readonly metadata?: RlsMetadata | undefined;
}

/** What every status of one limit shares. */
export interface Shape {
  /** The limit as the answer reports it. */
  readonly limit: NonNullable<RlsStatus['limit']>;
  /** The metric label. */
  readonly metricKey: string;
  /** The RateLimit field's policy name. */
  readonly policyName: string;
  /** The config entry's `metadata`. */
  readonly metadata: RlsMetadata | undefined;
}

/** A descriptor that counts: its limiter, its counter key and its cost. */
export interface Counted {
  /** Its place in the request. */
  readonly index: number;
  /** The limiter of its limit. */
  readonly limiter: RateLimiter;
  /** The limiter's checker (see RlsLimiters.checkerOf), when this descriptor may need one; undefined otherwise or without one. */
  readonly checker: RateLimiter | undefined;
  /** Its counter's key. */
  readonly key: string;
  /** Its hits (0: check only). */
  readonly cost: number;
  /** Its limit's shape. */
  readonly shape: Shape;
  /** Its limit's unit. */
  readonly unit: RlsUnit;
  /** The aligned fixed window's end, ms from now; undefined for the other algorithms (the decision says). */
  readonly alignedResetMs: number | undefined;
  /** `shadow_mode`: counted on its own, always answered OK. */
  readonly shadow: boolean;
  /** A quota descriptor: counted on its own, as a shadow one is, but its refusal is reported (see decideRls). */
  readonly quota: boolean;
}

/** The remaining units of an unlimited descriptor, as envoyproxy/ratelimit reports them. */
export const MAX_UINT32 = 0xffff_ffff;

/** Statuses share one layout (every field, in one order), so the code that reads them sees one object shape. */
export function status(
  code: RlsStatus['code'],
  outcome: RlsOutcome,
  remaining: number,
  resetMs: number | undefined,
  shape: Shape | undefined,
  metricKey = shape?.metricKey ?? '',
): RlsStatus {
  return { code, limit: shape?.limit, remaining, resetMs, outcome, metricKey, policyName: shape?.policyName, metadata: shape?.metadata };
}

/** Over its limit: OVER_LIMIT, or OK for a shadow descriptor. */
export function over(shape: Shape, shadow: boolean, resetMs: number): RlsStatus {
  return shadow ? status('OK', 'shadow_over_limit', 0, resetMs, shape) : status('OVER_LIMIT', 'over_limit', 0, resetMs, shape);
}

/** When `c`'s window resets: the aligned window's end, else the decision's. */
export function resetOf(c: Counted, d: Pick<Decision, 'resetMs'>): number {
  return c.alignedResetMs ?? (Number.isFinite(d.resetMs) ? d.resetMs : UNIT_SECONDS[c.unit] * 1000);
}

/** The status of a limiter's decision for `c`. */
export function fromDecision(c: Counted, d: Decision): RlsStatus {
  if (!d.allowed) return over(c.shape, c.shadow, resetOf(c, d));
  return status('OK', 'ok', Math.min(MAX_UINT32, d.remaining), resetOf(c, d), c.shape);
}

/**
 * The status of a checker's decision for `c`: allowed while the count is at most the limit (the checker's limit is
 * one higher, so its remaining is one more than the limit's).
 */
export function fromChecker(c: Counted, d: Decision): RlsStatus {
  if (!d.allowed) return over(c.shape, c.shadow, resetOf(c, d));
  return status('OK', 'ok', Math.min(MAX_UINT32, Math.max(0, d.remaining - 1)), resetOf(c, d), c.shape);
}

/**
 * A part that spent nothing (looked at, or left out by another part's refusal): reported OK as it stands. Read in the
 * process when the store can (local-first from the lease held for the key's window, the memory store); else, given
 * `recent`, from the count last seen of it within a second (see rls-recent.ts); else by a peek, remembered in `recent`.
 * A request another descriptor's in-memory block refused must not cost a store call per part left out.
 */
export async function asItStands(c: Counted, recent?: RecentCounts): Promise<RlsStatus> {
  let d: Pick<Decision, 'allowed' | 'remaining' | 'resetMs'> | undefined = peekNow(c);
  if (d === undefined && recent !== undefined) {
    const seen = recent.recall(c.limiter.storeKey(c.key), Date.now());
    if (seen !== undefined) d = { allowed: true, remaining: seen.remaining, resetMs: seen.resetMs };
  }
  if (d === undefined) {
    d = await c.limiter.peek(c.key);
    recent?.remember(c.limiter.storeKey(c.key), d.allowed ? d.remaining : 0, d.resetMs, Date.now());
  }
  return status('OK', 'ok', d.allowed ? Math.min(MAX_UINT32, d.remaining) : 0, resetOf(c, d), c.shape);
}

/** Remembers in `recent` what `d` says `c`'s counter has left, unless its store can be read in the process anyway. */
export function rememberDecision(c: Counted, d: Decision, recent: RecentCounts | undefined): void {
  if (recent === undefined || c.limiter.store.applyNow !== undefined) return;
  recent.remember(c.limiter.storeKey(c.key), d.allowed ? d.remaining : 0, d.resetMs, Date.now());
}

/** `c`'s counter as the store sees it without a call (its applyNow), or undefined when the store must be asked. */
export function peekNow(c: Counted): Pick<Decision, 'allowed' | 'remaining' | 'resetMs'> | undefined {
  const { limiter } = c;
  const store = limiter.store;
  if (store.applyNow === undefined) return undefined;
  try {
    return store.applyNow({ kind: 'peek', key: limiter.storeKey(c.key), amount: 0, policy: limiter.policyFor(c.key) });
  } catch {
    // limiter.peek reports what went wrong, through the limiter's failure policy.
    return undefined;
  }
}
