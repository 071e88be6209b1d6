/** Compiling the configured rules. */
/**
 * Each rule's match, key source and HttpLimiter over its policies, on the gateway's stores.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import {
  ErrorCode,
  FloodgateError,
  isStoreFailure,
  RateLimiter,
  type RateLimiterOptions,
  type WaitOptions,
  ConcurrencyLimiter,
  type PolicyOverrides,
} from '../../index.js';
import {
  HttpLimiter,
  type HttpRateLimitOptions,
  type KeySource,
  type NamedLimiter,
  type RefusalInfo,
  headerValue,
} from '../../http/index.js';
import { throttled } from '../../util/throttle.js';
import { keyCheck, knownKeyCheck } from './key-check.js';
import { JwtClaims } from './jwt-claims.js';
import { RequestKeys, readsItself, ruleKeys } from './request-keys.js';
import { keyParts } from '../config/key-settings.js';
import { KnownKeys } from './known-keys.js';
import { RuleCost } from './rule-cost.js';
import { RuleCount } from './rule-count.js';
import { NearLimit } from './near-limit.js';
import { DEFAULT_NEAR_LIMIT } from '../config/count-config.js';
import { RuleOverrides } from './rule-overrides.js';
import { warnOnce } from '../../core/warnings.js';
import { loggableKey } from '../runtime/log.js';
import type { DecisionCell } from '../runtime/metrics.js';
import { policyPrefix } from './store-prefix.js';
import type { GatewaySettings, KeySettings, MatchSettings, PolicySettings, RuleSettings, WaitSettings } from '../config/settings.js';
import { type Rule, RuleSet, type RuleContext, RULE_OUTCOMES } from './rule-set.js';
import type { RuleOutcome } from './verdict.js';

/**
 * Longest key, in UTF-8 bytes, before HttpLimiter hashes it (as
 * `maxKeyLength`): an API key is kept readable in the store up to this.
 */
export const MAX_KEY_BYTES = 128;

/**
 * Compiles the rules of `settings`: one RateLimiter per policy, on the
 * shared store under a prefix made of the rule, the policy and its numbers,
 * so a reload that keeps a policy keeps its counters, and one that changes
 * its numbers starts it afresh instead of reading counts made under others.
 */
export function compileRules(settings: GatewaySettings, context: RuleContext): RuleSet {
  // One verifier for every rule: its key set is built once.
  const jwt = settings.jwt === undefined ? undefined : new JwtClaims(settings.jwt);
  const rules = settings.rules.map((rule) => compileRule(rule, settings, context, jwt));
  // A hop count or a proxy list reads forwarding headers; a written `trustProxy: false` says they are no proxy's.
  const ignoresForwarding = (settings.trustProxy === false || settings.trustProxy === 0) && settings.trustProxyGiven !== true;
  return new RuleSet(rules, settings.rules, context.metrics, ignoresForwarding ? context.forwarded : undefined);
}

