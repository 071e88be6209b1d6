/** One ShouldRateLimit decision. */
/**
 * Each descriptor's limit (matched, replaced, unlimited, shadow), the enforced ones decided all-or-nothing with
 * consumeAll, and a status per descriptor.
 */
import { boundKey } from '../../http/index.js';
import { MAX_KEY_BYTES } from '../rules/compile-rules.js';
import { UNIT_SECONDS, type RlsConfig, type RlsLimit, type RlsUnit } from './rls-config.js';
import { decideApart, decideEnforced, type CountOptions } from './rls-count.js';
import type { RlsLimiters } from './rls-limiters.js';
import { counterName, descriptorName, matchDescriptor, type DescriptorEntry } from './rls-match.js';
import { MAX_UINT32, over, status, type Counted, type RlsStatus, type Shape } from './rls-status.js';

export type { RlsOutcome, RlsStatus } from './rls-status.js';

/** The `grpc` options a decision follows (see docs/rls.md, Options). */
export interface DecideOptions extends CountOptions {
  /** `grpc.quotaMode`: every descriptor is a quota descriptor (envoyproxy/ratelimit's QUOTA_MODE). */
  readonly quotaMode?: boolean | undefined;
  /** `grpc.shadowMode`: the overall code is always OK; the statuses still say which are over (its SHADOW_MODE). */
  readonly shadowMode?: boolean | undefined;
}

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

/** The decision over a request. */
export interface RlsAnswer {
  /** OVER_LIMIT when any enforced descriptor is over. */
  readonly overall: 'OK' | 'OVER_LIMIT';
  /** One per descriptor, in order. */
  readonly statuses: readonly RlsStatus[];
}

/** A request the service cannot decide (no domain, no descriptors, an unreadable field): answered INVALID_ARGUMENT. */
export class RlsRequestError extends Error {}

/** floodgate's default: a refused request counts nothing. */
const NO_REFUSED_COUNT: DecideOptions = { countRefused: false };

/** Most descriptors in one request: each is a part of one composite decision. */
export const MAX_DESCRIPTORS = 64;

/** A configured limit's shape with its metric label, worked out once per limit and domain rather than per request. */
const shapes = new WeakMap<RlsLimit, Shape>();

function shapeOf(limit: RlsLimit, unit: RlsUnit, metricKey: string, cache: boolean): Shape {
  let shape = cache ? shapes.get(limit) : undefined;
  if (shape === undefined) {
    shape = {
      limit: { requestsPerUnit: limit.requestsPerUnit, unit, name: limit.name },
      metricKey,
      policyName: limit.name ?? limit.fullKey,
      metadata: limit.metadata,
    };
    if (cache) shapes.set(limit, shape);
  }
  return shape;
}

/**
 * Decides `request` under `config`.
 * @throws RlsRequestError for a request without a domain or descriptors; a store error (FloodgateError) when the failure policy is `reject` and the store failed
 */
export async function decideRls(
  config: RlsConfig,
  limiters: RlsLimiters,
  request: RlsRequestIn,
  nowMs = Date.now(),
  options: DecideOptions = NO_REFUSED_COUNT,
): Promise<RlsAnswer> {
  if (request.domain === '') throw new RlsRequestError('rate limit domain must not be empty');
  if (request.descriptors.length === 0) throw new RlsRequestError('rate limit descriptor list must not be empty');
  if (request.descriptors.length > MAX_DESCRIPTORS) throw new RlsRequestError(`at most ${MAX_DESCRIPTORS} descriptors per request`);
  const statuses: RlsStatus[] = new Array(request.descriptors.length);
  const quotaAt: boolean[] = [];
  const counted = plan(config, limiters, request, nowMs, statuses, quotaAt, options);
  let enforced: Counted[] = counted;
  let apart: Counted[] | undefined;
  if (counted.some((c) => c.shadow || c.quota)) {
    enforced = counted.filter((c) => !c.shadow && !c.quota);
    apart = counted.filter((c) => c.shadow || c.quota);
  }
  // An enforced descriptor over without a store call refuses the request (a quota or shadow one does not).
  const alreadyOver = statuses.some((s, i) => s.outcome === 'over_limit' && quotaAt[i] !== true);
  if (apart === undefined) await decideEnforced(enforced, alreadyOver, statuses, options);
  else
    await Promise.all([decideEnforced(enforced, alreadyOver, statuses, options), ...apart.map((c) => decideApart(c, statuses, options))]);
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
  // Global shadow mode answers OK whatever the statuses say, as there.
  const overall = !options.shadowMode && (over || (quotas > 0 && quotas === quotasOver)) ? 'OVER_LIMIT' : 'OK';
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
      const counter = boundKey(counterName(d.entries), MAX_KEY_BYTES);
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
        // As there: Envoy's own limit carries no config entry's metadata.
        metadata: undefined,
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
  options: DecideOptions,
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
      // In global quota mode a descriptor without a limit is a quota descriptor that always has room, as there.
      if (options.quotaMode === true) quotaAt[i] = true;
      continue;
    }
    const d = request.descriptors[i]!;
    const metricKey = limit.detailedMetric ? descriptorName(d.entries) : undefined;
    const quota = limit.quota || options.quotaMode === true;
    if (quota && !limit.unlimited) quotaAt[i] = true;
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
    const limiter =
      limit.requestsPerUnit === 0
        ? undefined
        : m.override
          ? limiters.forOverride(domain, { requestsPerUnit: limit.requestsPerUnit, unit, algorithm: 'fixed-window' })
          : limiters.forLimit(limit);
    // A checker where a count past the limit must be told from one at it: a check, a quota debit, a refused request counted.
    const checker = limiter !== undefined && (cost === 0 || quota || options.countRefused) ? limiters.checkerOf(limiter) : undefined;
    // More than the limit is counted anyway where hits count past it (a quota debit, countRefused), as there.
    if (limiter === undefined || (cost > limit.requestsPerUnit && (checker === undefined || !(quota || options.countRefused)))) {
      // Nothing fits: over without asking the store, as every count there would be.
      statuses[i] = over(shape, limit.shadow, alignedResetMs ?? unitS * 1000);
      continue;
    }
    out.push({ index: i, limiter, checker, key, cost, shape, unit, alignedResetMs, shadow: limit.shadow, quota });
  }
  return out;
}
