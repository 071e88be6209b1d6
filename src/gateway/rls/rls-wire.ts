/** The rate limit service's wire shapes. */
/**
 * A decoded RateLimitRequest read into an RlsRequestIn, and an RlsAnswer written as a RateLimitResponse message with
 * the RateLimit header fields.
 */
import { rateLimitHeaders, type HeaderMode, type PolicyReport } from '../../http/index.js';
import { MAX_ENTRIES, maxRequestsPerUnit, RLS_UNITS, UNIT_SECONDS, type RlsUnit } from './rls-config.js';
import { RESPONSE_CODES, RESPONSE_UNITS, type RateLimitResponseMessage } from './rls-codec.js';
import type { StructMessage } from './rls-metadata.js';
import type { RlsProtos } from './rls-protos.js';
import { MAX_DESCRIPTORS, RlsRequestError, type RlsAnswer, type RlsDescriptorIn, type RlsRequestIn } from './rls-decide.js';

/** How an answer is written (the `grpc` settings that shape it). */
export interface WireOptions {
  /** The RateLimit header fields to add (`grpc.headers`), or none. */
  readonly headers: readonly HeaderMode[] | 'none';
  /** Name each field's policy by its limit's name or place (`grpc.exposeLimitNames`) rather than `d` and the descriptor's position. */
  readonly exposeLimitNames: boolean;
  /** The dynamic metadata to set, when `grpc.dynamicMetadata` is on. */
  readonly dynamicMetadata?: StructMessage | undefined;
}

const MAX_KEY_LENGTH = 1_024;

function text(value: unknown, what: string): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw new RlsRequestError(`${what} must be a string`);
  if (value.length > MAX_KEY_LENGTH) throw new RlsRequestError(`${what} is longer than ${MAX_KEY_LENGTH} characters`);
  return value;
}

/** A protobufjs 64-bit value (a Long when the long package is installed, as it is beside protobufjs). */
interface LongLike {
  toNumber(): number;
}

function count(value: unknown, what: string): number {
  const n =
    typeof value === 'object' && value !== null && typeof (value as LongLike).toNumber === 'function'
      ? (value as LongLike).toNumber()
      : value;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) throw new RlsRequestError(`${what} must be a whole number`);
  return n;
}

/**
 * Reads a decoded RateLimitRequest (see rls-protos.ts).
 * @param units - RateLimitUnit's lower-case names by number
 * @throws RlsRequestError for a field that cannot be used
 */
export function readRequest(raw: unknown, units: RlsProtos['overrideUnits']): RlsRequestIn {
  const r = (raw ?? {}) as { domain?: unknown; descriptors?: unknown; hits_addend?: unknown };
  const list = Array.isArray(r.descriptors) ? (r.descriptors as unknown[]) : [];
  if (list.length > MAX_DESCRIPTORS) throw new RlsRequestError(`at most ${MAX_DESCRIPTORS} descriptors per request`);
  const descriptors = list.map((item, i): RlsDescriptorIn => {
    const d = (item ?? {}) as { entries?: unknown; limit?: unknown; hits_addend?: unknown };
    const given = Array.isArray(d.entries) ? (d.entries as unknown[]) : [];
    if (given.length > MAX_ENTRIES) throw new RlsRequestError(`descriptors[${i}] has more than ${MAX_ENTRIES} entries`);
    const entries = given.map((e, j) => {
      const entry = (e ?? {}) as { key?: unknown; value?: unknown };
      const key = text(entry.key, `descriptors[${i}].entries[${j}].key`);
      if (key === '') throw new RlsRequestError(`descriptors[${i}].entries[${j}].key must not be empty`);
      return { key, value: text(entry.value, `descriptors[${i}].entries[${j}].value`) };
    });
    let override: RlsDescriptorIn['override'];
    if (d.limit !== undefined && d.limit !== null) {
      const l = d.limit as { requests_per_unit?: unknown; unit?: unknown };
      const unit = (typeof l.unit === 'number' ? units.get(l.unit) : undefined) ?? '';
      if (!(RLS_UNITS as readonly string[]).includes(unit)) throw new RlsRequestError(`descriptors[${i}].limit.unit must be a known unit`);
      const requestsPerUnit = count(l.requests_per_unit, `descriptors[${i}].limit.requests_per_unit`);
      // As the config loader checks a file's limits: past this the counts would not stay exact, and the limiter refuses it.
      if (requestsPerUnit > maxRequestsPerUnit(unit as RlsUnit))
        throw new RlsRequestError(
          `descriptors[${i}].limit.requests_per_unit must be at most ${maxRequestsPerUnit(unit as RlsUnit)} per ${unit} (limit × window under 2^50 ms)`,
        );
      override = { requestsPerUnit, unit: unit as RlsUnit };
    }
    const addend = d.hits_addend as { value?: unknown } | null | undefined;
    const hitsAddend = addend === undefined || addend === null ? undefined : count(addend.value ?? 0, `descriptors[${i}].hits_addend`);
    return { entries, ...(override === undefined ? {} : { override }), ...(hitsAddend === undefined ? {} : { hitsAddend }) };
  });
  return { domain: text(r.domain, 'domain'), descriptors, hitsAddend: count(r.hits_addend ?? 0, 'hits_addend') };
}

/** The response's enum numbers without loading the .proto files. */
const RESPONSE_ENUMS: Pick<RlsProtos, 'codes' | 'responseUnits'> = { codes: RESPONSE_CODES, responseUnits: RESPONSE_UNITS };

function duration(ms: number): { seconds: number; nanos: number } {
  const whole = Math.max(0, Math.ceil(ms));
  return { seconds: Math.floor(whole / 1000), nanos: (whole % 1000) * 1_000_000 };
}

/**
 * Writes `answer` as a RateLimitResponse message, with the RateLimit fields of `options.headers` for every descriptor
 * that had a limit (each policy named `d` and the descriptor's position unless names are exposed: the limits' names
 * and places are the operator's, not the client's) and the dynamic metadata when given.
 * @param protos - the enums' numbers: by default rls-codec.ts's, the shipped .proto files' own
 */
export function writeResponse(
  answer: RlsAnswer,
  options: WireOptions,
  protos: Pick<RlsProtos, 'codes' | 'responseUnits'> = RESPONSE_ENUMS,
  nowMs = Date.now(),
): RateLimitResponseMessage {
  const reports: PolicyReport[] = [];
  const { codes, responseUnits } = protos;
  const modes = options.headers;
  const statuses = answer.statuses.map((s, i) => {
    if (s.limit !== undefined && modes !== 'none') {
      const windowMs = UNIT_SECONDS[s.limit.unit] * 1000;
      const limited = s.outcome === 'over_limit' || s.outcome === 'shadow_over_limit';
      const resetMs = s.resetMs ?? windowMs;
      reports.push({
        name: options.exposeLimitNames ? (s.policyName ?? s.metricKey) : `d${i}`,
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
