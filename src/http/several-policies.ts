/** A route's several policies decided for one request: all or nothing on their common store, or one by one with give-back across stores. */
import { consumeAll, consumeAllNow, type CompositeDecision, type LimitPart } from '../composite.js';
import type { Decision } from '../decision.js';
import { isStoreFailure } from '../errors.js';
import { WarningCode, warnOnce } from '../warnings.js';
import type { CallGuard } from './call-guard.js';
import type { NamedPolicy } from './options.js';
import { boundKey } from './client-keys.js';
import { checkedKey, isThenable } from './limiter-parts.js';
import type { ClientInfo } from './types.js';

/** What a request's policies decided. */
export interface PoliciesDecided {
  /** One per policy, in order; undefined for a policy not consulted (another's in-memory block refused first) or whose store failed. */
  readonly decisions: (Decision | undefined)[];
  /** Store failures met, to report and to map to `onStoreError`. */
  readonly storeErrors: unknown[];
  /** A thrown error that is not a store failure (a bad key or cost): the request becomes an error. */
  readonly badCall: unknown;
  /** True when a policy refused. */
  readonly refused: boolean;
}

/** Reports an error to `onError`. */
type Report = (error: unknown) => void;

const together = new WeakMap<readonly NamedPolicy[], boolean>();

/**
 * True when `policies` can be decided in one atomic step: their limiters
 * share one store that has `consumeAll`, under distinct prefixes. Otherwise
 * warns once: a refusal by one policy then gives back what the others took,
 * which a concurrent request can see half done. The answer is remembered
 * per policy list (a selector's answers are parsed once each).
 */
export function decidedTogether(policies: readonly NamedPolicy[], warn: boolean): boolean {
  const known = together.get(policies);
  if (known !== undefined) return known;
  const store = policies[0]!.limiter.store;
  const prefixes = new Set(policies.map((p) => p.limiter.prefix));
  const oneStore = policies.every((p) => p.limiter.store === store);
  const atomic = oneStore && store.consumeAll !== undefined && prefixes.size === policies.length;
  if (!atomic && warn && prefixes.size === policies.length) {
    const names = policies.map((p) => JSON.stringify(p.name)).join(', ');
    const why = oneStore
      ? `their store (${store.name}) has no consumeAll`
      : 'their RateLimiters use different store instances (a RateLimiter without a store option gets a memory store of its own)';
    warnOnce(
      WarningCode.POLICIES_NOT_ATOMIC,
      `policies ${names} of one route were meant to be decided all or nothing, but ${why}: a refusal by one gives back what the others took, so concurrent requests can see a half-spent state. Give their RateLimiters one shared floodgate store, e.g. const store = new MemoryStore(); new RateLimiter({ limit: 10, window: '1s', store }). If the stores must differ, validate: false on the middleware silences this warning.`,
      names,
    );
  }
  together.set(policies, atomic);
  return atomic;
}

/**
 * Each policy's key: the route's `key`, or the policy's own key function's
 * answer, checked and bounded as the route key function's is. Through a
 * promise only when a key function answers with one.
 * @throws FloodgateError INVALID_KEY for an answer that is not a non-empty string
 */
export function policyKeys(
  policies: readonly NamedPolicy[],
  key: string,
  raw: unknown,
  client: ClientInfo,
  maxKeyLength: number,
): string[] | Promise<string[]> {
  const answers = policies.map((p) => (p.key === undefined ? key : p.key(raw, client)));
  const keysOf = (values: readonly unknown[]): string[] =>
    values.map((v, i) => (policies[i]!.key === undefined ? key : boundKey(checkedKey(v), maxKeyLength)));
  return answers.some((a) => isThenable(a)) ? Promise.all(answers).then(keysOf) : keysOf(answers);
}

function partsOf(policies: readonly NamedPolicy[], keys: readonly string[], cost: number): LimitPart[] {
  return policies.map((p, i) => ({ limiter: p.limiter, key: keys[i]!, cost }));
}

