/** One ShouldRateLimit decision: each descriptor's limit (matched, replaced, unlimited, shadow), the enforced ones decided all-or-nothing with consumeAll, and a status per descriptor. */
import { consumeAll, type LimitPart } from '../../composite.js';
import type { Decision } from '../../decision.js';
import { isStoreFailure } from '../../errors.js';
import type { RateLimiter } from '../../limiter.js';
import { UNIT_SECONDS, type RlsConfig, type RlsLimit, type RlsUnit } from './rls-config.js';
import type { RlsLimiters } from './rls-limiters.js';
import { matchDescriptor, type DescriptorEntry } from './rls-match.js';

/** One descriptor of a request, as read from the wire. */
export interface RlsDescriptorIn {
  /** Its entries. */
  readonly entries: readonly DescriptorEntry[];
  /** A limit Envoy chose for it (the route's `limit` override), replacing the config's. */
  readonly override?: { readonly requestsPerUnit: number; readonly unit: RlsUnit } | undefined;
  /** Its own hits_addend, when set (0: check without counting). */
  readonly hitsAddend?: number | undefined;
}

/** A request, as read from the wire. */
export interface RlsRequestIn {
  /** The domain. */
  readonly domain: string;
  /** The descriptors. */
  readonly descriptors: readonly RlsDescriptorIn[];
  /** The request's hits_addend (0 counts as 1). */
  readonly hitsAddend: number;
}

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
  /** The RateLimit field's policy name; undefined without a limit. */
  readonly policyName?: string | undefined;
}

/** The decision over a request. */
export interface RlsAnswer {
  /** OVER_LIMIT when any enforced descriptor is over. */
  readonly overall: 'OK' | 'OVER_LIMIT';
  /** One per descriptor, in order. */
  readonly statuses: readonly RlsStatus[];
}

/** A request the service cannot decide (no domain, no descriptors, an unreadable field): answered INVALID_ARGUMENT. */
export class RlsRequestError extends Error {}

/** Most descriptors in one request: each is a part of one composite decision. */
export const MAX_DESCRIPTORS = 64;
const MAX_UINT32 = 0xffff_ffff;

/** A descriptor that counts: its limiter, its counter key and its cost. */
interface Counted {
  readonly index: number;
  readonly limiter: RateLimiter;
  readonly key: string;
  readonly cost: number;
  readonly rpu: number;
  readonly unit: RlsUnit;
  /** The aligned fixed window's end, ms from now; undefined for the other algorithms (the decision says). */
  readonly alignedResetMs: number | undefined;
  readonly shadow: boolean;
  /** A quota descriptor: counted on its own, as a shadow one is, but its refusal is reported (see decideRls). */
  readonly quota: boolean;
  readonly name: string | undefined;
  readonly policyName: string;
  readonly metricKey: string;
}

/**
 * Decides `request` under `config`.
 * @throws RlsRequestError for a request without a domain or descriptors; a store error (FloodgateError) when the failure policy is `reject` and the store failed
 */
export async function decideRls(config: RlsConfig, limiters: RlsLimiters, request: RlsRequestIn, nowMs = Date.now()): Promise<RlsAnswer> {
  if (request.domain === '') throw new RlsRequestError('rate limit domain must not be empty');
  if (request.descriptors.length === 0) throw new RlsRequestError('rate limit descriptor list must not be empty');
  if (request.descriptors.length > MAX_DESCRIPTORS) throw new RlsRequestError(`at most ${MAX_DESCRIPTORS} descriptors per request`);
  const statuses: RlsStatus[] = new Array(request.descriptors.length);
  const quotaAt = new Set<number>();
  const counted = plan(config, limiters, request, nowMs, statuses, quotaAt);
  const enforced = counted.filter((c) => !c.shadow && !c.quota);
  const apart = counted.filter((c) => c.shadow || c.quota);
  await Promise.all([decideEnforced(enforced, statuses), ...apart.map((c) => decideShadow(c, statuses))]);
  // As envoyproxy/ratelimit decides: over when a plain descriptor is over, or when every quota descriptor is.
  let quotas = 0;
  let quotasOver = 0;
  let over = false;
  statuses.forEach((s, i) => {
    if (quotaAt.has(i)) {
      quotas++;
      if (s.code === 'OVER_LIMIT') quotasOver++;
    } else if (s.code === 'OVER_LIMIT') over = true;
  });
  const overall = over || (quotas > 0 && quotas === quotasOver) ? 'OVER_LIMIT' : 'OK';
  return { overall, statuses };
}

