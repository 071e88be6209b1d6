/** ShouldRateLimit's and Health/Check's protobuf messages to and from bytes by hand, without protobufjs at run time. */
/**
 * The decoder reads a RateLimitRequest in one pass straight into an RlsRequestIn, with the checks readRequest makes
 * (rls-wire.ts). The RateLimitResponse encoder is in rls-response-encoder.ts, re-exported here: one door for the
 * servers that take bytes in and give bytes out.
 */
import { MAX_ENTRIES, maxRequestsPerUnit, type RlsUnit } from './rls-config.js';
import { MAX_DESCRIPTORS, RlsRequestError, type RlsDescriptorIn, type RlsRequestIn } from './rls-decide.js';
import type { DescriptorEntry } from './rls-match.js';

/**
 * envoy.type.v3.RateLimitUnit (a descriptor's `limit.unit`) by number, as the shipped .proto has it: SECOND 1 to YEAR 6.
 * It has no WEEK (only the response's Unit does), so an override in weeks is refused as an unknown unit, as before.
 */
export const OVERRIDE_UNITS: ReadonlyMap<number, RlsUnit> = new Map<number, RlsUnit>([
  [1, 'second'],
  [2, 'minute'],
  [3, 'hour'],
  [4, 'day'],
  [5, 'month'],
  [6, 'year'],
]);

/** RateLimitResponse.Code's numbers (UNKNOWN is 0). */
export const RESPONSE_CODES = { OK: 1, OVER_LIMIT: 2 } as const;

/** RateLimitResponse.RateLimit.Unit's numbers by floodgate's unit name (UNKNOWN is 0; WEEK is 7, after YEAR). */
export const RESPONSE_UNITS: ReadonlyMap<string, number> = new Map<RlsUnit, number>([
  ['second', 1],
  ['minute', 2],
  ['hour', 3],
  ['day', 4],
  ['week', 7],
  ['month', 5],
  ['year', 6],
]);

/** grpc.health.v1.HealthCheckResponse.ServingStatus's numbers of the two statuses the service answers. */
const SERVING_STATUS = { SERVING: 1, NOT_SERVING: 2 } as const;

/** As readRequest: a key, value or domain longer than this (UTF-16 code units) is refused. */
const MAX_KEY_LENGTH = 1_024;

/** The override units by number, for the decoder's hot path (undefined: not a known unit). */
const UNIT_BY_NUMBER: ReadonlyArray<RlsUnit | undefined> = Array.from({ length: 8 }, (_, n) => OVERRIDE_UNITS.get(n));

/*
 * proto3 says a string field MUST hold valid UTF-8, and Go's gRPC refuses one that does not; protobufjs replaced
 * each bad sequence with U+FFFD, so two different keys could name one counter. Refused here (fatal), the BOM kept.
 */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Buffer's own ASCII copy: twice as fast as TextDecoder on short keys (not in @types/node). */
type SliceBuffer = Buffer & { latin1Slice(start: number, end: number): string };

const EMPTY = Buffer.alloc(0) as SliceBuffer;

// The decoder's cursor: one decode runs at a time (it is synchronous), so module state saves passing a reader around.
let buf = EMPTY;
let pos = 0;
/** The high 32 bits of the last varint read by readVarint. */
let high = 0;
/** The first refusal readRequest would make among the descriptors read so far (readRequest's order), or ''. */
let refusal = '';

function malformed(what: string): RlsRequestError {
  return new RlsRequestError(`malformed message: ${what} at byte ${pos}`);
}

/** Reads a varint's low 32 bits (unsigned), its high ones in `high`; more than 10 bytes or past 64 bits is malformed. */
function readVarint(limit: number): number {
  let lo = 0;
  let hi = 0;
  for (let i = 0; i < 10; i++) {
    if (pos >= limit) throw malformed('truncated varint');
    const b = buf[pos++]!;
    const bits = b & 0x7f;
    if (i < 4) lo |= bits << (7 * i);
    else if (i === 4) {
      lo |= bits << 28;
      hi = bits >>> 4;
    } else hi |= bits << (7 * i - 32);
    if (b < 0x80) {
      if (i === 9 && b > 1) throw malformed('varint past 64 bits');
      high = hi >>> 0;
      return lo >>> 0;
    }
  }
  throw malformed('varint longer than 10 bytes');
}

/** A uint32 or enum field: the varint's low 32 bits, as protobufjs and Go read them. */
function readUint32(limit: number): number {
  if (pos < limit && buf[pos]! < 0x80) return buf[pos++]!;
  return readVarint(limit);
}

/** A uint64 field, or -1 when above 2^53 - 1 (it would not stay exact as a number). */
function readUint64(limit: number): number {
  const lo = readVarint(limit);
  return high >= 0x20_0000 ? -1 : high * 0x1_0000_0000 + lo;
}

/** A tag: field number × 8 + wire type. Field 0, and numbers past 2^29 - 1, are malformed. */
function readTag(limit: number): number {
  let tag: number;
  if (pos < limit && buf[pos]! < 0x80) tag = buf[pos++]!;
  else {
    tag = readVarint(limit);
    if (high !== 0) throw malformed('field number past 2^29 - 1');
  }
  if (tag >>> 3 === 0) throw malformed('field number 0');
  return tag;
}