function compileRule(rule: RuleSettings, settings: GatewaySettings, context: RuleContext, jwt: JwtClaims | undefined): Rule {
  const overrides = rule.overrides === undefined ? undefined : new RuleOverrides(rule, settings.plans);
  if (overrides !== undefined) context.overrideSync?.follow(rule.name, overrides);
  const read = new RequestKeys(rule.name, ruleKeys(rule.key, rule.policies), rule.match, settings.paths.caseSensitive, jwt);
  const keySource = (key: KeySettings): KeySource<IncomingMessage> => (readsItself(key) ? read.source(key) : sourceOf(key));
  const policies: Array<NamedLimiter<IncomingMessage>> = rule.policies.map((p, i) => ({
    limiter: limiterFor(rule, p, settings, context, overrides?.tables[i]),
    ...(p.name === undefined ? {} : { name: p.name }),
    ...(p.key === undefined ? {} : { key: keySource(p.key) }),
  }));
  const log = context.log.child({ rule: rule.name });
  const cost =
    rule.cost === undefined
      ? rule.count === undefined
        ? undefined
        : new RuleCount(rule.name, rule.count)
      : new RuleCost(
          rule.name,
          rule.cost,
          (code, message) => {
            if (warnOnce(code, message, rule.name)) log.warn({ code }, message);
          },
          (name) => context.metrics.costMissing(name),
        );
  const warn = throttled<unknown>(10_000, (error, held) => log.warn({ err: error, suppressed: held }, 'rate-limit problem'));
  const options: HttpRateLimitOptions<IncomingMessage> = {
    limiter: policies,
    key: keySource(rule.key),
    trustProxy: settings.trustProxy,
    headers: settings.headers === 'none' ? 'none' : [...settings.headers],
    // Whole seconds, never before the true wait (the middleware's retryAfterJitter); given in ms, a number here counts ms.
    ...(settings.retryAfterJitterMs === undefined ? {} : { retryAfterJitter: settings.retryAfterJitterMs }),
    onStoreError: 'respond',
    maxKeyLength: MAX_KEY_BYTES,
    // Every store the gateway opens times out by itself (store.timeout), so the middleware's extra timer per call would only cost.
    timeout: false,
    // Store failures are logged where every failure mode sees them (the store wrapper, see store.ts);
    // anything else, one line per 10 s at most.
    onError: (error) => {
      if (!isStoreFailure(error)) warn(error);
    },
    // A rule with cost takes its estimate from every policy, decided together as any cost is, and commits what the response
    // reported; one with count takes 1 and keeps it when the response's status counts.
    ...(cost === undefined
      ? {}
      : { cost: cost.estimate, actualCost: (req: IncomingMessage, res: ServerResponse) => cost.actual(req, res) }),
    // A slot per admitted request under the rule's key, taken once the policies admit it and freed when its response ends.
    ...(rule.concurrency === undefined ? {} : { concurrency: slotLimiter(rule, settings, context) }),
  };
  const keyIsIp = rule.key.kind === 'ip';
  if (rule.shadow) {
    let last = 0;
    let held = 0;
    options.onLimited = (_req, info) => {
      const now = Date.now();
      // At most one line per second per shadow rule: a shadow rule exists to be measured, not to flood the log.
      if (now - last < 1000) {
        held += 1;
        return;
      }
      last = now;
      log.info(
        { key: loggableKey(info.key, keyIsIp), ip: info.ip, policies: info.violatedPolicies, suppressed: held },
        'shadow rule would have limited',
      );
      held = 0;
    };
  } else if (context.log.isLevelEnabled('debug')) {
    options.onLimited = (_req, info) =>
      log.debug({ key: loggableKey(info.key, keyIsIp), ip: info.ip, policies: info.violatedPolicies }, 'limited');
  }
  // A shadow rule refuses nobody, so it has no limited keys to list.
  const noteLimited = rule.shadow ? undefined : context.onLimited;
  if (noteLimited !== undefined) {
    // Only with the admin API on: a refusal hook makes HttpLimiter build each refusal, rather than share one.
    const before = options.onLimited;
    options.onLimited = (req, info) => {
      notePolicies(rule.name, info, noteLimited);
      return before?.(req, info);
    };
  }
  const limiter = new HttpLimiter(options, { owner: `floodgate gateway rule ${JSON.stringify(rule.name)}`, frameworkIp: false });
  const counts = Object.fromEntries(RULE_OUTCOMES.map((o) => [o, context.metrics.decisionCell(rule.name, o)])) as Record<
    RuleOutcome,
    DecisionCell
  >;
  const knownKeys = rule.shadow ? undefined : knownKeysOf(rule, settings, context);
  return {
    name: rule.name,
    shadow: rule.shadow,
    final: rule.final,
    // A policy keyed by address is as exposed to an unseen proxy as a rule keyed by address.
    ipKeyed: usesAddress(rule.key) || rule.policies.some((p) => p.key !== undefined && usesAddress(p.key)),
    checkKey: rule.shadow ? undefined : keyCheck(rule.key, rule.policies),
    readKeys: read.any ? (view) => read.read(view) : undefined,
    checkKnownKey: knownKeys === undefined ? undefined : knownKeyCheck(rule.key, knownKeys, settings.store.onFailure === 'fail-open'),
    knownKeys,
    matches: compileMatch(rule.match, settings.paths.caseSensitive),
    limiter,
    limiters: policies.map((p) => p.limiter),
    overrides,
    cost,
    nearLimit: rule.shadow ? undefined : new NearLimit(rule.name, rule.nearLimit ?? DEFAULT_NEAR_LIMIT, context.metrics),
    holdsSlots: rule.concurrency !== undefined,
    waits: rule.wait !== undefined,
    counts,
  };
}

