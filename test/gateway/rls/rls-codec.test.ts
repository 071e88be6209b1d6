// The hand-written RLS codec against protobufjs as the oracle: requests read as protobufjs + readRequest read them, responses read back equal.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import protobuf from 'protobufjs';
import { maxRequestsPerUnit } from '../../../src/gateway/rls/rls-config.js';
import { decodeRateLimitRequest, OVERRIDE_UNITS, RESPONSE_CODES, RESPONSE_UNITS } from '../../../src/gateway/rls/rls-codec.js';
import { RlsRequestError, type RlsRequestIn } from '../../../src/gateway/rls/rls-decide.js';
import { readRequest } from '../support/rls-protobuf.js';
import { enumOf, loadRoot, prng } from '../support/rls-protobuf.js';

const root = loadRoot();
const Req = root.lookupType('envoy.service.ratelimit.v3.RateLimitRequest');
const Descriptor = root.lookupType('envoy.extensions.common.ratelimit.v3.RateLimitDescriptor');
/** RateLimitUnit's lower-case names by number, as rls-protos.ts gave readRequest. */
const units = new Map(Object.entries(enumOf(root, 'envoy.type.v3.RateLimitUnit')).map(([name, n]) => [n, name.toLowerCase()]));

type Outcome = { value: RlsRequestIn } | { refused: string };

/** What the codec makes of `bytes`; any exception but RlsRequestError fails the test. */
function ours(bytes: Uint8Array): Outcome {
  try {
    return { value: decodeRateLimitRequest(bytes) };
  } catch (err) {
    if (!(err instanceof RlsRequestError))
      throw new Error(`not an RlsRequestError on ${Buffer.from(bytes).toString('hex')}`, { cause: err });
    return { refused: err.message };
  }
}

/** What protobufjs + readRequest made of `bytes` (a decode error as refused too). */
function theirs(bytes: Uint8Array): Outcome {
  try {
    return { value: readRequest(Req.decode(bytes), units) };
  } catch (err) {
    return { refused: (err as Error).message };
  }
}

const encode = (message: object): Buffer => Req.encode(message).finish() as Buffer;

// --- Generated requests --------------------------------------------------------------------------------------------

const ALPHABET = ['a', 'z', 'A', '0', '-', '_', '.', ' ', 'é', 'ü', 'ß', '中', '文', '😀', '𝄞', '\u0000', '\u007f', '\u0080', '\uffff'];

function word(rand: () => number, max: number): string {
  let s = '';
  const n = Math.floor(rand() * (max + 1));
  for (let i = 0; i < n; i++) s += ALPHABET[Math.floor(rand() * (rand() < 0.7 ? 7 : ALPHABET.length))];
  return s;
}

/** A request as protobufjs encodes it from a plain object: every field sometimes absent, sometimes its default. */
function generated(rand: () => number, big = false): object {
  const descriptors = Array.from({ length: big ? 64 : Math.floor(rand() * 5) }, () => {
    const d: Record<string, unknown> = {
      entries: Array.from({ length: big ? 32 : Math.floor(rand() * 4) }, () => ({
        key: 'k' + word(rand, 12),
        ...(rand() < 0.2 ? {} : { value: word(rand, 20) }),
      })),
    };
    if (rand() < 0.3) {
      const unit = 1 + Math.floor(rand() * 6);
      const max = Math.min(0xffff_ffff, maxRequestsPerUnit(units.get(unit) as 'hour'));
      d.limit = { unit, ...(rand() < 0.2 ? {} : { requests_per_unit: Math.floor(rand() * (max + 1)) }) };
    }
    const r = rand();
    if (r < 0.1) d.hits_addend = {};
    else if (r < 0.2) d.hits_addend = { value: 0 };
    else if (r < 0.3) d.hits_addend = { value: Math.floor(rand() * 10) };
    else if (r < 0.35) d.hits_addend = { value: Number.MAX_SAFE_INTEGER };
    return d;
  });
  const h = rand();
  return {
    ...(rand() < 0.1 ? {} : { domain: word(rand, 16) }),
    descriptors,
    ...(h < 0.3 ? {} : h < 0.4 ? { hits_addend: 0 } : h < 0.5 ? { hits_addend: 0xffff_ffff } : { hits_addend: Math.floor(rand() * 100) }),
  };
}

