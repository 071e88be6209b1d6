/** Small pure pieces of the HTTP decision path: promise helpers, a key function's answer checked, a policy's report. */
import type { Decision } from '../core/decision.js';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import type { HeaderPair, PolicyReport } from './headers.js';
import type { NamedPolicy } from './settings.js';
import type { HttpOutcome, RateLimitInfo } from './types.js';

/** True for a promise or any other thenable: the stages answer synchronously when they can. */
export function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as PromiseLike<T> | null)?.then === 'function';
}

/** A key function's answer, which must be a non-empty string. */
export function checkedKey(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new FloodgateError(ErrorCode.INVALID_KEY, `the key function must return a non-empty string; got ${describeValue(value)}.`);
  }
  return value;
}

/** What the headers and hooks get of one policy's decision; `key` is the policy's own key, reported only when it has one. */
export function toReport(policy: NamedPolicy, d: Decision, key?: string): PolicyReport {
  const report: PolicyReport = {
    name: policy.name,
    limit: d.limit,
    windowMs: d.windowMs,
    allowed: d.allowed,
    remaining: d.remaining,
    resetMs: d.resetMs,
    retryAfterMs: d.retryAfterMs,
  };
  const marked: PolicyReport = d.shadowLimited === true ? { ...report, shadowLimited: true } : report;
  return policy.key === undefined || key === undefined ? marked : { ...marked, key };
}

/** The outcome of an admitted request: its headers, and what the handler may read of the decision. */
export function continueWith(
  headers: readonly HeaderPair[],
  key: string,
  cost: number,
  policies: readonly PolicyReport[],
  shadowLimited = false,
): HttpOutcome {
  let binding: PolicyReport | undefined;
  let shadow = shadowLimited;
  for (const p of policies) {
    if (binding === undefined || p.remaining < binding.remaining) binding = p;
    if (p.shadowLimited === true || (shadowLimited && !p.allowed)) shadow = true;
  }
  const info: RateLimitInfo = {
    key,
    cost,
    policies,
    remaining: binding?.remaining ?? Infinity,
    resetMs: binding?.resetMs ?? 0,
    ...(shadow ? { shadowLimited: true as const } : {}),
  };
  return { action: 'continue', headers, info };
}
