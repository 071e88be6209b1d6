/** Plans and per-key overrides in the config. */
/**
 * The `plans` section, a rule's `overrides`, and the one reading of an override value that the config file, the Redis
 * hash and the admin API share.
 */
import { describeValue } from '../../core/describe-value.js';
import { ErrorCode, isFloodgateError, checkOverride, overridePolicy, type PolicyOverride, type Policy } from '../../index.js';
import type { OverrideSettings, PlanSettings, PolicySettings, ResolvedOverride } from './settings.js';
import { InvalidValue, parseLimitSpec } from './values.js';
import { Cursor, isObject, mapping, type Path } from './yaml-cursor.js';

const OVERRIDE_FIELDS = ['keys', 'redis'] as const;
const POLICY_OVERRIDE_FIELDS = new Set(['limit', 'window', 'blockDuration']);
/** Name of a Redis hash: printable ASCII without spaces, as the other Redis names of the config. */
const REDIS_NAME = /^[!-~]{1,200}$/;

/** The `plans` section: name → (policy name → override). */
export function planSettings(c: Cursor, value: unknown): PlanSettings {
  const plans = new Map<string, ReadonlyMap<string, PolicyOverride>>();
  if (value === undefined) return plans;
  if (!isObject(value))
    c.fail(['plans'], `must map plan names to the policies they change, e.g. pro: { per-minute: 600/1m }; got ${describeValue(value)}.`);
  for (const [name, body] of Object.entries(value)) {
    const path: Path = ['plans', name];
    if (!isObject(body) || Object.keys(body).length === 0)
      c.fail(
        path,
        `must map the names of the rule policies it changes to their new numbers, e.g. { per-minute: 600/1m }; got ${describeValue(body)}.`,
      );
    const policies = new Map<string, PolicyOverride>();
    for (const [policy, spec] of Object.entries(body))
      policies.set(
        policy,
        c.at([...path, policy], () => policyOverride(spec)),
      );
    plans.set(name, policies);
  }
  return plans;
}

/** A rule's `overrides`: `keys` (pattern → plan name or numbers) and `redis` (a hash on the store holding more). */
export function overrideSettings(
  c: Cursor,
  path: Path,
  value: unknown,
  policies: readonly PolicySettings[],
  plans: PlanSettings,
): OverrideSettings {
  const o = mapping(c, path, value, OVERRIDE_FIELDS);
  const entries = new Map<string, ResolvedOverride>();
  const raw = new Map<string, unknown>();
  if (o.keys !== undefined) {
    if (!isObject(o.keys))
      c.fail([...path, 'keys'], `must map keys or patterns (with *) to a plan name or new numbers; got ${describeValue(o.keys)}.`);
    for (const [pattern, spec] of Object.entries(o.keys)) {
      entries.set(
        pattern,
        c.at([...path, 'keys', pattern], () => resolveOverride(spec, policies, plans)),
      );
      raw.set(pattern, spec);
    }
  }
  const redis =
    o.redis === undefined
      ? undefined
      : c.at([...path, 'redis'], () => {
          if (typeof o.redis !== 'string' || !REDIS_NAME.test(o.redis))
            throw new InvalidValue(
              `must be the name of a Redis hash (field: key or pattern, value: a plan name or JSON numbers); got ${describeValue(o.redis)}.`,
            );
          return o.redis;
        });
  return { entries, raw, redis };
}

/**
 * Reads one override value for a rule with `policies`:
 * - a plan name (`pro`): the plan's numbers for the policies it names;
 * - `"LIMIT/WINDOW"` or `{ limit, window, blockDuration }`: the numbers of a one-policy rule's policy;
 * - `{ POLICY_NAME: "LIMIT/WINDOW" | { limit, window, blockDuration }, … }`: per named policy.
 * @throws InvalidValue saying what is wrong and what would be right
 */
export function resolveOverride(value: unknown, policies: readonly PolicySettings[], plans: PlanSettings): ResolvedOverride {
  const resolved = resolveShape(value, policies, plans);
  resolved.forEach((override, i) => {
    if (override !== undefined) inRange(policies[i]!, override);
  });
  return resolved;
}

