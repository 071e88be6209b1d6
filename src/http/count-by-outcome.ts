/** Counting by outcome: an admitted request's units rewarded once its response ends. */
/**
 * When it failed (or succeeded) and the options say such requests do not count.
 */
import type { ServerResponse } from 'node:http';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { optionalBoolean, optionalFunction } from '../core/validate.js';
import { keyAt } from './policy-keys.js';
import type { Counted } from './request-context.js';
import type { NamedPolicy, RewardRule } from './settings.js';

/**
 * The reward rule of `skipFailedRequests`, `skipSuccessfulRequests` and
 * `requestWasSuccessful`, or undefined when every request counts. A request
 * is successful when `requestWasSuccessful(req, status)` says so (default:
 * status below 400); one whose connection closed before its response ended
 * is failed, whatever the predicate (it was not served).
 *
 * @throws FloodgateError INVALID_OPTIONS for a non-boolean flag or a non-function predicate; CONFLICTING_OPTIONS for both flags (nothing
 *   would count) or a predicate without either flag (it would decide nothing)
 */
export function parseRewardRule<Raw>(
  skipFailed: unknown,
  skipSuccessful: unknown,
  wasSuccessful: unknown,
  owner: string,
): RewardRule<Raw> | undefined {
  const failed = optionalBoolean(skipFailed, 'skipFailedRequests') ?? false;
  const successful = optionalBoolean(skipSuccessful, 'skipSuccessfulRequests') ?? false;
  const predicate = optionalFunction(wasSuccessful, 'requestWasSuccessful') as ((raw: Raw, status: number) => boolean) | undefined;
  if (failed && successful) {
    throw new FloodgateError(
      ErrorCode.CONFLICTING_OPTIONS,
      `${owner}: skipFailedRequests and skipSuccessfulRequests together give every request back, so nothing would be limited; keep one.`,
    );
  }
  if (!failed && !successful) {
    if (predicate === undefined) return undefined;
    throw new FloodgateError(
      ErrorCode.CONFLICTING_OPTIONS,
      `${owner}: requestWasSuccessful decides which requests skipFailedRequests or skipSuccessfulRequests give back; set one of them, or remove it.`,
    );
  }
  return (raw, status) => {
    const ok = status !== undefined && (predicate === undefined ? status < 400 : predicate(raw, status) === true);
    return ok ? successful : failed;
  };
}

/**
 * Watches `res` until its response ends ('finish') or its connection closes
 * first ('close'), then, when `rule` says so, rewards the request's cost to
 * each policy that counted it through `reward`, under each policy's own key
 * when it has one. Listens once; never throws.
 */
export function rewardWhenDone<Raw>(
  raw: Raw,
  res: ServerResponse,
  counted: Counted,
  rule: RewardRule<Raw>,
  reward: (policy: NamedPolicy, key: string, cost: number) => void,
  report: (error: unknown) => void,
): void {
  let done = false;
  const onEnd = (): void => {
    if (done) return;
    done = true;
    res.off('finish', onEnd);
    res.off('close', onEnd);
    let rewards: boolean;
    try {
      rewards = rule(raw, res.writableFinished ? res.statusCode : undefined);
    } catch (error) {
      report(error);
      return;
    }
    if (rewards) counted.policies.forEach((policy, i) => reward(policy, keyAt(counted.key, counted.keys, i), counted.cost));
  };
  res.once('finish', onEnd);
  res.once('close', onEnd);
}
