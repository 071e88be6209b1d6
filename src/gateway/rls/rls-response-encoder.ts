/** RateLimitResponse to bytes by hand: every size worked out first, then one Buffer of exactly that size written. */
/**
 * What protobufjs wrote for the same message, read back the same (field order by number; proto3 defaults left out,
 * a oneof's member written even when it is its default). rls-codec.ts re-exports it with the decoders.
 */
import type { StructMessage } from './rls-metadata.js';

/** A RateLimitResponse in the message's own shape (enums as numbers), as {@link encodeRateLimitResponse} writes it. */
export interface RateLimitResponseMessage {
  /** Overall code. */
  overall_code: number;
  /** One status per descriptor. */
  statuses: Array<{
    code: number;
    current_limit: { name: string; requests_per_unit: number; unit: number } | null;
    limit_remaining: number;
    duration_until_reset: { seconds: number; nanos: number } | null;
  }>;
  /** Headers for Envoy to add to the response to the client. */
  response_headers_to_add: Array<{ key: string; value: string }>;
  /** Dynamic metadata for the filters after Envoy's rate limit filter (`grpc.dynamicMetadata`); null when off. */
  dynamic_metadata: StructMessage | null;
}

type Status = RateLimitResponseMessage['statuses'][number];
type Value = StructMessage['fields'][string];
type List = NonNullable<Value['listValue']>;

/*
 * The byte lengths of the length-delimited parts (messages and strings) in the order they are written: the sizing
 * pass reserves and fills them, the writing pass reads them back in the same order.
 */
let sizes = new Int32Array(256);
let count = 0;
let next = 0;

function slot(): number {
  if (count === sizes.length) {
    const grown = new Int32Array(sizes.length * 2);
    grown.set(sizes);
    sizes = grown;
  }
  return count++;
}

function varintSize(n: number): number {
  return n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x20_0000 ? 3 : n < 0x1000_0000 ? 4 : 5;
}

// A 64-bit value's halves, as protobufjs's LongBits.fromNumber makes them (two's complement, the fraction dropped).
let lo64 = 0;
let hi64 = 0;
function split64(n: number): void {
  const negative = n < 0;
  const v = negative ? -n : n;
  let lo = v >>> 0;
  let hi = ((v - lo) / 0x1_0000_0000) >>> 0;
  if (negative) {
    hi = ~hi >>> 0;
    lo = ~lo >>> 0;
    if (++lo > 0xffff_ffff) {
      lo = 0;
      if (++hi > 0xffff_ffff) hi = 0;
    }
  }
  lo64 = lo;
  hi64 = hi;
}

function varint64Size(lo: number, hi: number): number {
  if (hi === 0) return varintSize(lo);
  let n = 5;
  for (let rest = hi >>> 3; rest !== 0; rest >>>= 7) n++;
  return n;
}

/** An int32 or enum field's varint size: a negative one takes 10 bytes (sign-extended), as protobufjs writes it. */
function int32Size(n: number): number {
  if (n >= 0) return varintSize(n >>> 0);
  split64(n);
  return varint64Size(lo64, hi64);
}

/** The UTF-8 length Buffer writes (a lone surrogate as U+FFFD's 3 bytes); counted in JS for short strings. */
function utf8Length(s: string): number {
  const len = s.length;
  if (len > 64) return Buffer.byteLength(s, 'utf8');
  let n = len;
  for (let i = 0; i < len; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < len && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 2;
      i++;
    } else n += 2;
  }
  return n;
}

/** A string field's size with its tag; its byte length goes into a slot. */
function stringSize(s: string): number {
  const n = utf8Length(s);
  const at = slot(); // before `sizes[…] =` takes sizes: slot() may grow it
  sizes[at] = n;
  return 1 + varintSize(n) + n;
}

/** A message field's size with its tag and length, the message's own size already in `sizes[at]`. */
function framed(at: number, n: number): number {
  sizes[at] = n;
  return 1 + varintSize(n) + n;
}