/**
 * Checks an override against the policy it changes, as the limiter would
 * when a key it covers first comes: a value out of range refused here is
 * refused once (400 from the admin API, a config error, a logged Redis
 * entry) instead of answering every request of the keys it covers with 500.
 * @throws InvalidValue with code LIMIT_TOO_LARGE when limit × window passes 2^50; plain for a window given to a calendar policy
 */
function inRange(p: PolicySettings, override: PolicyOverride): void {
  const base: Policy = {
    algorithm: p.algorithm,
    limit: p.limit,
    windowMs: p.windowMs,
    blockMs: p.blockMs,
    ...(p.calendar === undefined ? {} : { calendar: p.calendar }),
    ...(p.burst === undefined ? {} : { burst: p.burst }),
    ...(p.initialTokens === undefined ? {} : { initialTokens: p.initialTokens }),
  };
  try {
    overridePolicy(base, override);
  } catch (error) {
    if (!isFloodgateError(error)) throw error;
    const policy = p.name === undefined ? 'its policy' : `policy ${JSON.stringify(p.name)}`;
    throw new InvalidValue(`for ${policy}: ${error.message}`, error.code === ErrorCode.LIMIT_TOO_LARGE ? error.code : undefined);
  }
}

function resolveShape(value: unknown, policies: readonly PolicySettings[], plans: PlanSettings): ResolvedOverride {
  const only = policies.length === 1;
  if (typeof value === 'string' && !value.includes('/')) {
    const plan = plans.get(value);
    if (plan === undefined)
      throw new InvalidValue(
        `names no plan: ${describeValue(value)}; the plans are ${[...plans.keys()].map((p) => JSON.stringify(p)).join(', ') || 'none (add a plans section)'}.`,
      );
    return byName(plan, policies, `plan ${JSON.stringify(value)}`);
  }
  if (typeof value === 'string' || (isObject(value) && Object.keys(value).some((k) => POLICY_OVERRIDE_FIELDS.has(k)))) {
    if (!only)
      throw new InvalidValue(
        `this rule has ${policies.length} policies, so say which one each number is for: { ${policies[0]!.name ?? 'POLICY_NAME'}: ${typeof value === 'string' ? value : '{ limit: … }'} }.`,
      );
    return [policyOverride(value)];
  }
  if (!isObject(value) || Object.keys(value).length === 0)
    throw new InvalidValue(
      `must be a plan name, "LIMIT/WINDOW", { limit, window, blockDuration } or { POLICY_NAME: … }; got ${describeValue(value)}.`,
    );
  return byName(new Map(Object.entries(value).map(([name, spec]) => [name, policyOverride(spec)])), policies, 'the override');
}

function byName(changes: ReadonlyMap<string, PolicyOverride>, policies: readonly PolicySettings[], what: string): ResolvedOverride {
  const resolved: Array<PolicyOverride | undefined> = policies.map(() => undefined);
  for (const [name, override] of changes) {
    const i = policies.findIndex((p) => p.name === name);
    if (i < 0) {
      const names = policies.map((p) => p.name).filter((n) => n !== undefined);
      throw new InvalidValue(
        `${what} changes policy ${JSON.stringify(name)}, which this rule does not have; its named policies: ${names.map((n) => JSON.stringify(n)).join(', ') || 'none (give its policies a name)'}.`,
      );
    }
    resolved[i] = override;
  }
  return resolved;
}

/** `"LIMIT/WINDOW"` or `{ limit, window, blockDuration }` → a checked PolicyOverride. */
function policyOverride(spec: unknown): PolicyOverride {
  if (typeof spec === 'string') {
    const { limit, windowMs } = parseLimitSpec(spec);
    return { limit, window: windowMs };
  }
  try {
    checkOverride(spec as PolicyOverride, 'the override');
  } catch (error) {
    if (isFloodgateError(error)) throw new InvalidValue(error.message);
    throw error;
  }
  return spec as PolicyOverride;
}
