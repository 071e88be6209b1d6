/** The admin API's plans and overrides. */
/**
 * List the plans, list a rule's overrides, set and remove one, shared through the rule's Redis hash when it has one.
 */
import { InvalidValue } from '../config/values.js';
import type { PlanSettings } from '../config/settings.js';
import type { OverrideEntry, RuleOverrides } from '../rules/rule-overrides.js';
import { allow, ApiError, badField, decode, type AdminRequest } from './admin-http.js';

/** Longest pattern the admin API sets: a key the gateway hashes past 128 bytes never matches a longer one. */
const MAX_PATTERN = 512;

/** What the override endpoints need of the gateway. */
export interface OverrideAdmin {
  /** The plans in force. */
  plans(): PlanSettings;
  /** Writes (or, with undefined, removes) an entry of a Redis hash and announces it to every host; undefined without Redis. */
  write?(hash: string, pattern: string, value: unknown): Promise<void>;
}

/** The rule an override path names, with its overrides (404 when it has none). */
export interface OverrideRule {
  readonly name: string;
  readonly overrides: RuleOverrides | undefined;
}

/** GET /admin/plans: every plan, policy name → numbers. */
export function plansView(plans: PlanSettings): Record<string, unknown> {
  return { plans: Object.fromEntries([...plans].map(([name, policies]) => [name, Object.fromEntries(policies)])) };
}

/**
 * /admin/rules/RULE/overrides[/PATTERN]: GET lists the entries in force
 * (each with its source); PUT `{"value": …}` sets one, DELETE removes one.
 * A rule with a Redis hash writes there, and every host applies it when it
 * hears the announcement; a rule without one changes this process only,
 * until its next reload.
 */
export async function routeOverrides(
  req: AdminRequest,
  rule: OverrideRule,
  segment: string | undefined,
  admin: OverrideAdmin,
): Promise<[number, unknown]> {
  const overrides = rule.overrides;
  if (overrides === undefined)
    throw new ApiError(404, {
      error: `rule ${JSON.stringify(rule.name)} has no overrides section; add overrides: { keys: {} } (or { redis: HASH }) to its config to manage them here.`,
      field: 'rule',
    });
  const shared = overrides.redisHash;
  if (segment === undefined) {
    allow(req, 'GET');
    return [200, { rule: rule.name, redis: shared ?? null, entries: overrides.list() }];
  }
  const pattern = decode(segment, 'pattern');
  if (pattern === '' || pattern.length > MAX_PATTERN)
    throw badField('pattern', `the key or pattern must be 1 to ${MAX_PATTERN} characters; got ${pattern.length}.`);
  if (req.method === 'DELETE') {
    if (shared !== undefined && admin.write !== undefined) {
      await admin.write(shared, pattern, undefined);
    } else if (!overrides.remove(pattern)) {
      throw new ApiError(404, {
        error: `no live override for ${JSON.stringify(pattern)} (entries from the config file change with it).`,
        field: 'pattern',
      });
    }
    return [200, entryOf(overrides, rule.name, pattern, shared)];
  }
  if (req.method === 'GET' || req.method === 'HEAD') return [200, entryOf(overrides, rule.name, pattern, shared)];
  allow(req, 'PUT');
  const value = valueOf(await req.json());
  try {
    overrides.check(value);
  } catch (error) {
    if (error instanceof InvalidValue) {
      const bad = badField('value', error.message);
      // Out of a bound the library names (limit × window over 2^50): the code says which, for scripts to branch on.
      if (error.code !== undefined) bad.body.code = error.code;
      throw bad;
    }
    throw error;
  }
  if (shared !== undefined && admin.write !== undefined) await admin.write(shared, pattern, value);
  else overrides.put(pattern, value, 'admin');
  return [200, entryOf(overrides, rule.name, pattern, shared)];
}

function valueOf(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !('value' in body))
    throw badField(
      'body',
      'the body must be {"value": PLAN} or {"value": {"POLICY": "LIMIT/WINDOW"}} (or "LIMIT/WINDOW" for a one-policy rule).',
    );
  const extra = Object.keys(body).find((k) => k !== 'value');
  if (extra !== undefined) throw badField(extra, `unknown field ${JSON.stringify(extra)}; the body takes only value.`);
  return (body as { value: unknown }).value;
}

function entryOf(overrides: RuleOverrides, rule: string, pattern: string, shared: string | undefined): Record<string, unknown> {
  const entry: OverrideEntry | undefined = overrides.list().find((e) => e.pattern === pattern);
  return { rule, pattern, redis: shared ?? null, entry: entry ?? null };
}