test('generated requests decode as protobufjs + readRequest read them (unicode, empty values, every unit, hits_addend 0/absent/large)', () => {
  const rand = prng(33);
  for (let i = 0; i < 2000; i++) {
    const bytes = encode(Req.fromObject(generated(rand)));
    assert.deepEqual(ours(bytes), theirs(bytes), `case ${i}: ${bytes.toString('hex')}`);
  }
});

test('64 descriptors of 32 entries each decode as protobufjs + readRequest read them', () => {
  const bytes = encode(Req.fromObject(generated(prng(64), true)));
  const out = ours(bytes);
  assert.ok('value' in out && out.value.descriptors.length === 64 && out.value.descriptors.every((d) => d.entries.length === 32));
  assert.deepEqual(out, theirs(bytes));
});

test('overrides of every unit protobufjs knows decode to that unit, at the largest requests_per_unit kept exact', () => {
  for (const [n, name] of units) {
    if (n === 0) continue;
    const rpu = Math.min(0xffff_ffff, maxRequestsPerUnit(name as 'hour'));
    const bytes = encode({
      domain: 'd',
      descriptors: [{ entries: [{ key: 'k', value: 'v' }], limit: { requests_per_unit: rpu, unit: n } }],
    });
    assert.deepEqual(ours(bytes), theirs(bytes));
    assert.deepEqual((ours(bytes) as { value: RlsRequestIn }).value.descriptors[0]!.override, { requestsPerUnit: rpu, unit: name });
  }
});

test("the codec's enum numbers are the shipped .proto files' own", () => {
  assert.deepEqual(new Map([...units].filter(([n]) => n !== 0)), new Map(OVERRIDE_UNITS));
  const codes = enumOf(root, 'envoy.service.ratelimit.v3.RateLimitResponse.Code');
  assert.deepEqual(RESPONSE_CODES, { OK: codes.OK, OVER_LIMIT: codes.OVER_LIMIT });
  const responseUnits = enumOf(root, 'envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit');
  assert.deepEqual(
    new Map(RESPONSE_UNITS),
    new Map(Object.entries(responseUnits).flatMap(([name, n]) => (n === 0 ? [] : [[name.toLowerCase(), n] as const]))),
  );
});

// --- Refusals --------------------------------------------------------------------------------------------------------

const w = (): protobuf.Writer => protobuf.Writer.create();
const varint = (n: number): Buffer => Buffer.from(w().uint64(n).finish());
/** A length-delimited field. */
const field = (n: number, payload: Uint8Array): Buffer => Buffer.concat([varint((n << 3) | 2), varint(payload.length), payload]);
const entry = (key: string, value = 'v'): object => ({ key, value });
const one = (d: object, domain = 'd'): object => ({ domain, descriptors: [d] });
/** A request of domain 'd' and one descriptor made of `parts` (encoded fields). */
const descriptorOf = (...parts: Uint8Array[]): Buffer => Buffer.concat([encode({ domain: 'd' }), field(2, Buffer.concat(parts))]);
/** A UInt64Value of hi·2^32 + lo as a descriptor's hits_addend field. */
const addendField = (hi: number, lo: number): Buffer =>
  field(
    3,
    w()
      .uint32(8)
      .uint64(new protobuf.util.LongBits(lo >>> 0, hi >>> 0).toLong(true))
      .finish(),
  );
const keyEntry = field(1, field(1, Buffer.from('k')));
const uint64Addend = (hi: number, lo: number): Buffer => descriptorOf(keyEntry, addendField(hi, lo));

