/** Refusal responses: problem types, bodies rendered once per shape, and frozen shared outcomes. */
/**
 * The bodies are problem details, text or the caller's function, rendered once per distinct shape.
 */
import { STATUS_CODES } from 'node:http';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import type { Decision } from '../core/decision.js';
import type { BodyOption, HttpOutcome, RefusalInfo } from './types.js';

/** The problem type of draft-ietf-httpapi-ratelimit-headers for an exceeded quota. */
export const QUOTA_EXCEEDED_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded';
/** The problem type of draft-ietf-httpapi-ratelimit-headers for reduced capacity (used for fail-closed refusals). */
export const REDUCED_CAPACITY_TYPE = 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity';

/** Distinct built-in bodies an HttpLimiter keeps before it starts over. */
const MAX_MEMOISED_BODIES = 256;

/** The bodies of one HttpLimiter's refusals, per its `body` option. */
export class RefusalBodies {
  private readonly rendered = new Map<string, { contentType: string; body: string }>();

  /** @param body - the `body` option, checked */
  constructor(private readonly body: BodyOption) {}

  /**
   * The built-in bodies depend on a handful of values that repeat from one
   * refusal to the next (status, reason, Retry-After, the violated policies),
   * so each distinct one is rendered once: under a flood of refusals the JSON
   * would otherwise be rebuilt and re-serialised for every request.
   */
  render(info: RefusalInfo, problemType: string): { contentType: string; body: string } {
    if (typeof this.body === 'function') return this.renderUncached(info, problemType);
    const memoKey = `${info.reason}|${info.status}|${problemType}|${info.retryAfterSeconds}|${info.missingHeader}|${info.violatedPolicies.join('\u0000')}`;
    let rendered = this.rendered.get(memoKey);
    if (rendered === undefined) {
      rendered = this.renderUncached(info, problemType);
      if (this.rendered.size >= MAX_MEMOISED_BODIES) this.rendered.clear();
      this.rendered.set(memoKey, rendered);
    }
    return rendered;
  }

  /** Renders one body: the body function's answer, plain text, or problem details. */
  private renderUncached(info: RefusalInfo, problemType: string): { contentType: string; body: string } {
    if (typeof this.body === 'function') {
      const value = this.body(info);
      if (typeof value === 'string') return { contentType: 'text/plain; charset=utf-8', body: value };
      return { contentType: 'application/json; charset=utf-8', body: jsonBody(value) };
    }
    const title = STATUS_CODES[info.status] ?? 'Error';
    let detail: string;
    let type = 'about:blank';
    const extra: Record<string, unknown> = {};
    switch (info.reason) {
      case 'limited':
        type = problemType;
        detail =
          info.retryAfterSeconds === undefined
            ? 'Request quota exceeded.'
            : `Request quota exceeded; retry in ${info.retryAfterSeconds} second${info.retryAfterSeconds === 1 ? '' : 's'}.`;
        extra['violated-policies'] = info.violatedPolicies;
        break;
      case 'denied':
        detail = 'This client is not allowed to make requests.';
        break;
      case 'missing-key':
        detail = `Send your API key in the ${info.missingHeader ?? 'API key'} header.`;
        break;
      case 'store-error':
        detail = 'The rate limiter is unavailable; try again shortly.';
        break;
    }
    if (this.body === 'text') return { contentType: 'text/plain; charset=utf-8', body: `${detail}\n` };
    // RFC 9457: with type "about:blank" the title is the status phrase.
    const problem = { type, title: type === 'about:blank' ? title : titleFor(type, title), status: info.status, detail, ...extra };
    return { contentType: 'application/problem+json', body: JSON.stringify(problem) };
  }
}

/**
 * A body function's non-string answer as JSON. Undefined, a function or a
 * symbol has no JSON text, and a BigInt or a cycle makes stringify throw:
 * each is the caller's mistake, reported as such rather than sent as an
 * empty or broken body.
 */
function jsonBody(value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `the body function must return a string or a JSON-serialisable value; serialising it failed: ${(error as Error).message}`,
    );
  }
  if (text === undefined) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `the body function must return a string or a JSON-serialisable value; got ${describeValue(value)}.`,
    );
  }
  return text;
}

function titleFor(type: string, fallback: string): string {
  if (type === QUOTA_EXCEEDED_TYPE) return 'Request cannot be satisfied as assigned quota has been exceeded';
  if (type === REDUCED_CAPACITY_TYPE) return 'Request cannot be satisfied due to temporary server capacity constraints';
  return fallback;
}

/** Freezes a shared outcome and its header list, so no adapter can change what other requests will be sent. */
function freezeOutcome(outcome: HttpOutcome): HttpOutcome {
  if (outcome.action === 'respond') Object.freeze(outcome.headers);
  return Object.freeze(outcome);
}

/** Distinct shared refusals an HttpLimiter keeps before it starts over. */
const MAX_MEMOISED_REFUSALS = 256;

/**
 * Single-policy refusals, shared. Under a flood the same response is built
 * again and again; with no hook or body function to see each request, its
 * fields, Retry-After and body depend only on the whole seconds left (and,
 * for the legacy reset, the second the wait ends), so each distinct one is
 * built once and shared, frozen.
 */
export class SharedRefusals {
  private readonly known = new Map<number | string, HttpOutcome>();

  /**
   * @param shares - false when a hook or body function must see each refusal
   * @param legacyHeaders - whether the legacy reset timestamp is sent (it depends on the second the wait ends)
   * @param spread - draws the ms `retryAfterJitter` adds to a wait; undefined without jitter
   */
  constructor(
    private readonly shares: boolean,
    private readonly legacyHeaders: boolean,
    private readonly spread?: () => number,
  ) {}

  /**
   * The shared refusal for `decision`, built by `build(context, decision,
   * retryAfter)` the first time; a fresh one when it may not be shared.
   * `retryAfter` is the Retry-After drawn for this refusal when jitter is on
   * (part of what the shared response depends on), else undefined and
   * `build` works it out. `build` is made once by the caller and gets what
   * it needs as arguments, so a flood of refusals allocates no closure per
   * request.
   */
  share<C>(
    decision: Decision,
    context: C,
    build: (context: C, decision: Decision, retryAfter: number | undefined) => HttpOutcome,
  ): HttpOutcome {
    if (!this.shares || decision.remaining !== 0 || decision.source === 'fail-closed') return build(context, decision, undefined);
    const ms = decision.retryAfterMs;
    if (!Number.isFinite(ms)) return build(context, decision, undefined);
    const real = Math.ceil(ms / 1000);
    // With jitter the response also depends on the Retry-After drawn: one shared response per value drawn, so clients
    // refused in the same second are still told different seconds.
    const retryAfter = this.spread === undefined ? undefined : Math.max(1, Math.ceil((ms + this.spread()) / 1000));
    const seconds = retryAfter === undefined ? `${real}` : `${real}+${retryAfter}`;
    const key = this.legacyHeaders ? `${seconds}:${Math.ceil((Date.now() + ms) / 1000)}` : seconds;
    const known = this.known.get(key);
    if (known !== undefined) return known;
    const outcome = build(context, decision, retryAfter);
    if (this.known.size >= MAX_MEMOISED_REFUSALS) this.known.clear();
    this.known.set(key, freezeOutcome(outcome));
    return outcome;
  }
}
