/** One-time warnings for likely misconfigurations. */
/**
 * Each names what was probably meant, carries a stable code, and is emitted once per process through
 * process.emitWarning.
 */

/**
 * Stable warning codes (docs/errors.md lists each with its cause and how to
 * silence it). A warning never changes behaviour; it says once what floodgate
 * did with a setting that is probably not what was meant.
 */
export const WarningCode = {
  /** Requests carry `X-Forwarded-For` (or `Forwarded`) but `trustProxy` is unset: every client behind the proxy shares the proxy's quota. */
  FORWARDED_HEADER_IGNORED: 'FLOODGATE_FORWARDED_HEADER_IGNORED',
  /** A middleware factory was mounted itself (`app.use(rateLimit)`) instead of the middleware it returns: every request fails. */
  FACTORY_USED_AS_MIDDLEWARE: 'FLOODGATE_FACTORY_USED_AS_MIDDLEWARE',
  /** The Fastify plugin was registered after routes it would cover: those routes are not limited. */
  PLUGIN_AFTER_ROUTES: 'FLOODGATE_PLUGIN_AFTER_ROUTES',
  /** Two RateLimiters use one store with the same default prefix (derived from the policy), so they share counters. */
  SHARED_DEFAULT_PREFIX: 'FLOODGATE_SHARED_DEFAULT_PREFIX',
  /** A gateway config file says `rules: []`: every request is forwarded without limits. */
  NO_RULES: 'FLOODGATE_NO_RULES',
  /** A gateway rule comes after a `final` rule that matches every request it matches, so it never applies. */
  UNREACHABLE_RULE: 'FLOODGATE_UNREACHABLE_RULE',
  /** A RateLimiter's window is a bare number below 1000: milliseconds, where seconds were likelier meant. */
  WINDOW_IN_MILLISECONDS: 'FLOODGATE_WINDOW_IN_MILLISECONDS',
  /** A route's policies are on different stores, so they cannot be decided all or nothing. Cause and fix: docs/errors.md#floodgate_policies_not_atomic. */
  POLICIES_NOT_ATOMIC: 'FLOODGATE_POLICIES_NOT_ATOMIC',
  /** A ConcurrencyLimiter ttl below a second: a holder's pause can outlast its slot, and another caller takes it while it still runs. */
  SLOT_TTL_SHORT: 'FLOODGATE_SLOT_TTL_SHORT',
  /** A ConcurrencyLimiter with heartbeat off and a ttl over ten minutes: a crashed holder's slot stays taken that long. */
  HEARTBEAT_OFF_LONG_TTL: 'FLOODGATE_HEARTBEAT_OFF_LONG_TTL',
  /** A RateLimiter's `wait.timeout` is shorter than window/limit, the time one unit takes to come back: most waits end refused. Cause and fix: docs/errors.md#floodgate_wait_shorter_than_unit. */
  WAIT_SHORTER_THAN_UNIT: 'FLOODGATE_WAIT_SHORTER_THAN_UNIT',
  /** A RateLimiter with `wait` or `execEvenly` is a part of `consumeAll`, which decides at once: the composite neither waits nor paces. Cause and fix: docs/errors.md#floodgate_composite_does_not_wait. */
  COMPOSITE_DOES_NOT_WAIT: 'FLOODGATE_COMPOSITE_DOES_NOT_WAIT',
  /** A gateway rule's upstream reported a cost that is not a whole number ≥ 0 (negative, fractional, NaN, a string): the estimate was charged. */
  COST_USAGE_INVALID: 'FLOODGATE_COST_USAGE_INVALID',
  /** A gateway rule reads its cost from the response body, but the upstream compressed it: the estimate is charged. */
  COST_RESPONSE_ENCODED: 'FLOODGATE_COST_RESPONSE_ENCODED',
  /** A gateway rule reads its cost from a response body too large (or an event-stream line too long) to keep: the estimate is charged. */
  COST_RESPONSE_TOO_LARGE: 'FLOODGATE_COST_RESPONSE_TOO_LARGE',
  /** A gateway rule's upstream answered a request successfully without reporting its cost where the rule looks: the estimate was charged. */
  COST_USAGE_MISSING: 'FLOODGATE_COST_USAGE_MISSING',
  /** A gateway's Redis node list (`store.cluster.nodes`, `store.sentinel.sentinels`, `--redis-cluster`) holds a `redis://` URL: its host and port were used. Cause and fix: docs/errors.md#floodgate_redis_url_as_node. */
  REDIS_URL_AS_NODE: 'FLOODGATE_REDIS_URL_AS_NODE',
  /** A gateway config counts by bearer-token claims it does not verify (`jwt: { dangerouslyUseUnverifiedClaims: true }`): a client can write its own. Cause and fix: docs/errors.md#floodgate_unverified_jwt_claims. */
  UNVERIFIED_JWT_CLAIMS: 'FLOODGATE_UNVERIFIED_JWT_CLAIMS',
  /** A gateway verifies bearer tokens against a public key or key set without `jwt.audience`: tokens the same issuer made for other applications pass. Cause and fix: docs/errors.md#floodgate_jwt_audience_unchecked. */
  JWT_AUDIENCE_UNCHECKED: 'FLOODGATE_JWT_AUDIENCE_UNCHECKED',
  /** A gateway's Redis Cluster or Sentinel set-up lists one node: a start while it is down cannot find the others. Cause and fix: docs/errors.md#floodgate_one_seed_node. */
  ONE_SEED_NODE: 'FLOODGATE_ONE_SEED_NODE',
  /** An HTTP middleware has `shadow: true` and an `onLimited` hook, which shadow mode never calls (nothing is refused). Cause and fix: docs/errors.md#floodgate_on_limited_in_shadow. */
  ON_LIMITED_IN_SHADOW: 'FLOODGATE_ON_LIMITED_IN_SHADOW',
  /** A gateway's overload section gives a class above the default to requests by a header alone: any client can send it. Cause and fix: docs/errors.md#floodgate_priority_from_header. */
  PRIORITY_FROM_HEADER: 'FLOODGATE_PRIORITY_FROM_HEADER',
  /** A gateway's overload limit (fixed, or an adaptive maxLimit) is above proxy.connections: past the pool, requests wait in arrival order, not by class. Cause and fix: docs/errors.md#floodgate_overload_above_pool. */
  OVERLOAD_ABOVE_POOL: 'FLOODGATE_OVERLOAD_ABOVE_POOL',
} as const;

/** One of {@link WarningCode}'s values. */
export type WarningCodeValue = (typeof WarningCode)[keyof typeof WarningCode];

/** How many distinct warnings a process remembers having emitted; past it, warnings of new subjects are dropped, never repeated. */
const MAX_REMEMBERED = 1000;

const emitted = new Set<string>();

/**
 * Emits `message` as a process warning with `code`, once per process for
 * each `code` and `subject` (e.g. the limiter or rule it is about). Listen
 * with `process.on('warning', (w) => …)`, where `w.code` is the code;
 * `node --no-warnings` silences them all, and each warning's entry in
 * docs/errors.md says how to turn that one off.
 *
 * @returns true when emitted now, false when it was emitted before
 */
export function warnOnce(code: WarningCodeValue, message: string, subject = ''): boolean {
  const id = `${code}\u0000${subject}`;
  if (emitted.has(id) || emitted.size >= MAX_REMEMBERED) return false;
  emitted.add(id);
  process.emitWarning(message, { code });
  return true;
}

/** Forgets which warnings were emitted, so tests can see each one again. Not part of the public API. */
export function forgetWarnings(): void {
  emitted.clear();
}