/** Every refusal readRequest makes, with the cases that decide which of two it makes first. */
const REFUSALS: Array<[string, Buffer]> = [
  ['65 descriptors', encode({ domain: 'd', descriptors: Array.from({ length: 65 }, () => ({ entries: [entry('k')] })) })],
  [
    '65 descriptors, the first with an empty key',
    encode({ domain: 'd', descriptors: [{ entries: [entry('')] }, ...Array.from({ length: 64 }, () => ({}))] }),
  ],
  ['33 entries', encode(one({ entries: Array.from({ length: 33 }, (_, i) => entry(`k${i}`)) }))],
  ['33 entries, the first with an empty key', encode(one({ entries: [entry(''), ...Array.from({ length: 32 }, () => entry('k'))] }))],
  ['an empty key', encode(one({ entries: [entry('a'), entry('')] }))],
  ['an absent key', encode(one({ entries: [{ value: 'v' }] }))],
  ['a key of 1025 characters', encode(one({ entries: [entry('k'.repeat(1025))] }))],
  ['a key of 1025 two-byte characters', encode(one({ entries: [entry('é'.repeat(1025))] }))],
  ['a key of 4000 bytes', encode(one({ entries: [entry('中'.repeat(1334))] }))],
  ['a value of 1025 characters', encode(one({ entries: [entry('k', 'v'.repeat(1025))] }))],
  ['a value of 1025 emoji (2050 UTF-16 units)', encode(one({ entries: [entry('k', '😀'.repeat(513))] }))],
  ['a long key and a long value: the key first', encode(one({ entries: [entry('k'.repeat(2000), 'v'.repeat(2000))] }))],
  ['a long value before an empty key: the value first', encode(one({ entries: [entry('k', 'v'.repeat(2000)), entry('')] }))],
  ['a domain of 1025 characters', encode({ domain: 'd'.repeat(1025), descriptors: [{ entries: [entry('k')] }] })],
  ['a long domain and an empty key: the key first', encode({ domain: 'd'.repeat(1025), descriptors: [{ entries: [entry('')] }] })],
  ['an override of unit UNKNOWN', encode(one({ entries: [entry('k')], limit: { requests_per_unit: 5, unit: 0 } }))],
  ['an override without a unit', encode(one({ entries: [entry('k')], limit: {} }))],
  ['an override in WEEK, which RateLimitUnit has not', encode(one({ entries: [entry('k')], limit: { requests_per_unit: 5, unit: 7 } }))],
  ['an override of unit 99', encode(one({ entries: [entry('k')], limit: { requests_per_unit: 5, unit: 99 } }))],
  [
    'an override of one more per year than kept exact',
    encode(one({ entries: [entry('k')], limit: { requests_per_unit: maxRequestsPerUnit('year') + 1, unit: 6 } })),
  ],
  [
    'an override of one more per day than kept exact',
    encode(one({ entries: [entry('k')], limit: { requests_per_unit: maxRequestsPerUnit('day') + 1, unit: 4 } })),
  ],
  ['an override of 4294967295 per hour', encode(one({ entries: [entry('k')], limit: { requests_per_unit: 0xffff_ffff, unit: 3 } }))],
  [
    'a bad override before an empty key in the next descriptor',
    encode({ domain: 'd', descriptors: [{ entries: [entry('k')], limit: { unit: 0 } }, { entries: [entry('')] }] }),
  ],
  ['an empty key before a bad override in one descriptor', encode(one({ entries: [entry('')], limit: { unit: 0 } }))],
  [
    'a bad hits_addend before a bad override in one descriptor',
    descriptorOf(keyEntry, addendField(0x20_0000, 0), field(2, Buffer.alloc(0))),
  ],
  ['a hits_addend of 2^53', uint64Addend(0x20_0000, 0)],
  ['a hits_addend of 2^64 - 1', uint64Addend(0xffff_ffff, 0xffff_ffff)],
];

test('every refusal readRequest makes is made by the decoder with the same message, first things first', () => {
  for (const [name, bytes] of REFUSALS) {
    const expected = theirs(bytes);
    assert.ok('refused' in expected, `${name}: readRequest accepts it`);
    assert.deepEqual(ours(bytes), expected, name);
  }
});