function statusSize(s: Status): number {
  let n = s.code === 0 ? 0 : 1 + int32Size(s.code);
  const limit = s.current_limit;
  if (limit !== null && limit !== undefined) {
    const at = slot();
    let k =
      (limit.requests_per_unit >>> 0 === 0 ? 0 : 1 + varintSize(limit.requests_per_unit >>> 0)) +
      (limit.unit === 0 ? 0 : 1 + int32Size(limit.unit));
    if (limit.name !== '') k += stringSize(limit.name);
    n += framed(at, k);
  }
  if (s.limit_remaining >>> 0 !== 0) n += 1 + varintSize(s.limit_remaining >>> 0);
  const d = s.duration_until_reset;
  if (d !== null && d !== undefined) {
    const at = slot();
    split64(d.seconds);
    const k = (lo64 === 0 && hi64 === 0 ? 0 : 1 + varint64Size(lo64, hi64)) + (d.nanos === 0 ? 0 : 1 + int32Size(d.nanos));
    n += framed(at, k);
  }
  return n;
}

function structSize(s: StructMessage): number {
  let n = 0;
  const fields = s.fields;
  if (fields === null || fields === undefined) return 0;
  // As protobufjs: every own key, the key and the value written even when empty.
  for (const key of Object.keys(fields)) {
    const entry = slot();
    const k = stringSize(key);
    const at = slot();
    n += framed(entry, k + framed(at, valueSize(fields[key])));
  }
  return n;
}

function listSize(l: List): number {
  let n = 0;
  const values = l.values;
  if (values !== null && values !== undefined) for (let i = 0; i < values.length; i++) n += framed(slot(), valueSize(values[i]));
  return n;
}

/** A google.protobuf.Value: its members are a oneof, so a member that is set is written even when 0, '' or false. */
function valueSize(v: Value | undefined): number {
  if (v === undefined || v === null) return 0;
  let n = 0;
  if (v.nullValue !== undefined && v.nullValue !== null) n += 1 + int32Size(v.nullValue);
  if (v.numberValue !== undefined && v.numberValue !== null) n += 9;
  if (v.stringValue !== undefined && v.stringValue !== null) n += stringSize(v.stringValue);
  if (v.boolValue !== undefined && v.boolValue !== null) n += 2;
  if (v.structValue !== undefined && v.structValue !== null) n += framed(slot(), structSize(v.structValue));
  if (v.listValue !== undefined && v.listValue !== null) n += framed(slot(), listSize(v.listValue));
  return n;
}

function responseSize(m: RateLimitResponseMessage): number {
  let n = m.overall_code === 0 ? 0 : 1 + int32Size(m.overall_code);
  for (let i = 0; i < m.statuses.length; i++) n += framed(slot(), statusSize(m.statuses[i]!));
  for (let i = 0; i < m.response_headers_to_add.length; i++) {
    const h = m.response_headers_to_add[i]!;
    const at = slot();
    n += framed(at, (h.key === '' ? 0 : stringSize(h.key)) + (h.value === '' ? 0 : stringSize(h.value)));
  }
  if (m.dynamic_metadata !== null && m.dynamic_metadata !== undefined) n += framed(slot(), structSize(m.dynamic_metadata));
  return n;
}

// The writing pass's cursor.
const EMPTY = Buffer.alloc(0);
let out = EMPTY;
let p = 0;