/**
 * Counts a refusal under each policy that refused, with the key that policy
 * counts (its own key's, when it has one): the same KEY is another client
 * under another key source, so the most-limited list must say whose count it
 * is. A refusal no policy made (the rule's in-flight limit) is counted under
 * the name it was reported with, and the rule's key.
 */
function notePolicies(rule: string, info: RefusalInfo, note: (rule: string, policy: string, key: string) => void): void {
  let noted = false;
  for (const report of info.policies) {
    if (report.allowed) continue;
    const key = report.key ?? info.key;
    if (key === undefined) continue;
    note(rule, report.name, key);
    noted = true;
  }
  if (!noted && info.key !== undefined) for (const name of info.violatedPolicies) note(rule, name, info.key);
}

/**
 * The cache in front of a rule's allow list in Redis, or undefined when the
 * rule has none. The config refuses a Redis allow list without a Redis
 * store; a context without a client here is a caller's mistake.
 */
function knownKeysOf(rule: RuleSettings, settings: GatewaySettings, context: RuleContext): KnownKeys | undefined {
  const known = rule.key.kind === 'header' ? rule.key.validation?.knownKeys : undefined;
  if (known === undefined) return undefined;
  if (context.redis === undefined)
    throw new FloodgateError(
      ErrorCode.INVALID_CONFIG,
      `rule ${JSON.stringify(rule.name)}: allowList names the Redis set ${JSON.stringify(known.set)}, but the gateway has no Redis store; set store: { type: redis, url: ... } or list the keys in a file.`,
    );
  return new KnownKeys(context.redis, known, settings.store.timeoutMs, context.reportStoreFailure ?? (() => {}), context.knownKeyChanges);
}

/** True when a key counts by the client address, alone or as a part. */
const usesAddress = (key: KeySettings): boolean => keyParts(key).some((p) => p.kind === 'ip');

/** The one key of a `global` rule or policy: the same for every request, whatever it carries. */
const globalKey = (): string => 'global';

/** The middleware's key source for an address, `global` or header key (the others are read by RequestKeys). */
function sourceOf(key: KeySettings): KeySource<IncomingMessage> {
  if (key.kind === 'ip') return 'ip';
  if (key.kind === 'global') return globalKey;
  if (key.kind !== 'header') throw new FloodgateError(ErrorCode.INVALID_CONFIG, `the key ${key.kind} is read by the rule's RequestKeys`);
  if (!key.fallbackToIp) return { header: key.header, missingStatus: 401 };
  const header = key.header;
  // Namespaced so that a client cannot pick an API key equal to someone's address and share (or drain) that quota.
  return (_req, client) => {
    const value = headerValue(client.headers, header);
    return value === undefined ? `ip:${client.ip ?? 'unknown'}` : `key:${value}`;
  };
}

function limiterFor(
  rule: RuleSettings,
  p: PolicySettings,
  settings: GatewaySettings,
  context: RuleContext,
  overrides: PolicyOverrides | undefined,
): RateLimiter {
  const c = p.calendar;
  const prefix = policyPrefix(settings.store.prefix, rule.name, p, p.key ?? rule.key);
  const base: RateLimiterOptions = {
    limit: p.limit,
    // A string with its unit: the config already said what it meant, and a bare number under a second would warn.
    window: c ? { calendar: c.unit, timeZone: c.timeZone, ...(c.unit === 'week' ? { weekStart: c.weekStart } : {}) } : `${p.windowMs}ms`,
    algorithm: p.algorithm,
    ...(p.burst === undefined ? {} : { burst: p.burst }),
    ...(p.initialTokens === undefined ? {} : { initialTokens: p.initialTokens }),
    prefix,
    // On a Cluster one key's counters of a rule's policies share a slot, so policies that count by one key stay atomic,
    // while keys of different clients, and of different rules, spread over the masters.
    ...(settings.store.connection?.topology === 'cluster' ? { hashTag: rule.name } : {}),
    ...(p.blockMs > 0 ? { blockDuration: p.blockMs } : {}),
    // The prefix stays the policy's: an overridden key keeps its counter, under the numbers of its entry.
    ...(overrides === undefined ? {} : { overrides }),
  };
  // The block list is as large as a rule's table: with the library's 10 000, half a million blocked keys (a per-IP
  // rule under a distributed flood) sent most refusals to the store, and each evicted a live entry.
  const inMemoryBlock = settings.inMemoryBlock ? { maxKeys: settings.store.maxKeys } : false;
  // A rule's wait is for its slot when it has concurrency (one deadline for the request), else for its only policy's unit.
  const wait = rule.wait !== undefined && rule.concurrency === undefined ? { wait: waitOption(rule.wait) } : {};
  const options: RateLimiterOptions = { ...base, store: context.storeFor(rule.name), inMemoryBlock, ...wait };
  if (context.storeCanFail) {
    switch (settings.store.onFailure) {
      case 'insurance':
        // The insurance counts per process: while the store is away, each instance admits up to the full limit.
        options.insurance = new RateLimiter({ ...base, store: context.insuranceStore });
        break;
      case 'fail-open':
      case 'fail-closed':
        options.onStoreFailure = settings.store.onFailure;
        break;
      case 'reject':
        break;
    }
  }
  return new RateLimiter(options);
}