test('a UInt64Value hits_addend above 2^53 - 1 is refused, not rounded; 2^53 - 1 itself is kept exact', () => {
  assert.deepEqual(ours(uint64Addend(0x20_0000, 1)), { refused: 'descriptors[0].hits_addend must be a whole number' });
  const max = ours(uint64Addend(0x1f_ffff, 0xffff_ffff));
  assert.deepEqual(max, theirs(uint64Addend(0x1f_ffff, 0xffff_ffff)));
  assert.equal((max as { value: RlsRequestIn }).value.descriptors[0]!.hitsAddend, Number.MAX_SAFE_INTEGER);
});

test('ASCII keys and values of every length from 0 to 20 bytes read whole (the short-string path ends at 12)', () => {
  for (let n = 0; n <= 20; n++) {
    const s = 'abcdefghijklmnopqrstuvwxyz'.slice(0, n);
    const bytes = encode({ domain: s, descriptors: [{ entries: [entry(`k${s}`, s)] }] });
    assert.deepEqual(ours(bytes), theirs(bytes));
    assert.deepEqual(ours(bytes), { value: { domain: s, descriptors: [{ entries: [{ key: `k${s}`, value: s }] }], hitsAddend: 0 } });
  }
});

test('keys and values of 1024 characters (ASCII, two-byte, emoji halves) are kept', () => {
  for (const s of ['k'.repeat(1024), 'é'.repeat(1024), '😀'.repeat(512)]) {
    const bytes = encode({ domain: s, descriptors: [{ entries: [entry(s, s)] }] });
    assert.deepEqual(ours(bytes), theirs(bytes));
    assert.ok('value' in ours(bytes));
  }
});

// --- Fields sent twice, unknown fields, odd but valid encodings --------------------------------------------------------

test('a limit sent twice in one descriptor is merged field by field (proto3, as Go), where protobufjs kept only the last', () => {
  const d = Buffer.concat([
    Descriptor.encode({ entries: [entry('k')] }).finish(),
    Descriptor.encode({ limit: { requests_per_unit: 5 } }).finish(),
    Descriptor.encode({ limit: { unit: 3 } }).finish(),
  ]);
  const bytes = Buffer.concat([encode({ domain: 'd' }), w().uint32(18).bytes(d).finish()]);
  const merged = encode(one({ entries: [entry('k')], limit: { requests_per_unit: 5, unit: 3 } }));
  assert.deepEqual(ours(bytes), theirs(merged));
  assert.deepEqual((ours(bytes) as { value: RlsRequestIn }).value.descriptors[0]!.override, { requestsPerUnit: 5, unit: 'hour' });
  // protobufjs replaced the first limit by the second: 0 per hour.
  assert.equal((theirs(bytes) as { value: RlsRequestIn }).value.descriptors[0]!.override!.requestsPerUnit, 0);
});

test('a hits_addend sent twice is merged: an empty second UInt64Value keeps the first value (protobufjs read 0)', () => {
  const d = Buffer.concat([
    Descriptor.encode({ entries: [entry('k')], hits_addend: { value: 5 } }).finish(),
    Descriptor.encode({ hits_addend: {} }).finish(),
  ]);
  const bytes = Buffer.concat([encode({ domain: 'd' }), w().uint32(18).bytes(d).finish()]);
  assert.deepEqual(ours(bytes), theirs(encode(one({ entries: [entry('k')], hits_addend: { value: 5 } }))));
  assert.equal((theirs(bytes) as { value: RlsRequestIn }).value.descriptors[0]!.hitsAddend, 0);
});

test('a scalar sent twice takes its last value, as protobufjs does (domain, hits_addend, key, value, requests_per_unit, unit)', () => {
  const e = Buffer.concat([
    w().uint32(10).string('first').uint32(10).string('last').uint32(18).string('v1').uint32(18).string('v2').finish(),
  ]);
  const limit = w().uint32(8).uint32(7).uint32(16).uint32(1).uint32(8).uint32(9).uint32(16).uint32(2).finish();
  const d = w().uint32(10).bytes(e).uint32(18).bytes(limit).finish();
  const bytes = w()
    .uint32(10)
    .string('one')
    .uint32(24)
    .uint32(4)
    .uint32(18)
    .bytes(d)
    .uint32(10)
    .string('two')
    .uint32(24)
    .uint32(6)
    .finish();
  const out = ours(bytes);
  assert.deepEqual(out, theirs(bytes));
  assert.deepEqual(out, {
    value: {
      domain: 'two',
      hitsAddend: 6,
      descriptors: [{ entries: [{ key: 'last', value: 'v2' }], override: { requestsPerUnit: 9, unit: 'minute' } }],
    },
  });
});

