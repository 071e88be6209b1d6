/** Verdicts: what the gateway does with a request once its rules have decided. */
/**
 * Forward it, or answer with a prepared refusal, built once per refusal shape.
 */
import type { IncomingMessage } from 'node:http';
import type { HttpLimiter, HttpOutcome, HeaderPair } from '../../http/index.js';
import type { KeyRefusal } from './key-check.js';
import type { Charge, ResponsePrice } from './rule-cost.js';
import type { NearLimit } from './near-limit.js';
import type { DecisionCell, DecisionOutcome } from '../runtime/metrics.js';
import { SlotHold, type Hold } from './rule-slots.js';
import { ErrorCode, isFloodgateError } from '../../index.js';

/** The outcomes a rule counts. */
export type RuleOutcome = Exclude<DecisionOutcome, 'unmatched'>;

/** The part of a compiled rule a verdict is built from: the limiter that decided, how its cost settles, and where its outcomes are counted (a rule-set Rule is one). */
export interface DecidingRule {
  /** Decided about the request; a charge or a held slot is settled through it. */
  readonly limiter: HttpLimiter<IncomingMessage>;
  /** With `cost` or `count`: the units the request took, settled by its response; undefined for one unit per request. */
  readonly cost: ResponsePrice | undefined;
  /** With `concurrency`: an admitted request holds a slot until its response ends. */
  readonly holdsSlots: boolean;
  /** The rule's `floodgate_decisions_total` series. */
  readonly counts: Readonly<Record<RuleOutcome, DecisionCell>>;
  /** Counts admitted requests near a policy's limit (`floodgate_near_limit_total`); undefined for none. */
  readonly nearLimit?: NearLimit | undefined;
}

/** What the gateway does with a request after every rule that applies has decided. */
export type Verdict =
  /**
   * Forward it; add `headers` to the upstream's response; `charges` (rules
   * with `cost`) are committed when the response ends, and `holds` (the
   * slots of rules with `concurrency` and no cost) are freed then.
   */
  | {
      readonly forward: true;
      readonly headers: readonly HeaderPair[];
      readonly charges?: readonly Charge[];
      readonly holds?: readonly Hold[];
    }
  /** Answer it with this response. */
  | {
      readonly forward: false;
      readonly status: number;
      readonly headers: readonly HeaderPair[];
      readonly contentType: string;
      readonly body: string;
      /**
       * The same header fields, Content-Type and Content-Length included, as
       * the flat name/value list `res.writeHead` takes: set on verdicts that
       * are sent many times, since one writeHead costs less than a
       * setHeader per field.
       */
      readonly wire?: readonly string[];
    };

const NO_HEADERS: readonly HeaderPair[] = Object.freeze([]);
/** The verdict of a request every rule let through without headers to add; shared, never copied. */
export const FORWARD: Verdict = Object.freeze({ forward: true, headers: NO_HEADERS });

/** Runs `then` on a verdict {@link RuleSet.decide} returned, at once when it is not a promise. */
export function whenDecided(decided: Verdict | Promise<Verdict>, then: (verdict: Verdict) => void): void {
  if (decided instanceof Promise) void decided.then(then);
  else then(decided);
}

/** Counts an enforced rule's outcome and turns it into what the gateway does. */
export function verdictOf(rule: DecidingRule, outcome: HttpOutcome): Verdict {
  switch (outcome.action) {
    case 'continue':
      rule.counts.allowed.count += 1;
      if (rule.nearLimit !== undefined && outcome.info !== undefined) rule.nearLimit.note(outcome.info);
      if (rule.cost !== undefined) {
        const charge = rule.cost.charge(rule.limiter, outcome.info);
        if (charge !== undefined) return { forward: true, headers: outcome.headers, charges: [charge] };
      }
      // An allow-listed request (no info) took no slot.
      if (rule.holdsSlots && outcome.info !== undefined)
        return { forward: true, headers: outcome.headers, holds: [new SlotHold(rule.limiter, outcome.info)] };
      return outcome.headers.length === 0 ? FORWARD : { forward: true, headers: outcome.headers };
    case 'respond':
      rule.counts[refusalOutcome(outcome.status)].count += 1;
      return refusalVerdict(outcome);
    case 'error':
      // A client that left while its request waited: nobody to answer, nothing went wrong.
      if (isFloodgateError(outcome.error, ErrorCode.ABORTED)) return ABANDONED;
      rule.counts.error.count += 1;
      rule.limiter.reportError(outcome.error, undefined);
      return { forward: false, status: 500, headers: NO_HEADERS, contentType: 'application/problem+json', body: INTERNAL_ERROR_BODY };
  }
}

/**
 * Verdicts of the refusals HttpLimiter shares between requests (it freezes
 * those), each built once with its `wire` form: under a flood the same
 * refusal is sent for most requests.
 */
const sharedVerdicts = new WeakMap<HttpOutcome, Verdict>();

function refusalVerdict(outcome: HttpOutcome & { action: 'respond' }): Verdict {
  const shared = Object.isFrozen(outcome);
  if (shared) {
    const known = sharedVerdicts.get(outcome);
    if (known !== undefined) return known;
  }
  const { status, headers, contentType, body } = outcome;
  if (!shared) return { forward: false, status, headers, contentType, body };
  const wire: string[] = [];
  for (const [name, value] of headers) wire.push(name, value);
  wire.push('Content-Type', contentType, 'Content-Length', String(Buffer.byteLength(body)));
  const verdict: Verdict = Object.freeze({ forward: false, status, headers, contentType, body, wire: Object.freeze(wire) });
  sharedVerdicts.set(outcome, verdict);
  return verdict;
}

/** Verdicts of key refusals, one per refusal object (each rule builds its own once). */
const keyVerdicts = new WeakMap<KeyRefusal, Verdict>();

/** The verdict of a rule that refused a request for its API key (missing, repeated or invalid), built once per refusal. */
export function keyRefusalVerdict(rule: DecidingRule, refusal: KeyRefusal): Verdict {
  rule.counts[refusal.outcome].count += 1;
  let verdict = keyVerdicts.get(refusal);
  if (verdict === undefined) {
    const contentType = 'application/problem+json';
    const wire: string[] = [];
    for (const [name, value] of refusal.headers) wire.push(name, value);
    wire.push('Content-Type', contentType, 'Content-Length', String(Buffer.byteLength(refusal.body)));
    verdict = Object.freeze({
      forward: false,
      status: refusal.status,
      headers: refusal.headers,
      contentType,
      body: refusal.body,
      wire: Object.freeze(wire),
    });
    keyVerdicts.set(refusal, verdict);
  }
  return verdict;
}

const ABANDONED_BODY = JSON.stringify({ type: 'about:blank', title: 'Client Closed Request', status: 499 });
/** The verdict of a request whose client left while it waited: written to a closed connection, so never seen. */
const ABANDONED: Verdict = Object.freeze({
  forward: false,
  status: 499,
  headers: NO_HEADERS,
  contentType: 'application/problem+json',
  body: ABANDONED_BODY,
});

const INTERNAL_ERROR_BODY = JSON.stringify({ type: 'about:blank', title: 'Internal Server Error', status: 500 });

function refusalOutcome(status: number): 'limited' | 'missing_key' | 'store_error' | 'error' {
  if (status === 429) return 'limited';
  if (status === 401 || status === 400) return 'missing_key';
  if (status === 503) return 'store_error';
  return 'error';
}