function plan(
  config: RlsConfig,
  limiters: RlsLimiters,
  request: RlsRequestIn,
  nowMs: number,
  statuses: RlsStatus[],
  quotaAt: Set<number>,
): Counted[] {
  const { domain } = request;
  const matched = request.descriptors.map((d) => {
    // A descriptor without entries matches no limit, as there.
    if (d.entries.length === 0) return undefined;
    if (d.override !== undefined) {
      const counter = d.entries.map((e) => `${e.key}_${e.value}`).join('.');
      // Envoy's own limit: never in shadow mode, named by the descriptor.
      const limit: RlsLimit = {
        fullKey: `${domain}.${counter}`,
        domain,
        requestsPerUnit: d.override.requestsPerUnit,
        unit: d.override.unit,
        unlimited: false,
        name: undefined,
        replaces: [],
        shadow: false,
        quota: false,
        detailedMetric: false,
        algorithm: 'fixed-window',
      };
      return { limit, counter, detailed: counter, override: true };
    }
    const m = matchDescriptor(config, domain, d.entries);
    return m === undefined ? undefined : { ...m, override: false };
  });
  const replaced = new Set<string>();
  for (const m of matched) for (const name of m?.limit.replaces ?? []) replaced.add(name);
  const out: Counted[] = [];
  const nowS = Math.floor(nowMs / 1000);
  for (const [i, m] of matched.entries()) {
    const limit = m?.limit;
    if (m === undefined || limit === undefined || (limit.name !== undefined && replaced.has(limit.name) && !limit.unlimited)) {
      statuses[i] = { code: 'OK', remaining: 0, outcome: 'no_limit', metricKey: '' };
      continue;
    }
    const metricKey = limit.detailedMetric ? m.detailed : limit.fullKey.slice(domain.length + 1);
    if (limit.quota && !limit.unlimited) quotaAt.add(i);
    if (limit.unlimited) {
      statuses[i] = { code: 'OK', remaining: MAX_UINT32, outcome: 'unlimited', metricKey };
      continue;
    }
    const unit = limit.unit!;
    const d = request.descriptors[i]!;
    const cost = d.hitsAddend ?? Math.max(1, request.hitsAddend);
    const unitS = UNIT_SECONDS[unit];
    const aligned = limit.algorithm === 'fixed-window';
    // envoyproxy/ratelimit's windows start when the clock is a multiple of the unit: the window's start is part of the key.
    const key = aligned ? `${m.counter}:${Math.floor(nowS / unitS) * unitS}` : m.counter;
    const alignedResetMs = aligned ? (unitS - (nowS % unitS)) * 1000 : undefined;
    const policyName = limit.name ?? limit.fullKey;
    const shape = { limit: { requestsPerUnit: limit.requestsPerUnit, unit, name: limit.name }, metricKey, policyName };
    if (limit.requestsPerUnit === 0 || cost > limit.requestsPerUnit) {
      // Nothing fits: over without asking the store, as every count there would be.
      statuses[i] = over(shape, limit.shadow, alignedResetMs ?? UNIT_SECONDS[unit] * 1000);
      continue;
    }
    const limiter = m.override
      ? limiters.forOverride(domain, { requestsPerUnit: limit.requestsPerUnit, unit, algorithm: 'fixed-window' })
      : limiters.forLimit(limit);
    out.push({
      index: i,
      limiter,
      key,
      cost,
      rpu: limit.requestsPerUnit,
      unit,
      alignedResetMs,
      shadow: limit.shadow,
      quota: limit.quota,
      name: limit.name,
      policyName,
      metricKey,
    });
  }
  return out;
}