/** Unknown fields of every wire type protobuf still has: a varint, fixed64, a length-delimited run, fixed32. */
const unknown = (n: number): Uint8Array =>
  w()
    .uint32((n << 3) | 0)
    .uint64(2 ** 40)
    .uint32((n << 3) | 1)
    .fixed64(7)
    .uint32((n << 3) | 2)
    .bytes(Buffer.from([1, 2, 3]))
    .uint32((n << 3) | 5)
    .fixed32(9)
    .finish();

test('unknown fields of wire types 0, 1, 2 and 5 are skipped at every level, as protobufjs skips them', () => {
  const e = Buffer.concat([unknown(3), w().uint32(10).string('k').finish(), unknown(1000)]);
  const limit = Buffer.concat([unknown(4), w().uint32(16).uint32(2).finish()]);
  const addend = Buffer.concat([unknown(2), w().uint32(8).uint64(3).finish()]);
  const d = Buffer.concat([unknown(4), w().uint32(10).bytes(e).uint32(18).bytes(limit).uint32(26).bytes(addend).finish(), unknown(99)]);
  const bytes = Buffer.concat([unknown(4), w().uint32(18).bytes(d).finish(), unknown(536_870_911), w().uint32(10).string('d').finish()]);
  assert.deepEqual(ours(bytes), theirs(bytes));
  assert.ok('value' in ours(bytes));
});

test('non-minimal varints and a uint32 sent as 64 bits read as protobufjs reads them (the low 32 bits)', () => {
  // hits_addend 3 in four bytes; hits_addend 2^32 + 5 (uint32: 5); a unit of 2^32 + 3 (HOUR).
  const cases = [
    Buffer.from([0x0a, 0x01, 0x64, 0x18, 0x83, 0x80, 0x80, 0x00]),
    Buffer.concat([
      Buffer.from([0x0a, 0x01, 0x64, 0x18]),
      w()
        .uint64(2 ** 32 + 5)
        .finish(),
    ]),
    Buffer.concat([
      encode({ domain: 'd' }),
      w()
        .uint32(18)
        .fork()
        .uint32(10)
        .bytes(w().uint32(10).string('k').finish())
        .uint32(18)
        .fork()
        .uint32(8)
        .uint32(1)
        .uint32(16)
        .uint64(2 ** 32 + 3)
        .ldelim()
        .ldelim()
        .finish(),
    ]),
  ];
  for (const bytes of cases) {
    assert.ok('value' in ours(bytes), bytes.toString('hex'));
    assert.deepEqual(ours(bytes), theirs(bytes), bytes.toString('hex'));
  }
});

test('an empty message decodes to the defaults: domain empty, no descriptors, hits_addend 0', () => {
  assert.deepEqual(ours(new Uint8Array(0)), { value: { domain: '', descriptors: [], hitsAddend: 0 } });
  assert.deepEqual(ours(new Uint8Array(0)), theirs(new Uint8Array(0)));
});

test('a Uint8Array that is not a Buffer, and one at an offset in a larger buffer, decode the same', () => {
  const bytes = encode(Req.fromObject(generated(prng(7))));
  const padded = new Uint8Array(bytes.length + 10);
  padded.set(bytes, 5);
  assert.deepEqual(ours(new Uint8Array(bytes)), theirs(bytes));
  assert.deepEqual(ours(padded.subarray(5, 5 + bytes.length)), theirs(bytes));
});

// --- Malformed bytes ------------------------------------------------------------------------------------------------