function fromComposite(decision: CompositeDecision): PoliciesDecided {
  return { decisions: [...decision.parts], storeErrors: [], badCall: undefined, refused: !decision.allowed };
}

/**
 * The all-or-nothing decision when it needs no waiting (memory store, an
 * in-memory block, local-first within its leases), else undefined and
 * nothing spent.
 * @throws FloodgateError for a bad key or cost
 */
export function decideTogetherNow(policies: readonly NamedPolicy[], keys: readonly string[], cost: number): PoliciesDecided | undefined {
  const decision = consumeAllNow(partsOf(policies, keys, cost));
  return decision === undefined ? undefined : fromComposite(decision);
}

/**
 * The all-or-nothing decision through the store. A store failure fails the
 * whole (every policy undefined); a composite that outlives the middleware's
 * timeout and admits late is given back, since the request was not served
 * under it.
 */
export async function decideTogether(
  policies: readonly NamedPolicy[],
  keys: readonly string[],
  cost: number,
  guard: CallGuard,
  report: Report,
): Promise<PoliciesDecided> {
  const call = consumeAll(partsOf(policies, keys, cost));
  try {
    return fromComposite(await guard.wrap(call));
  } catch (error) {
    if (guard.timedOut(error)) {
      call.then(
        (late) => {
          if (!late.allowed) return;
          late.parts.forEach((d, i) => {
            if (d !== undefined && d.source !== 'fail-open') policies[i]!.limiter.reward(keys[i]!, cost).then(undefined, report);
          });
        },
        () => undefined, // already reported as a timeout
      );
    }
    const decisions: (Decision | undefined)[] = new Array(policies.length).fill(undefined);
    return isStoreFailure(error)
      ? { decisions, storeErrors: [error], badCall: undefined, refused: false }
      : { decisions, storeErrors: [], badCall: error, refused: false };
  }
}

/**
 * Policies on different stores: each consumes on its own; when one refuses
 * (or the request fails), what the admitting ones took is given back, and
 * their decisions are replaced by the state after the give-back.
 */
export async function decideEach(
  policies: readonly NamedPolicy[],
  keys: readonly string[],
  cost: number,
  passOnStoreError: boolean,
  guard: CallGuard,
  report: Report,
): Promise<PoliciesDecided> {
  const calls = policies.map((p, i) => p.limiter.consume(keys[i]!, cost));
  const settled = await Promise.allSettled(calls.map((call) => guard.wrap(call)));
  const decisions: (Decision | undefined)[] = [];
  const storeErrors: unknown[] = [];
  let badCall: unknown;
  let refused = false;
  for (const result of settled) {
    if (result.status === 'fulfilled') {
      decisions.push(result.value);
      if (!result.value.allowed) refused = true;
    } else {
      decisions.push(undefined);
      if (isStoreFailure(result.reason)) storeErrors.push(result.reason);
      else badCall ??= result.reason;
    }
  }
  const giveBack = badCall !== undefined || refused || (storeErrors.length > 0 && !passOnStoreError);
  if (giveBack) {
    // A consume that outlived the timeout may still admit later; give those units back when (if) it answers.
    settled.forEach((result, i) => {
      if (result.status !== 'rejected' || !guard.timedOut(result.reason)) return;
      calls[i]!.then(
        (late) => {
          if (!late.allowed || late.source === 'fail-open') return undefined;
          return policies[i]!.limiter.reward(keys[i]!, cost).then(undefined, report);
        },
        () => undefined,
      );
    });
    await Promise.all(
      decisions.map(async (d, i) => {
        // A fail-open decision spent nothing; a refused one spent nothing either.
        if (d === undefined || !d.allowed || d.source === 'fail-open') return;
        try {
          const after = await guard.wrap(policies[i]!.limiter.reward(keys[i]!, cost));
          // Still reported as admitting: it was not this policy that refused.
          decisions[i] = { ...after, allowed: true, retryAfterMs: 0 };
        } catch (error) {
          report(error);
        }
      }),
    );
  }
  return { decisions, storeErrors, badCall, refused };
}