type Shape = Pick<RlsStatus, 'limit' | 'metricKey' | 'policyName'>;

function over(shape: Shape, shadow: boolean, resetMs: number): RlsStatus {
  return { ...shape, code: shadow ? 'OK' : 'OVER_LIMIT', remaining: 0, resetMs, outcome: shadow ? 'shadow_over_limit' : 'over_limit' };
}

function shapeOf(c: Counted): Shape {
  return { limit: { requestsPerUnit: c.rpu, unit: c.unit, name: c.name }, metricKey: c.metricKey, policyName: c.policyName };
}

function fromDecision(c: Counted, d: Decision): RlsStatus {
  const resetMs = c.alignedResetMs ?? (Number.isFinite(d.resetMs) ? d.resetMs : UNIT_SECONDS[c.unit] * 1000);
  if (!d.allowed) return over(shapeOf(c), c.shadow, resetMs);
  return { ...shapeOf(c), code: 'OK', remaining: Math.min(MAX_UINT32, d.remaining), resetMs, outcome: 'ok' };
}

/** Enforced descriptors: all of them admitted and counted, or none counted. */
async function decideEnforced(counted: readonly Counted[], statuses: RlsStatus[]): Promise<void> {
  if (counted.length === 0) return;
  // A descriptor over without a store call refuses the request: the others are only looked at, as a refused composite spends nothing.
  const alreadyOver = statuses.some((s) => s?.outcome === 'over_limit');
  // hits_addend 0 checks without counting: those parts are only looked at.
  const checks = counted.filter((c) => c.cost === 0 || alreadyOver);
  const spends = alreadyOver ? [] : counted.filter((c) => c.cost > 0);
  for (const c of checks) statuses[c.index] = { ...fromDecision(c, await c.limiter.peek(c.key)), code: 'OK', outcome: 'ok' };
  if (spends.length === 0) return;
  // One counter named twice in a request counts both costs in one part (consumeAll refuses a counter named twice).
  const merged = new Map<string, { part: LimitPart & { cost: number }; members: Counted[] }>();
  for (const c of spends) {
    const id = `${c.limiter.prefix}\u0000${c.key}`;
    const entry = merged.get(id);
    if (entry === undefined) merged.set(id, { part: { limiter: c.limiter, key: c.key, cost: c.cost }, members: [c] });
    else {
      entry.part.cost += c.cost;
      entry.members.push(c);
    }
  }
  const groups = [...merged.values()];
  const tooBig = groups.find((g) => g.part.cost > g.members[0]!.rpu);
  if (tooBig !== undefined) {
    for (const g of groups) {
      for (const c of g.members)
        statuses[c.index] =
          g === tooBig
            ? over(shapeOf(c), false, c.alignedResetMs ?? UNIT_SECONDS[c.unit] * 1000)
            : { ...fromDecision(c, await c.limiter.peek(c.key)), code: 'OK', outcome: 'ok' };
    }
    return;
  }
  const decision = await consumeAll(groups.map((g) => g.part));
  for (const [i, g] of groups.entries()) {
    const d = decision.parts[i];
    for (const c of g.members) {
      // A part another part's refusal left unconsulted spent nothing: it is reported as it stands.
      statuses[c.index] =
        d === undefined ? { ...fromDecision(c, await c.limiter.peek(c.key)), code: 'OK', outcome: 'ok' } : fromDecision(c, d);
    }
  }
}

/** A shadow or quota descriptor counts on its own: its refusal must not keep the enforced ones from counting. */
async function decideShadow(c: Counted, statuses: RlsStatus[]): Promise<void> {
  try {
    const d = c.cost === 0 ? await c.limiter.peek(c.key) : await c.limiter.consume(c.key, c.cost);
    statuses[c.index] = fromDecision(c, d);
  } catch (error) {
    if (!isStoreFailure(error)) throw error;
    // A shadow descriptor never refuses: a store that failed under it leaves the answer OK.
    statuses[c.index] = { ...shapeOf(c), code: 'OK', remaining: 0, resetMs: c.alignedResetMs, outcome: 'store_error' };
  }
}