const MALFORMED: Array<[string, number[]]> = [
  ['a truncated varint', [0x18, 0x80]],
  ['a truncated tag', [0x80]],
  ['a length past the end', [0x0a, 0x05, 0x61]],
  ['a descriptor longer than the message', [0x12, 0x03, 0x0a, 0x00]],
  ['an entry longer than its descriptor', [0x12, 0x02, 0x0a, 0x05, 0x0a, 0x01, 0x6b]],
  ['a varint of 11 bytes', [0x18, ...Array(10).fill(0xff), 0x01]],
  ['a varint past 64 bits', [0x18, ...Array(9).fill(0xff), 0x02]],
  ['a tag past 32 bits', [0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00]],
  ['field number 0, varint', [0x00, 0x01]],
  ['field number 0, length-delimited', [0x02, 0x00]],
  ['wire type 3 (start group)', [0x23, 0x24]],
  ['wire type 4 (end group)', [0x24]],
  ['wire type 6', [0x26, 0x00]],
  ['wire type 7', [0x27, 0x00]],
  ['a fixed64 cut short', [0x21, 1, 2, 3]],
  ['a fixed32 cut short', [0x25, 1, 2]],
  ['domain as a varint', [0x08, 0x01]],
  ['descriptors as a varint', [0x10, 0x01]],
  ['hits_addend as length-delimited', [0x1a, 0x00]],
  ['an entry as fixed32', [0x12, 0x05, 0x0d, 1, 2, 3, 4]],
  ['an entry key as a varint', [0x12, 0x04, 0x0a, 0x02, 0x08, 0x01]],
  ['a limit unit as length-delimited', [0x12, 0x04, 0x12, 0x02, 0x12, 0x00]],
  ['a hits_addend value as fixed64', [0x12, 0x0b, 0x1a, 0x09, 0x09, 1, 0, 0, 0, 0, 0, 0, 0]],
  ['a domain that is not UTF-8 (0xff)', [0x0a, 0x01, 0xff]],
  ['a key that is an overlong encoding (c0 80)', [0x12, 0x06, 0x0a, 0x04, 0x0a, 0x02, 0xc0, 0x80]],
  ['a value that is a UTF-8-encoded surrogate (ed a0 80)', [0x12, 0x08, 0x0a, 0x06, 0x0a, 0x01, 0x6b, 0x12, 0x01, 0xed]],
  ['a value with a cut three-byte sequence (e2 82)', [0x12, 0x09, 0x0a, 0x07, 0x0a, 0x01, 0x6b, 0x12, 0x02, 0xe2, 0x82]],
];

test('malformed messages are refused with RlsRequestError (truncation, long varints, groups, field 0, wrong wire types)', () => {
  for (const [name, bytes] of MALFORMED) {
    const out = ours(Buffer.from(bytes));
    assert.ok('refused' in out, `${name} is accepted`);
    assert.match(out.refused, /^malformed message: /, name);
  }
});

test('a string that is not UTF-8 is refused, not read with U+FFFD in it as protobufjs read it', () => {
  const bytes = Buffer.from([0x0a, 0x03, 0x61, 0xff, 0x62, 0x12, 0x05, 0x0a, 0x03, 0x0a, 0x01, 0x6b]);
  assert.equal((theirs(bytes) as { value: RlsRequestIn }).value.domain, 'a\ufffdb');
  assert.deepEqual(ours(bytes), { refused: 'malformed message: a string that is not UTF-8 at byte 2' });
});

test('a key that starts with a byte order mark keeps it, as protobufjs keeps it', () => {
  const bytes = encode(one({ entries: [entry('\ufeffk', '\ufeff')] }, '\ufeffd'));
  assert.deepEqual(ours(bytes), theirs(bytes));
  assert.equal((ours(bytes) as { value: RlsRequestIn }).value.domain, '\ufeffd');
});

/** Which fields of a message are messages themselves, and whether a repeat of one is merged (a non-repeated field). */
interface Shape {
  readonly [field: number]: { readonly shape: Shape; readonly merge: boolean } | undefined;
  /** Its varints are 64-bit (UInt64Value); others are uint32 or enums, read as their low 32 bits. */
  readonly wide?: boolean;
}
const LEAF: Shape = {};
const DESCRIPTOR: Shape = { 1: { shape: LEAF, merge: false }, 2: { shape: LEAF, merge: true }, 3: { shape: { wide: true }, merge: true } };
const REQUEST: Shape = { 2: { shape: DESCRIPTOR, merge: false } };

