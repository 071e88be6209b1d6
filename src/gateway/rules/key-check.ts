/** Checks on an API-key header before a rule counts it. */
/**
 * The header sent once (a repeated one is ambiguous, 400), the rule's validation (length, pattern, allow list; 401),
 * and the allow list kept in Redis.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { RequestView } from '../../http/index.js';
import type { KeySettings, PolicySettings } from '../config/settings.js';
import type { KnownKeyAnswer, KnownKeys } from './known-keys.js';

/** A refusal the key check answers with, built once per rule and sent as it is. */
export interface KeyRefusal {
  /** 400 (ambiguous key), 401 (invalid key) or 503 (the allow list in Redis cannot answer now). */
  readonly status: 400 | 401 | 503;
  /** The `floodgate_decisions_total` outcome. */
  readonly outcome: 'missing_key' | 'invalid_key' | 'store_error';
  /** Response fields besides Content-Type. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** The problem+json body. */
  readonly body: string;
}

/** Inspects one request's key header; undefined when the rule may count it (a missing key is the limiter's to answer). */
export type KeyCheck = (view: RequestView<IncomingMessage>) => KeyRefusal | undefined;

/**
 * The checks of every header a rule counts by: its own key's (with its
 * validation), and those of policies keyed by another header (sent once,
 * else 400: a policy's key takes no validation of its own). Undefined when
 * no key of the rule is a header.
 */
export function keyCheck(key: KeySettings, policies: readonly PolicySettings[] = []): KeyCheck | undefined {
  const checks: KeyCheck[] = [];
  const own = headerCheck(key);
  if (own !== undefined) checks.push(own);
  const seen = new Set(key.kind === 'header' ? [key.header] : []);
  for (const p of policies) {
    if (p.key?.kind !== 'header' || seen.has(p.key.header)) continue;
    seen.add(p.key.header);
    checks.push(headerCheck(p.key)!);
  }
  if (checks.length <= 1) return checks[0];
  return (view) => {
    for (const check of checks) {
      const refusal = check(view);
      if (refusal !== undefined) return refusal;
    }
    return undefined;
  };
}

/**
 * The check of one header key, or undefined for another kind of key.
 *
 * A repeated key header is refused whatever the validation: node joins the
 * copies into `a, b`, which would count as a key nobody owns while the
 * upstream may read either copy (one of them the victim's). The joined form
 * is recognised by its comma, so a request with one copy pays one
 * `includes` and nothing else; a header node keeps one copy of is looked
 * for in the raw lines (see {@link keepsFirstCopyOnly}).
 */
function headerCheck(key: KeySettings): KeyCheck | undefined {
  if (key.kind !== 'header') return undefined;
  const name = key.header;
  const repeated = refusal(400, 'Bad Request', `The ${name} header appears more than once; send the API key once.`, []);
  const v = key.validation;
  const firstCopyOnly = keepsFirstCopyOnly(name);
  const invalid = refusal(401, 'Unauthorized', `The API key in ${name} is not valid.`, [['WWW-Authenticate', `ApiKey header="${name}"`]]);
  return (view) => {
    const raw = view.headers[name];
    if (raw === undefined) return undefined;
    const value = typeof raw === 'string' ? raw : String(raw);
    if ((firstCopyOnly || value.includes(',')) && sentMoreThanOnce(view.raw, view.headers, name)) return repeated;
    if (v === undefined) return undefined;
    const trimmed = value.trim();
    // An empty value is a missing key: the limiter answers it (401, or the IP fallback).
    if (trimmed === '') return undefined;
    if (v.maxLength !== undefined && trimmed.length > v.maxLength) return invalid;
    if (v.pattern !== undefined && !v.pattern.test(trimmed)) return invalid;
    if (v.allowList !== undefined && !v.allowList.has(trimmed)) return invalid;
    return undefined;
  };
}

