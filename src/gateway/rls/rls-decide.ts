/** One ShouldRateLimit decision. */
/**
 * Each descriptor's limit (matched, replaced, unlimited, shadow), the enforced ones decided all-or-nothing with
 * consumeAll, and a status per descriptor.
 */
import { consumeAll, type LimitPart, type Decision, isStoreFailure, type RateLimiter } from '../../index.js';
import { boundKey } from '../../http/index.js';
import { MAX_KEY_BYTES } from '../rules/compile-rules.js';
import { UNIT_SECONDS, type RlsConfig, type RlsLimit, type RlsUnit } from './rls-config.js';
import type { RlsLimiters } from './rls-limiters.js';
import { descriptorName, matchDescriptor, type DescriptorEntry } from './rls-match.js';

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
  readonly shape: Shape;
  readonly unit: RlsUnit;
  /** The aligned fixed window's end, ms from now; undefined for the other algorithms (the decision says). */
  readonly alignedResetMs: number | undefined;
  readonly shadow: boolean;
  /** A quota descriptor: counted on its own, as a shadow one is, but its refusal is reported (see decideRls). */
  readonly quota: boolean;
}

/** What every status of one limit shares. */
interface Shape {
  readonly limit: NonNullable<RlsStatus['limit']>;
  readonly metricKey: string;
  readonly policyName: string;
}

/** Statuses share one layout (every field, in one order), so the code that reads them sees one object shape. */
function status(
  code: RlsStatus['code'],
  outcome: RlsOutcome,
  remaining: number,
  resetMs: number | undefined,
  shape: Shape | undefined,
  metricKey = shape?.metricKey ?? '',
): RlsStatus {
  return { code, limit: shape?.limit, remaining, resetMs, outcome, metricKey, policyName: shape?.policyName };
}

/** A configured limit's shape with its metric label, worked out once per limit and domain rather than per request. */
const shapes = new WeakMap<RlsLimit, Shape>();

function shapeOf(limit: RlsLimit, unit: RlsUnit, metricKey: string, cache: boolean): Shape {
  let shape = cache ? shapes.get(limit) : undefined;
  if (shape === undefined) {
    shape = {
      limit: { requestsPerUnit: limit.requestsPerUnit, unit, name: limit.name },
      metricKey,
      policyName: limit.name ?? limit.fullKey,
    };
    if (cache) shapes.set(limit, shape);
  }
  return shape;
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
  const quotaAt: boolean[] = [];
  const counted = plan(config, limiters, request, nowMs, statuses, quotaAt);
  let enforced: Counted[] = counted;
  let apart: Counted[] | undefined;
  if (counted.some((c) => c.shadow || c.quota)) {
    enforced = counted.filter((c) => !c.shadow && !c.quota);
    apart = counted.filter((c) => c.shadow || c.quota);
  }
  if (apart === undefined) await decideEnforced(enforced, statuses);
  else await Promise.all([decideEnforced(enforced, statuses), ...apart.map((c) => decideShadow(c, statuses))]);
  // As envoyproxy/ratelimit decides: over when a plain descriptor is over, or when every quota descriptor is.
  let quotas = 0;
  let quotasOver = 0;
  let over = false;
  for (let i = 0; i < statuses.length; i++) {
    const s = statuses[i]!;
    if (quotaAt[i] === true) {
      quotas++;
      if (s.code === 'OVER_LIMIT') quotasOver++;
    } else if (s.code === 'OVER_LIMIT') over = true;
  }
  const overall = over || (quotas > 0 && quotas === quotasOver) ? 'OVER_LIMIT' : 'OK';
  return { overall, statuses };
}

/** A descriptor's match: its limit, its counter's name, and whether Envoy sent the limit. */
interface Matched {
  readonly limit: RlsLimit;
  readonly counter: string;
  readonly override: boolean;
}

/**
 * An override's place for metrics and its RateLimit field's name: the config
 * entry the descriptor reaches, else its entries' keys (from Envoy's route
 * actions), never the values a client chose, so a flood of values adds no
 * series and no long header.
 */
