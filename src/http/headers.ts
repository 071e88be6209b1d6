/** Rate-limit response header builders. */
/**
 * IETF RateLimit / RateLimit-Policy (current draft), the draft-6 and draft-7 forms, legacy X-RateLimit-*, and
 * Retry-After.
 */
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';

/**
 * Which header family to send.
 *
 * - `"ietf"`: draft-ietf-httpapi-ratelimit-headers, the syntax of drafts 08
 *   to 11: `RateLimit-Policy: "burst";q=10;w=1, "daily";q=1000;w=86400` and
 *   `RateLimit: "burst";r=9;t=1, "daily";r=999;t=86400`, Structured Field
 *   lists with one item per policy.
 * - `"draft-7"`: `RateLimit: limit=10, remaining=9, reset=1` (one policy,
 *   the one nearest to refusing) and `RateLimit-Policy: 10;w=1, 1000;w=86400`.
 * - `"draft-6"`: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`
 *   (one policy) and `RateLimit-Policy` as in draft-7.
 * - `"legacy"`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, and
 *   `X-RateLimit-Reset` as a Unix time in seconds (GitHub's convention).
 */
export type HeaderMode = 'ietf' | 'draft-7' | 'draft-6' | 'legacy';

/** All header modes. */
export const HEADER_MODES: readonly HeaderMode[] = ['ietf', 'draft-7', 'draft-6', 'legacy'];

/** Header names each mode writes; two modes that share a name cannot be combined. */
const MODE_FIELDS: Readonly<Record<HeaderMode, readonly string[]>> = {
  ietf: ['ratelimit', 'ratelimit-policy'],
  'draft-7': ['ratelimit', 'ratelimit-policy'],
  'draft-6': ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy'],
  legacy: ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'],
};

/** One policy's state as reported to the client. */
export interface PolicyReport {
  /** Policy name, as it appears in the IETF fields and in `violated-policies`. */
  readonly name: string;
  /** The key this policy counted the request under, when the policy has its own `key` (else the route's key). */
  readonly key?: string;
  /** The limit (quota units per window). */
  readonly limit: number;
  /** The window in ms. */
  readonly windowMs: number;
  /** Whether this policy admitted the request. */
  readonly allowed: boolean;
  /** Units left. */
  readonly remaining: number;
  /** ms until the quota is whole again; may be Infinity (blocked until unblocked). */
  readonly resetMs: number;
  /** ms until a retry could pass; 0 when allowed; may be Infinity. */
  readonly retryAfterMs: number;
  /**
   * True when the policy's limiter is in shadow mode and would have refused:
   * `allowed` is true, and `remaining`, `resetMs` and `retryAfterMs` are the
   * refusal's. Absent otherwise.
   */
  readonly shadowLimited?: true;
}

/**
 * One response header: name (in its usual capitalisation; HTTP names are
 * case-insensitive), value, and whether it is a Structured Field List that
 * may be combined with a value already on the response. The IETF fields are:
 * when an app-wide and a route middleware both answer for a request, the
 * client sees every policy instead of only the last middleware's.
 */
export type HeaderPair = readonly [name: string, value: string, list?: boolean];

/**
 * Validates a `headers` option and returns the modes it names.
 * @throws FloodgateError INVALID_OPTIONS for an unknown mode, CONFLICTING_OPTIONS for modes writing the same field
 */
export function parseHeaderModes(value: unknown): readonly HeaderMode[] {
  if (value === undefined) return ['ietf'];
  if (value === 'none' || value === false) return [];
  const list = Array.isArray(value) ? value : [value];
  const modes: HeaderMode[] = [];
  for (const mode of list) {
    if (!HEADER_MODES.includes(mode as HeaderMode)) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `headers must be one of ${[...HEADER_MODES, 'none'].map((m) => JSON.stringify(m)).join(', ')}, or a list of modes; got ${describeValue(mode)}.`,
      );
    }
    for (const earlier of modes) {
      const shared = MODE_FIELDS[mode as HeaderMode].filter((f) => MODE_FIELDS[earlier].includes(f));
      if (shared.length > 0) {
        throw new FloodgateError(
          ErrorCode.CONFLICTING_OPTIONS,
          `headers ${JSON.stringify(earlier)} and ${JSON.stringify(mode)} both write ${shared.join(', ')}; pick one (only "legacy" combines with another mode).`,
        );
      }
    }
    modes.push(mode as HeaderMode);
  }
  return modes;
}

/**
 * The header fields for `reports` in each of `modes`.
 *
 * @param nowMs - current time, for the legacy reset timestamp
 */
export function rateLimitHeaders(modes: readonly HeaderMode[], reports: readonly PolicyReport[], nowMs: number): HeaderPair[] {
  if (reports.length === 0) return [];
  const out: HeaderPair[] = [];
  for (const mode of modes) {
    switch (mode) {
      case 'ietf':
        out.push(['RateLimit-Policy', reports.map(ietfPolicyItem).join(', '), true]);
        out.push(['RateLimit', refusingFirst(reports).map(ietfLimitItem).join(', '), true]);
        break;
      case 'draft-7': {
        const b = bindingPolicy(reports);
        out.push(['RateLimit-Policy', reports.map(draftPolicyItem).join(', ')]);
        const reset = effectiveWindowSeconds(b);
        out.push(['RateLimit', `limit=${b.limit}, remaining=${b.remaining}${reset === undefined ? '' : `, reset=${reset}`}`]);
        break;
      }
      case 'draft-6': {
        const b = bindingPolicy(reports);
        out.push(['RateLimit-Policy', reports.map(draftPolicyItem).join(', ')]);
        out.push(['RateLimit-Limit', String(b.limit)]);
        out.push(['RateLimit-Remaining', String(b.remaining)]);
        const reset = effectiveWindowSeconds(b);
        if (reset !== undefined) out.push(['RateLimit-Reset', String(reset)]);
        break;
      }
      case 'legacy': {
        const b = bindingPolicy(reports);
        out.push(['X-RateLimit-Limit', String(b.limit)]);
        out.push(['X-RateLimit-Remaining', String(b.remaining)]);
        const ms = b.allowed ? b.resetMs : b.retryAfterMs;
        if (Number.isFinite(ms)) out.push(['X-RateLimit-Reset', String(Math.ceil((nowMs + ms) / 1000))]);
        break;
      }
    }
  }
  return out;
}

