/** The rate limit service's wire shapes. */
/**
 * An RlsAnswer written as a RateLimitResponse message with the RateLimit header fields.
 */
import { rateLimitHeaders, type HeaderMode, type PolicyReport } from '../../http/index.js';
import { UNIT_SECONDS } from './rls-config.js';
import { printableAscii } from './printable-ascii.js';
import { RESPONSE_CODES, RESPONSE_UNITS, type RateLimitResponseMessage } from './rls-codec.js';
import type { StructMessage } from './rls-metadata.js';
import type { RlsAnswer } from './rls-decide.js';

/** How an answer is written (the `grpc` settings that shape it). */
export interface WireOptions {
  /** The RateLimit header fields to add (`grpc.headers`), or none. */
  readonly headers: readonly HeaderMode[] | 'none';
  /** Name each field's policy by its limit's name or place (`grpc.exposeLimitNames`) rather than `d` and the descriptor's position. */
  readonly exposeLimitNames: boolean;
  /** The dynamic metadata to set, when `grpc.dynamicMetadata` is on. */
  readonly dynamicMetadata?: StructMessage | undefined;
}

function duration(ms: number): { seconds: number; nanos: number } {
  const whole = Math.max(0, Math.ceil(ms));
  return { seconds: Math.floor(whole / 1000), nanos: (whole % 1000) * 1_000_000 };
}

/**
 * Writes `answer` as a RateLimitResponse message, with the RateLimit fields of `options.headers` for every descriptor
 * that had a limit (each policy named `d` and the descriptor's position unless names are exposed: the limits' names
 * and places are the operator's, not the client's) and the dynamic metadata when given.
 */
export function writeResponse(answer: RlsAnswer, options: WireOptions, nowMs = Date.now()): RateLimitResponseMessage {
  const reports: PolicyReport[] = [];
  const codes = RESPONSE_CODES;
  const responseUnits = RESPONSE_UNITS;
  const modes = options.headers;
  const statuses = answer.statuses.map((s, i) => {
    if (s.limit !== undefined && modes !== 'none') {
      const windowMs = UNIT_SECONDS[s.limit.unit] * 1000;
      const limited = s.outcome === 'over_limit' || s.outcome === 'shadow_over_limit';
      const resetMs = s.resetMs ?? windowMs;
      reports.push({
        // Printable ASCII, as a Structured Field String must be: a name from an entry key Envoy sent may be anything.
        name: options.exposeLimitNames ? printableAscii(s.policyName ?? s.metricKey) : `d${i}`,
        limit: s.limit.requestsPerUnit,
        windowMs,
        allowed: !limited,
        remaining: s.remaining,
        resetMs,
        retryAfterMs: limited ? resetMs : 0,
      });
    }
    return {
      code: s.code === 'OK' ? codes.OK : codes.OVER_LIMIT,
      current_limit:
        s.limit === undefined
          ? null
          : { name: s.limit.name ?? '', requests_per_unit: s.limit.requestsPerUnit, unit: responseUnits.get(s.limit.unit) ?? 0 },
      limit_remaining: s.remaining,
      duration_until_reset: s.limit === undefined || s.resetMs === undefined ? null : duration(s.resetMs),
    };
  });
  const headers = modes === 'none' ? [] : rateLimitHeaders(modes, reports, nowMs);
  return {
    overall_code: answer.overall === 'OK' ? codes.OK : codes.OVER_LIMIT,
    statuses,
    response_headers_to_add: headers.map(([key, value]) => ({ key, value })),
    dynamic_metadata: options.dynamicMetadata ?? null,
  };
}