function overridePlace(config: RlsConfig, domain: string, entries: RlsDescriptorIn['entries']): string {
  const reached = matchDescriptor(config, domain, entries);
  if (reached !== undefined) return reached.limit.fullKey.slice(domain.length + 1);
  return boundKey(entries.map((e) => e.key).join('.'), MAX_KEY_BYTES);
}

function matchAll(config: RlsConfig, request: RlsRequestIn): Array<Matched | undefined> {
  const { domain } = request;
  // A domain the config does not have limits nothing, Envoy's own limits included, as there.
  if (!config.domains.has(domain)) return request.descriptors.map(() => undefined);
  return request.descriptors.map((d): Matched | undefined => {
    // A descriptor without entries matches no limit, as there.
    if (d.entries.length === 0) return undefined;
    if (d.override !== undefined) {
      // Kept in the store under at most MAX_KEY_BYTES, as the HTTP rules' keys are: longer descriptors are hashed.
      const counter = boundKey(descriptorName(d.entries), MAX_KEY_BYTES);
      // Envoy's own limit: never in shadow mode.
      const limit: RlsLimit = {
        fullKey: `${domain}.${overridePlace(config, domain, d.entries)}`,
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
      return { limit, counter, override: true };
    }
    const m = matchDescriptor(config, domain, d.entries);
    return m === undefined ? undefined : { limit: m.limit, counter: boundKey(m.counter, MAX_KEY_BYTES), override: false };
  });
}

function plan(
  config: RlsConfig,
  limiters: RlsLimiters,
  request: RlsRequestIn,
  nowMs: number,
  statuses: RlsStatus[],
  quotaAt: boolean[],
): Counted[] {
  const { domain } = request;
  const matched = matchAll(config, request);
  let replaced: Set<string> | undefined;
  for (const m of matched) {
    if (m !== undefined && m.limit.replaces.length > 0) for (const name of m.limit.replaces) (replaced ??= new Set()).add(name);
  }
  const out: Counted[] = [];
  const nowS = Math.floor(nowMs / 1000);
  for (let i = 0; i < matched.length; i++) {
    const m = matched[i];
    const limit = m?.limit;
    if (m === undefined || limit === undefined || (limit.name !== undefined && replaced?.has(limit.name) === true && !limit.unlimited)) {
      statuses[i] = status('OK', 'no_limit', 0, undefined, undefined);
      continue;
    }
    const d = request.descriptors[i]!;
    const metricKey = limit.detailedMetric ? descriptorName(d.entries) : undefined;
    if (limit.quota && !limit.unlimited) quotaAt[i] = true;
    if (limit.unlimited) {
      statuses[i] = status('OK', 'unlimited', MAX_UINT32, undefined, undefined, metricKey ?? limit.fullKey.slice(domain.length + 1));
      continue;
    }
    const unit = limit.unit!;
    // A detailed metric's label is the request's own: its shape is made for this request only.
    const shape = shapeOf(limit, unit, metricKey ?? limit.fullKey.slice(domain.length + 1), !m.override && metricKey === undefined);
    const cost = d.hitsAddend ?? Math.max(1, request.hitsAddend);
    const unitS = UNIT_SECONDS[unit];
    const aligned = limit.algorithm === 'fixed-window';
    // envoyproxy/ratelimit's windows start when the clock is a multiple of the unit: the window's start is part of the key.
    const key = aligned ? `${m.counter}:${Math.floor(nowS / unitS) * unitS}` : m.counter;
    const alignedResetMs = aligned ? (unitS - (nowS % unitS)) * 1000 : undefined;
    if (limit.requestsPerUnit === 0 || cost > limit.requestsPerUnit) {
      // Nothing fits: over without asking the store, as every count there would be.
      statuses[i] = over(shape, limit.shadow, alignedResetMs ?? unitS * 1000);
      continue;
    }
    const limiter = m.override
      ? limiters.forOverride(domain, { requestsPerUnit: limit.requestsPerUnit, unit, algorithm: 'fixed-window' })
      : limiters.forLimit(limit);
    out.push({ index: i, limiter, key, cost, shape, unit, alignedResetMs, shadow: limit.shadow, quota: limit.quota });
  }
  return out;
}

function over(shape: Shape, shadow: boolean, resetMs: number): RlsStatus {
  return shadow ? status('OK', 'shadow_over_limit', 0, resetMs, shape) : status('OVER_LIMIT', 'over_limit', 0, resetMs, shape);
}

function resetOf(c: Counted, d: Pick<Decision, 'resetMs'>): number {
  return c.alignedResetMs ?? (Number.isFinite(d.resetMs) ? d.resetMs : UNIT_SECONDS[c.unit] * 1000);
}

function fromDecision(c: Counted, d: Decision): RlsStatus {
  if (!d.allowed) return over(c.shape, c.shadow, resetOf(c, d));
  return status('OK', 'ok', Math.min(MAX_UINT32, d.remaining), resetOf(c, d), c.shape);
}

/**
 * A part that spent nothing (looked at, or left out by another part's refusal): reported OK as it stands. Read in the
 * process when the store can (local-first from the lease held for the key's window, the memory store), else by a peek:
 * a request another descriptor's in-memory block refused must not cost a store call per part left out.
 */
async function asItStands(c: Counted): Promise<RlsStatus> {
  const d = peekNow(c) ?? (await c.limiter.peek(c.key));
  return status('OK', 'ok', d.allowed ? Math.min(MAX_UINT32, d.remaining) : 0, resetOf(c, d), c.shape);
}

/** `c`'s counter as the store sees it without a call (its applyNow), or undefined when the store must be asked. */
function peekNow(c: Counted): Pick<Decision, 'allowed' | 'remaining' | 'resetMs'> | undefined {
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

/** Enforced descriptors: all of them admitted and counted, or none counted. */
async function decideEnforced(counted: readonly Counted[], statuses: RlsStatus[]): Promise<void> {
  if (counted.length === 0) return;
  // A descriptor over without a store call refuses the request: the others are only looked at, as a refused composite spends nothing.
  let alreadyOver = false;
  for (const s of statuses) if (s?.outcome === 'over_limit') alreadyOver = true;
  // hits_addend 0 checks without counting: those parts are only looked at. One counter named twice in a request
  // counts both costs in one part (consumeAll refuses a counter named twice).
  const groups: Array<{ part: LimitPart & { cost: number }; members: Counted[] }> = [];
  for (const c of counted) {
    if (c.cost === 0 || alreadyOver) {
      statuses[c.index] = await asItStands(c);
      continue;
    }
    const group = groups.find((g) => g.part.limiter === c.limiter && g.part.key === c.key);
    if (group === undefined) groups.push({ part: { limiter: c.limiter, key: c.key, cost: c.cost }, members: [c] });
    else {
      group.part.cost += c.cost;
      group.members.push(c);
    }
  }
  if (groups.length === 0) return;
  const tooBig = groups.find((g) => g.part.cost > g.members[0]!.shape.limit.requestsPerUnit);
  if (tooBig !== undefined) {
    for (const g of groups) {
      for (const c of g.members)
        statuses[c.index] = g === tooBig ? over(c.shape, false, c.alignedResetMs ?? UNIT_SECONDS[c.unit] * 1000) : await asItStands(c);
    }
    return;
  }
  const decision = await consumeAll(groups.length === 1 ? [groups[0]!.part] : groups.map((g) => g.part));
  for (let i = 0; i < groups.length; i++) {
    const d = decision.parts[i];
    // A part another part's refusal left unconsulted spent nothing: it is reported as it stands.
    for (const c of groups[i]!.members) statuses[c.index] = d === undefined ? await asItStands(c) : fromDecision(c, d);
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
    statuses[c.index] = status('OK', 'store_error', 0, c.alignedResetMs, c.shape);
  }
}