/** A length-delimited field's length, checked against what is left of the enclosing message. */
function readLength(limit: number): number {
  let n: number;
  if (pos < limit && buf[pos]! < 0x80) n = buf[pos++]!;
  else {
    n = readVarint(limit);
    if (high !== 0) throw malformed('length past the end');
  }
  if (n > limit - pos) throw malformed('length past the end');
  return n;
}

/** Skips a field of an unknown number. Groups (wire types 3 and 4, gone from proto3) and 6, 7 are malformed. */
function skip(wireType: number, limit: number): void {
  if (wireType === 0) readVarint(limit);
  else if (wireType === 2) {
    const n = readLength(limit); // read before `pos +=` takes pos
    pos += n;
  } else if (wireType === 1 || wireType === 5) {
    const n = wireType === 1 ? 8 : 4;
    if (n > limit - pos) throw malformed('truncated fixed field');
    pos += n;
  } else throw malformed(`wire type ${wireType}`);
}

function expect(tag: number, wireType: number): void {
  if ((tag & 7) !== wireType) throw malformed(`field ${tag >>> 3} with wire type ${tag & 7}`);
}

const char = String.fromCharCode;

/** `n` ASCII bytes (at most 12) from `s`: twice as fast as a native slice for keys like `user`, and as flat a string. */
function shortAscii(s: number, n: number): string {
  const b = buf;
  switch (n) {
    case 0:
      return '';
    case 1:
      return char(b[s]!);
    case 2:
      return char(b[s]!, b[s + 1]!);
    case 3:
      return char(b[s]!, b[s + 1]!, b[s + 2]!);
    case 4:
      return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!);
    case 5:
      return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!);
    case 6:
      return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!);
    case 7:
      return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!);
    case 8:
      return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!);
    default:
      // 9 to 12: two halves, short enough that V8 makes the result flat.
      return shortAscii(s, 8) + shortAscii(s + 8, n - 8);
  }
}

/** `n` bytes at the cursor as a string: ASCII copied as is, anything else through the fatal decoder. */
function readChars(n: number): string {
  const start = pos;
  const end = (pos += n);
  let i = start;
  while (i < end && buf[i]! < 0x80) i++;
  if (i === end) return n <= 12 ? shortAscii(start, n) : buf.latin1Slice(start, end);
  try {
    return UTF8.decode(buf.subarray(start, end));
  } catch {
    pos = start;
    throw malformed('a string that is not UTF-8');
  }
}

/**
 * A string readRequest length-checks, or undefined when longer than MAX_KEY_LENGTH. Over 3 bytes a character it is
 * too long whatever it holds, so it is skipped unread.
 */
function readText(limit: number): string | undefined {
  const n = readLength(limit);
  if (n > 3 * MAX_KEY_LENGTH) {
    pos += n;
    return undefined;
  }
  const s = readChars(n);
  return s.length > MAX_KEY_LENGTH ? undefined : s;
}

function tooLong(what: string): string {
  return `${what} is longer than ${MAX_KEY_LENGTH} characters`;
}

/** One Entry; a refusal for it goes into `entryRefusal` (first wins), as readRequest checks key then value. */
let entryRefusal = '';
function readEntry(limit: number, i: number, j: number): DescriptorEntry {
  let key: string | undefined = '';
  let value: string | undefined = '';
  while (pos < limit) {
    const tag = readTag(limit);
    const field = tag >>> 3;
    if (field === 1) {
      expect(tag, 2);
      key = readText(limit);
    } else if (field === 2) {
      expect(tag, 2);
      value = readText(limit);
    } else skip(tag & 7, limit);
  }
  if (entryRefusal === '') {
    const at = `descriptors[${i}].entries[${j}]`;
    if (key === undefined) entryRefusal = tooLong(`${at}.key`);
    else if (key === '') entryRefusal = `${at}.key must not be empty`;
    else if (value === undefined) entryRefusal = tooLong(`${at}.value`);
  }
  return { key: key ?? '', value: value ?? '' };
}

/**
 * One RateLimitDescriptor. A `limit` or `hits_addend` sent twice is merged field by field (proto3's rule, and Go's):
 * protobufjs kept only the last one.
 */