/**
 * The reports in the order the `RateLimit` field lists them: every policy,
 * so the client sees each one's state, but on a refusal the refusing ones
 * first (longest wait first), so a client that reads one item reads the one
 * that refused it. The order of `RateLimit-Policy` never changes.
 */
function refusingFirst(reports: readonly PolicyReport[]): readonly PolicyReport[] {
  let refusals = 0;
  for (const r of reports) if (!r.allowed) refusals += 1;
  // Admitted, or refused by the first and only refusing policy: already in order, nothing to allocate.
  if (refusals === 0 || (refusals === 1 && !reports[0]!.allowed)) return reports;
  const refused = reports.filter((r) => !r.allowed).sort((a, b) => b.retryAfterMs - a.retryAfterMs);
  return [...refused, ...reports.filter((r) => r.allowed)];
}

/** The value to set for `pair` when the response already has `existing` for that name. */
export function combinedValue(pair: HeaderPair, existing: unknown): string {
  const [, value, list] = pair;
  if (list !== true || existing === undefined || existing === null || existing === '') return value;
  const before = Array.isArray(existing) ? existing.join(', ') : String(existing);
  return `${before}, ${value}`;
}

/**
 * `Retry-After` in whole seconds, rounded up and at least 1, for the
 * policies that refused; undefined when none did or the wait is unbounded
 * (a key blocked until unblocked has no honest number to send).
 * @param spreadMs - added to the wait before rounding up (the `retryAfterJitter` option's draw): never earlier, only later
 */
export function retryAfterSeconds(reports: readonly PolicyReport[], spreadMs = 0): number | undefined {
  let ms = -1;
  for (const r of reports) if (!r.allowed && r.retryAfterMs > ms) ms = r.retryAfterMs;
  if (ms < 0 || !Number.isFinite(ms)) return undefined;
  return Math.max(1, Math.ceil((ms + spreadMs) / 1000));
}

/**
 * The policy a single-policy header form reports: a refusing one (the
 * longest wait) if any, else the one with the fewest units left (ties: the
 * later reset), which is the one a client must pace itself by.
 */
export function bindingPolicy(reports: readonly PolicyReport[]): PolicyReport {
  let best = reports[0]!;
  for (const r of reports.slice(1)) {
    if (best.allowed !== r.allowed) {
      if (!r.allowed) best = r;
      continue;
    }
    if (!r.allowed) {
      if (r.retryAfterMs > best.retryAfterMs) best = r;
    } else if (r.remaining < best.remaining || (r.remaining === best.remaining && r.resetMs > best.resetMs)) {
      best = r;
    }
  }
  return best;
}

/**
 * Seconds of the effective window (`t`, `reset`). For a policy that refused,
 * the time until a retry could pass (so that Retry-After never points
 * earlier than the end of the effective window, as the draft asks); else the
 * time until the quota is whole. Undefined when unbounded.
 */
export function effectiveWindowSeconds(r: PolicyReport): number | undefined {
  const ms = r.allowed ? r.resetMs : r.retryAfterMs;
  if (!Number.isFinite(ms)) return undefined;
  return Math.max(0, Math.ceil(ms / 1000));
}

/**
 * The `w` parameter: the window in whole seconds, rounded up. Undefined for
 * sub-second windows, where any whole number would misstate the rate by at
 * least double; `w` is optional, so it is left out.
 */
export function windowSeconds(windowMs: number): number | undefined {
  return windowMs < 1000 ? undefined : Math.ceil(windowMs / 1000);
}

/**
 * Serialises a Structured Field String (RFC 9651 §4.1.6).
 * @throws FloodgateError INVALID_OPTIONS for characters outside printable ASCII, which a String cannot carry
 */
export function sfString(value: string): string {
  // Policy names are few and fixed per limiter, and every response quotes them again.
  const known = quoted.get(value);
  if (known !== undefined) return known;
  const out = quote(value);
  if (quoted.size < MAX_QUOTED) quoted.set(value, out);
  return out;
}

/** sfString's results by input; bounded only against misuse, since names come from configuration. */
const quoted = new Map<string, string>();
const MAX_QUOTED = 1024;

function quote(value: string): string {
  if (!/^[\x20-\x7e]*$/.test(value)) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `policy name ${JSON.stringify(value)} must be printable ASCII so it can be sent as a Structured Field String.`,
    );
  }
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

function ietfPolicyItem(r: PolicyReport): string {
  const w = windowSeconds(r.windowMs);
  return `${sfString(r.name)};q=${r.limit}${w === undefined ? '' : `;w=${w}`}`;
}

function ietfLimitItem(r: PolicyReport): string {
  const t = effectiveWindowSeconds(r);
  return `${sfString(r.name)};r=${r.remaining}${t === undefined ? '' : `;t=${t}`}`;
}

function draftPolicyItem(r: PolicyReport): string {
  const w = windowSeconds(r.windowMs);
  return `${r.limit}${w === undefined ? '' : `;w=${w}`}`;
}