/**
 * The in-flight limiter of a rule with `concurrency`, on the rule's store
 * under its own prefix (a reload that keeps the limit keeps the slots held).
 * While the store fails it follows the rule's failure policy, except that
 * `insurance`, which has no per-process slots, admits without a slot
 * (fail-open): the policies' insurance still bounds the rate.
 */
function slotLimiter(rule: RuleSettings, settings: GatewaySettings, context: RuleContext): ConcurrencyLimiter {
  const c = rule.concurrency!;
  const onFailure = settings.store.onFailure;
  const onStoreFailure = !context.storeCanFail ? 'reject' : onFailure === 'insurance' ? 'fail-open' : onFailure;
  return new ConcurrencyLimiter({
    limit: c.limit,
    ttl: c.ttlMs,
    store: context.storeFor(rule.name),
    prefix: `${settings.store.prefix}:${rule.name}:in-flight:${c.limit}`,
    onStoreFailure,
    ...(rule.wait === undefined ? {} : { wait: waitOption(rule.wait) }),
  });
}

function waitOption(wait: WaitSettings): WaitOptions {
  return { timeout: wait.timeoutMs, maxQueue: wait.maxQueue };
}

/**
 * Compiles a rule's (or a priority class's) match. Paths match case-insensitively unless
 * `caseSensitive` (Express and Koa route `/API/x` to a handler for
 * `/api/x`), and a rule for GET also matches HEAD (Express, Fastify and
 * @koa/router run the GET handler for HEAD); one that lists HEAD alone
 * matches only HEAD.
 */
export function compileMatch(m: MatchSettings, caseSensitive = false): Rule['matches'] {
  const checks: Array<(method: string, path: string, host: string | undefined, headers: IncomingHttpHeaders) => boolean> = [];
  if (m.methods !== undefined) {
    const methods = new Set(m.methods);
    if (methods.has('GET')) methods.add('HEAD');
    checks.push((method) => methods.has(method));
  }
  if (m.pathPrefix !== undefined) {
    const prefix = m.pathPrefix;
    if (caseSensitive) checks.push((_m, path) => path.startsWith(prefix));
    else {
      // An anchored case-insensitive regex compares without a lower-cased copy of the path per request.
      const anchored = new RegExp(`^${prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`, 'i');
      checks.push((_m, path) => anchored.test(path));
    }
  }
  if (m.pathPattern !== undefined) {
    const pattern =
      caseSensitive || m.pathPattern.flags.includes('i') ? m.pathPattern : new RegExp(m.pathPattern.source, `${m.pathPattern.flags}i`);
    checks.push((_m, path) => pattern.test(path));
  }
  if (m.hosts !== undefined) {
    const exact = new Set(m.hosts.filter((h) => !h.startsWith('*.')));
    const suffixes = m.hosts.filter((h) => h.startsWith('*.')).map((h) => h.slice(1));
    checks.push((_m, _p, host) => host !== undefined && (exact.has(host) || suffixes.some((s) => host.endsWith(s))));
  }
  if (m.headers !== undefined) {
    const wanted = m.headers;
    checks.push((_m, _p, _h, headers) =>
      wanted.every(([name, value]) => {
        const actual = headerValue(headers, name);
        return value === true ? actual !== undefined : actual === value;
      }),
    );
  }
  if (checks.length === 0) return () => true;
  if (checks.length === 1) return checks[0]!;
  return (method, path, host, headers) => checks.every((check) => check(method, path, host, headers));
}