function readDescriptor(limit: number, i: number): RlsDescriptorIn {
  const entries: DescriptorEntry[] = [];
  let entryCount = 0;
  entryRefusal = '';
  let hasLimit = false;
  let requestsPerUnit = 0;
  let unitNumber = 0;
  let hasAddend = false;
  let addend = 0;
  while (pos < limit) {
    const tag = readTag(limit);
    const field = tag >>> 3;
    if (field === 1) {
      expect(tag, 2);
      const end = readLength(limit) + pos;
      // Past MAX_ENTRIES the descriptor is refused whatever its entries hold: they are skipped unread.
      if (++entryCount > MAX_ENTRIES) pos = end;
      else entries.push(readEntry(end, i, entryCount - 1));
    } else if (field === 2) {
      expect(tag, 2);
      hasLimit = true;
      const end = readLength(limit) + pos;
      while (pos < end) {
        const t = readTag(end);
        if (t >>> 3 === 1) {
          expect(t, 0);
          requestsPerUnit = readUint32(end);
        } else if (t >>> 3 === 2) {
          expect(t, 0);
          unitNumber = readUint32(end);
        } else skip(t & 7, end);
      }
    } else if (field === 3) {
      expect(tag, 2);
      hasAddend = true;
      const end = readLength(limit) + pos;
      while (pos < end) {
        const t = readTag(end);
        if (t >>> 3 === 1) {
          expect(t, 0);
          addend = readUint64(end);
        } else skip(t & 7, end);
      }
    } else skip(tag & 7, limit);
  }
  if (refusal === '') {
    if (entryCount > MAX_ENTRIES) refusal = `descriptors[${i}] has more than ${MAX_ENTRIES} entries`;
    else if (entryRefusal !== '') refusal = entryRefusal;
  }
  let override: RlsDescriptorIn['override'];
  if (hasLimit) {
    const unit = UNIT_BY_NUMBER[unitNumber];
    if (unit === undefined) {
      if (refusal === '') refusal = `descriptors[${i}].limit.unit must be a known unit`;
    } else if (requestsPerUnit > maxRequestsPerUnit(unit)) {
      // As the config loader checks a file's limits: past this the counts would not stay exact, and the limiter refuses it.
      if (refusal === '')
        refusal = `descriptors[${i}].limit.requests_per_unit must be at most ${maxRequestsPerUnit(unit)} per ${unit} (limit × window under 2^50 ms)`;
    } else override = { requestsPerUnit, unit };
  }
  if (hasAddend && addend < 0 && refusal === '') refusal = `descriptors[${i}].hits_addend must be a whole number`;
  // readRequest's object shapes: a key only when set.
  if (override === undefined) return hasAddend ? { entries, hitsAddend: addend } : { entries };
  return hasAddend ? { entries, override, hitsAddend: addend } : { entries, override };
}

/**
 * Reads an envoy.service.ratelimit.v3.RateLimitRequest. Refuses what readRequest refuses, with its messages and in
 * its order (descriptor count, then each descriptor's entries, limit and hits_addend, then the domain), and a message
 * that is not well-formed protobuf: truncated, a varint over 10 bytes, wire type 3, 4, 6 or 7, field number 0, a known
 * field of the wrong wire type, a string that is not UTF-8. Unknown fields are skipped; a field sent twice: the last
 * scalar wins and messages merge.
 * @throws RlsRequestError for a message that cannot be read or used
 */
export function decodeRateLimitRequest(bytes: Uint8Array): RlsRequestIn {
  buf = (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)) as SliceBuffer;
  pos = 0;
  refusal = '';
  const limit = buf.length;
  let domain: string | undefined = '';
  let hitsAddend = 0;
  const descriptors: RlsDescriptorIn[] = [];
  try {
    while (pos < limit) {
      const tag = readTag(limit);
      const field = tag >>> 3;
      if (field === 1) {
        expect(tag, 2);
        domain = readText(limit);
      } else if (field === 2) {
        expect(tag, 2);
        // readRequest's first check, before any descriptor's own.
        if (descriptors.length === MAX_DESCRIPTORS) throw new RlsRequestError(`at most ${MAX_DESCRIPTORS} descriptors per request`);
        const end = readLength(limit) + pos;
        descriptors.push(readDescriptor(end, descriptors.length));
      } else if (field === 3) {
        expect(tag, 0);
        hitsAddend = readUint32(limit);
      } else skip(tag & 7, limit);
    }
  } finally {
    buf = EMPTY;
  }
  if (refusal !== '') throw new RlsRequestError(refusal);
  if (domain === undefined) throw new RlsRequestError(tooLong('domain'));
  return { domain, descriptors, hitsAddend };
}

/**
 * Reads a grpc.health.v1.HealthCheckRequest: its `service` ('' when absent).
 * @throws RlsRequestError for a message that is not well-formed (as {@link decodeRateLimitRequest})
 */
export function decodeHealthCheckRequest(bytes: Uint8Array): string {
  buf = (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)) as SliceBuffer;
  pos = 0;
  let service = '';
  try {
    while (pos < buf.length) {
      const tag = readTag(buf.length);
      if (tag >>> 3 === 1) {
        expect(tag, 2);
        service = readChars(readLength(buf.length));
      } else skip(tag & 7, buf.length);
    }
  } finally {
    buf = EMPTY;
  }
  return service;
}

/**
 * Writes a grpc.health.v1.HealthCheckResponse with `status`.
 */
export function encodeHealthCheckResponse(status: 'SERVING' | 'NOT_SERVING'): Buffer {
  const out = Buffer.allocUnsafe(2);
  out[0] = 0x08;
  out[1] = SERVING_STATUS[status];
  return out;
}

export { encodeRateLimitResponse, type RateLimitResponseMessage } from './rls-response-encoder.js';