/**
 * Headers node keeps only the first copy of (node:http's IncomingMessage
 * drops the rest), so a repeat leaves no comma to find: for these the raw
 * lines are always looked at. A key read from the first copy while a
 * proxy behind (nginx's `auth_request`, for one) passes both on is a key
 * the client chose twice.
 */
const FIRST_COPY_ONLY = new Set([
  'age',
  'authorization',
  'content-length',
  'content-type',
  'etag',
  'expires',
  'from',
  'host',
  'if-modified-since',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'referer',
  'retry-after',
  'server',
  'user-agent',
]);

/** Whether node keeps only the first copy of header `name` (lower case), so a repeat must be looked for in the raw lines. */
export function keepsFirstCopyOnly(name: string): boolean {
  return FIRST_COPY_ONLY.has(name);
}

/** True when the request carried header `name` in more than one field line. */
export function sentMoreThanOnce(raw: IncomingMessage | undefined, headers: IncomingHttpHeaders, name: string): boolean {
  const lines = raw?.rawHeaders;
  // Without the raw lines (a caller that built its own view) a comma is all there is to go by: refuse.
  if (lines === undefined || raw?.headers !== headers) return true;
  let seen = 0;
  for (let i = 0; i < lines.length; i += 2) {
    if (lines[i]!.length === name.length && lines[i]!.toLowerCase() === name && ++seen > 1) return true;
  }
  return false;
}

/** A problem+json refusal, built once (a verdict is cached per refusal object); `missing` counts it as `missing_key`. */
export function refusal(
  status: 400 | 401 | 503,
  title: string,
  detail: string,
  headers: ReadonlyArray<readonly [string, string]>,
  missing = false,
): KeyRefusal {
  return Object.freeze({
    status,
    outcome: status === 503 ? 'store_error' : missing ? 'missing_key' : 'invalid_key',
    headers,
    body: JSON.stringify({ type: 'about:blank', title, status, detail }),
  });
}

/** Asks a rule's allow list in Redis about one request's key: undefined to count it, else the refusal; a promise when the cache does not know. */
export type KnownKeyCheck = (view: RequestView<IncomingMessage>) => KeyRefusal | undefined | Promise<KeyRefusal | undefined>;

/**
 * The check of a rule key's allow list in Redis, run after {@link keyCheck}
 * (so a key of the wrong length or shape never costs a lookup). A key the
 * set does not hold gets the same 401 as any invalid key. When Redis cannot
 * answer, `failOpen` admits the key (the rule counts it under its own
 * failure policy); otherwise it is answered 503. Too many lookups under
 * way is always 503: admitting would let a flood of made-up keys in.
 */
export function knownKeyCheck(key: KeySettings, known: KnownKeys, failOpen: boolean): KnownKeyCheck | undefined {
  if (key.kind !== 'header') return undefined;
  const name = key.header;
  const invalid = refusal(401, 'Unauthorized', `The API key in ${name} is not valid.`, [['WWW-Authenticate', `ApiKey header="${name}"`]]);
  const retry: ReadonlyArray<readonly [string, string]> = [['Retry-After', '1']];
  const unavailable = refusal(503, 'Service Unavailable', 'The list of known API keys cannot be read right now; try again shortly.', retry);
  const busy = refusal(503, 'Service Unavailable', 'Too many API keys are being checked at once; try again shortly.', retry);
  const answer = (a: KnownKeyAnswer): KeyRefusal | undefined => {
    switch (a) {
      case 'known':
        return undefined;
      case 'unknown':
        return invalid;
      case 'busy':
        return busy;
      case 'unavailable':
        return failOpen ? undefined : unavailable;
    }
  };
  return (view) => {
    const raw = view.headers[name];
    if (raw === undefined) return undefined;
    const trimmed = (typeof raw === 'string' ? raw : String(raw)).trim();
    // A missing key is the limiter's to answer (401, or the IP fallback), as in the other checks.
    if (trimmed === '') return undefined;
    const a = known.check(trimmed);
    return typeof a === 'string' ? answer(a) : a.then(answer);
  };
}