function writeVarint(n: number): void {
  while (n > 0x7f) {
    out[p++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  out[p++] = n;
}

function writeVarint64(lo: number, hi: number): void {
  while (hi !== 0 || lo > 0x7f) {
    out[p++] = (lo & 0x7f) | 0x80;
    lo = ((lo >>> 7) | (hi << 25)) >>> 0;
    hi >>>= 7;
  }
  out[p++] = lo;
}

function writeInt32(n: number): void {
  if (n >= 0) writeVarint(n >>> 0);
  else {
    split64(n);
    writeVarint64(lo64, hi64);
  }
}

/** A string field: tag, then its length from the sizing pass, then its bytes (short ASCII copied in JS). */
function writeString(tag: number, s: string): void {
  out[p++] = tag;
  const n = sizes[next++]!;
  writeVarint(n);
  if (n === s.length && n <= 32) for (let i = 0; i < n; i++) out[p++] = s.charCodeAt(i);
  else p += out.write(s, p, n, n === s.length ? 'latin1' : 'utf8');
}

/** A message field's tag and length; its body is written next. */
function writeFrame(tag: number): void {
  out[p++] = tag;
  writeVarint(sizes[next++]!);
}

function writeStatus(s: Status): void {
  if (s.code !== 0) {
    out[p++] = 0x08;
    writeInt32(s.code);
  }
  const limit = s.current_limit;
  if (limit !== null && limit !== undefined) {
    writeFrame(0x12);
    if (limit.requests_per_unit >>> 0 !== 0) {
      out[p++] = 0x08;
      writeVarint(limit.requests_per_unit >>> 0);
    }
    if (limit.unit !== 0) {
      out[p++] = 0x10;
      writeInt32(limit.unit);
    }
    if (limit.name !== '') writeString(0x1a, limit.name);
  }
  if (s.limit_remaining >>> 0 !== 0) {
    out[p++] = 0x18;
    writeVarint(s.limit_remaining >>> 0);
  }
  const d = s.duration_until_reset;
  if (d !== null && d !== undefined) {
    writeFrame(0x22);
    split64(d.seconds);
    if (lo64 !== 0 || hi64 !== 0) {
      out[p++] = 0x08;
      writeVarint64(lo64, hi64);
    }
    if (d.nanos !== 0) {
      out[p++] = 0x10;
      writeInt32(d.nanos);
    }
  }
}

function writeStruct(s: StructMessage): void {
  const fields = s.fields;
  if (fields === null || fields === undefined) return;
  for (const key of Object.keys(fields)) {
    writeFrame(0x0a);
    writeString(0x0a, key);
    writeFrame(0x12);
    writeValue(fields[key]);
  }
}

function writeValue(v: Value | undefined): void {
  if (v === undefined || v === null) return;
  if (v.nullValue !== undefined && v.nullValue !== null) {
    out[p++] = 0x08;
    writeInt32(v.nullValue);
  }
  if (v.numberValue !== undefined && v.numberValue !== null) {
    out[p++] = 0x11;
    p = out.writeDoubleLE(v.numberValue, p);
  }
  if (v.stringValue !== undefined && v.stringValue !== null) writeString(0x1a, v.stringValue);
  if (v.boolValue !== undefined && v.boolValue !== null) {
    out[p++] = 0x20;
    out[p++] = v.boolValue ? 1 : 0;
  }
  if (v.structValue !== undefined && v.structValue !== null) {
    writeFrame(0x2a);
    writeStruct(v.structValue);
  }
  if (v.listValue !== undefined && v.listValue !== null) {
    writeFrame(0x32);
    const values = v.listValue.values;
    if (values !== null && values !== undefined)
      for (let i = 0; i < values.length; i++) {
        writeFrame(0x0a);
        writeValue(values[i]);
      }
  }
}

/**
 * Writes an envoy.service.ratelimit.v3.RateLimitResponse (as rls-wire.ts's writeResponse shapes it) as protobufjs
 * encoded it, read back: fields by number, proto3 defaults (code 0, remaining 0, empty strings) left out, strings as
 * UTF-8 (a lone surrogate as U+FFFD, as Buffer writes it).
 */
export function encodeRateLimitResponse(message: RateLimitResponseMessage): Buffer {
  count = 0;
  const total = responseSize(message);
  out = Buffer.allocUnsafe(total);
  p = 0;
  next = 0;
  try {
    if (message.overall_code !== 0) {
      out[p++] = 0x08;
      writeInt32(message.overall_code);
    }
    for (let i = 0; i < message.statuses.length; i++) {
      writeFrame(0x12);
      writeStatus(message.statuses[i]!);
    }
    for (let i = 0; i < message.response_headers_to_add.length; i++) {
      const h = message.response_headers_to_add[i]!;
      writeFrame(0x1a);
      if (h.key !== '') writeString(0x0a, h.key);
      if (h.value !== '') writeString(0x12, h.value);
    }
    if (message.dynamic_metadata !== null && message.dynamic_metadata !== undefined) {
      writeFrame(0x32);
      writeStruct(message.dynamic_metadata);
    }
    return out;
  } finally {
    out = EMPTY;
  }
}