/**
 * `bytes` (which the codec accepted) rewritten into the form protobufjs reads as proto3 does: every tag and varint
 * minimal, a uint32 cut to its low 32 bits (protobufjs skips 5 bytes blindly after a uint32's fifth, so a valid longer
 * one threw), and a non-repeated sub-message sent twice joined into one (proto3 merges them; protobufjs kept the last).
 */
function canonical(bytes: Uint8Array, shape: Shape = REQUEST): Buffer {
  const r = protobuf.Reader.create(bytes);
  const out: Uint8Array[] = [];
  const joined = new Map<number, Uint8Array[]>();
  while (r.pos < r.len) {
    const tag = (r.uint64() as unknown as { toNumber(): number }).toNumber();
    const n = Math.floor(tag / 8);
    const start = r.pos;
    if (tag % 8 === 0) {
      const v = r.uint64() as unknown as { low: number };
      out.push(
        varint(tag),
        shape.wide === true
          ? Buffer.from(
              w()
                .uint64(v as never)
                .finish(),
            )
          : varint(v.low >>> 0),
      );
    } else if (tag % 8 !== 2) {
      r.skipType(tag % 8);
      out.push(varint(tag), bytes.subarray(start, r.pos));
    } else {
      const payload = r.bytes();
      const sub = shape[n];
      if (sub === undefined) out.push(field(n, payload));
      else if (!sub.merge) out.push(field(n, canonical(payload, sub.shape)));
      else joined.set(n, [...(joined.get(n) ?? []), payload]);
    }
  }
  for (const [n, parts] of joined) out.push(field(n, canonical(Buffer.concat(parts), shape[n]!.shape)));
  return Buffer.concat(out);
}

/** The rule for any bytes: refused with RlsRequestError, or read as protobufjs + readRequest read them in canonical form. */
function agrees(bytes: Uint8Array, what: string): 'read' | 'refused' {
  const out = ours(bytes);
  if ('refused' in out) return 'refused';
  assert.deepEqual(out, theirs(canonical(bytes)), `${what}: ${Buffer.from(bytes).toString('hex')}`);
  return 'read';
}

test('every truncation of a valid message is refused with RlsRequestError or read as protobufjs reads it', () => {
  const rand = prng(5);
  for (let m = 0; m < 40; m++) {
    const bytes = encode(Req.fromObject(generated(rand)));
    for (let n = 0; n < bytes.length; n++) agrees(bytes.subarray(0, n), `${n} of ${bytes.length} bytes`);
  }
});

test('random mutations of valid messages are refused with RlsRequestError or read as protobufjs reads them, never hang', () => {
  const rand = prng(99);
  const seen = { read: 0, refused: 0 };
  for (let i = 0; i < 5000; i++) {
    const bytes = Buffer.from(encode(Req.fromObject(generated(rand))));
    const edits = 1 + Math.floor(rand() * 3);
    let mutated: Buffer = bytes;
    for (let e = 0; e < edits && mutated.length > 0; e++) {
      const at = Math.floor(rand() * mutated.length);
      const kind = rand();
      if (kind < 0.4) mutated[at] = Math.floor(rand() * 256);
      else if (kind < 0.6) mutated[at] = mutated[at]! ^ (1 << Math.floor(rand() * 8));
      else if (kind < 0.8)
        mutated = Buffer.concat([mutated.subarray(0, at), Buffer.from([Math.floor(rand() * 256)]), mutated.subarray(at)]);
      else mutated = Buffer.concat([mutated.subarray(0, at), mutated.subarray(at + 1)]);
    }
    seen[agrees(mutated, `mutation ${i}`)]++;
  }
  // Both outcomes are exercised: the fuzzing is not all refusals.
  assert.ok(seen.read > 500 && seen.refused > 500, JSON.stringify(seen));
});
