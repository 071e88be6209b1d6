// The hand-written RateLimitResponse and Health/Check coders against protobufjs: what they write reads back as protobufjs's own bytes read.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { HeaderMode } from '../../../src/http/index.js';
import type { RlsMetadataValue, RlsUnit } from '../../../src/gateway/rls/rls-config.js';
import {
  decodeHealthCheckRequest,
  encodeHealthCheckResponse,
  encodeRateLimitResponse,
  type RateLimitResponseMessage,
} from '../../../src/gateway/rls/rls-codec.js';
import { RlsRequestError, type RlsAnswer, type RlsRequestIn, type RlsStatus } from '../../../src/gateway/rls/rls-decide.js';
import { dynamicMetadata, type StructMessage } from '../../../src/gateway/rls/rls-metadata.js';
import { writeResponse } from '../../../src/gateway/rls/rls-wire.js';
import { loadRoot, prng } from '../support/rls-protobuf.js';

const root = loadRoot();
const Res = root.lookupType('envoy.service.ratelimit.v3.RateLimitResponse');
const HealthReq = root.lookupType('grpc.health.v1.HealthCheckRequest');
const HealthRes = root.lookupType('grpc.health.v1.HealthCheckResponse');

/** Every field read back, defaults included, enums and 64-bit numbers as numbers. */
const AS_OBJECT = { longs: Number, enums: Number, defaults: true, arrays: true, objects: true };
const read = (bytes: Uint8Array): Record<string, unknown> => Res.toObject(Res.decode(bytes), AS_OBJECT);

/** The codec's bytes read back by protobufjs equal protobufjs's own bytes read back. */
function sameAsProtobufjs(message: RateLimitResponseMessage, what: string): void {
  const ours = encodeRateLimitResponse(message);
  assert.deepEqual(read(ours), read(Res.encode(message).finish()), what);
}

// --- From writeResponse ------------------------------------------------------------------------------------------------

const NOW = Date.UTC(2026, 10, 29, 1, 2, 3, 456);
const limit = (requestsPerUnit: number, unit: RlsUnit, name?: string): RlsStatus['limit'] => ({ requestsPerUnit, unit, name });

const STATUSES: RlsStatus[] = [
  { code: 'OK', outcome: 'no_limit', remaining: 0, metricKey: '' },
  { code: 'OK', outcome: 'unlimited', remaining: 0xffff_ffff, metricKey: 'u' },
  { code: 'OK', outcome: 'ok', remaining: 7, resetMs: 1500.4, limit: limit(10, 'minute'), metricKey: 'user', policyName: 'per-user' },
  {
    code: 'OVER_LIMIT',
    outcome: 'over_limit',
    remaining: 0,
    resetMs: 0,
    limit: limit(5, 'week', 'weekly'),
    metricKey: 'org',
    policyName: 'weekly',
  },
  { code: 'OK', outcome: 'shadow_over_limit', remaining: 0, limit: limit(0, 'year', 'zero'), metricKey: 'z', metadata: { tier: 'gold' } },
  {
    code: 'OVER_LIMIT',
    outcome: 'over_limit',
    remaining: 0,
    resetMs: 86_400_000 * 400,
    limit: limit(3, 'day', 'ünïcødé 😀'),
    metricKey: 'd',
  },
  {
    code: 'OK',
    outcome: 'ok',
    remaining: 1,
    resetMs: 999,
    limit: limit(2, 'second'),
    metricKey: 's',
    metadata: { a: { b: [1, null, true] } },
  },
  { code: 'OK', outcome: 'ok', remaining: 4, resetMs: 3_599_999, limit: limit(9, 'hour'), metricKey: 'h' },
  { code: 'OK', outcome: 'ok', remaining: 4, resetMs: 1, limit: limit(9, 'month'), metricKey: 'm' },
];

const REQUEST: RlsRequestIn = {
  domain: 'edge',
  descriptors: STATUSES.map((_, i) => ({
    entries: [{ key: 'k', value: `v${i}` }],
    ...(i === 2 ? { override: { requestsPerUnit: 10, unit: 'minute' as const } } : {}),
    ...(i === 3 ? { hitsAddend: 0 } : {}),
  })),
  hitsAddend: 3,
};

test('writeResponse outputs (OK and OVER_LIMIT, with and without limits, every header mode, dynamic metadata) read back as protobufjs wrote them', () => {
  const modes: Array<readonly HeaderMode[] | 'none'> = [
    'none',
    ['ietf'],
    ['draft-7'],
    ['draft-6'],
    ['legacy'],
    ['ietf', 'draft-6', 'legacy'],
  ];
  for (let n = 0; n <= STATUSES.length; n++) {
    const statuses = STATUSES.slice(0, n);
    for (const overall of ['OK', 'OVER_LIMIT'] as const) {
      const answer: RlsAnswer = { overall, statuses };
      for (const headers of modes)
        for (const exposeLimitNames of [false, true])
          for (const withMetadata of [false, true]) {
            const request = { ...REQUEST, descriptors: REQUEST.descriptors.slice(0, n) };
            const options = { headers, exposeLimitNames, dynamicMetadata: withMetadata ? dynamicMetadata(request, statuses) : undefined };
            sameAsProtobufjs(writeResponse(answer, options, NOW), `${n} ${overall} ${String(headers)} ${exposeLimitNames} ${withMetadata}`);
          }
    }
  }
});

// --- Generated messages ------------------------------------------------------------------------------------------------

const CHARS = ['a', 'Z', '0', '=', ';', ' ', '"', 'é', '中', '😀', '\u0000', '\u007f', '\u0080', '\u07ff', '\u0800', '\uffff'];

function word(rand: () => number, max: number): string {
  let s = '';
  const n = Math.floor(rand() * (max + 1));
  for (let i = 0; i < n; i++) s += CHARS[Math.floor(rand() * CHARS.length)];
  return s;
}

const NUMBERS = [0, -0, 1, -1, 0.5, -2.75, 1e300, -1e-300, Number.MAX_SAFE_INTEGER, NaN, Infinity, -Infinity, 2 ** 53 + 2];

function value(rand: () => number, depth: number): StructMessage['fields'][string] {
  const k = Math.floor(rand() * (depth > 2 ? 4 : 6));
  if (k === 0) return { nullValue: 0 };
  if (k === 1) return { numberValue: rand() < 0.5 ? NUMBERS[Math.floor(rand() * NUMBERS.length)]! : (rand() - 0.5) * 1e6 };
  if (k === 2) return { stringValue: word(rand, 10) };
  if (k === 3) return { boolValue: rand() < 0.5 };
  if (k === 4) return { structValue: struct(rand, depth + 1) };
  return { listValue: { values: Array.from({ length: Math.floor(rand() * 4) }, () => value(rand, depth + 1)) } };
}

function struct(rand: () => number, depth: number): StructMessage {
  const fields: StructMessage['fields'] = {};
  const n = Math.floor(rand() * 4);
  for (let i = 0; i < n; i++) fields[word(rand, 6)] = value(rand, depth);
  return { fields };
}

function message(rand: () => number): RateLimitResponseMessage {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  return {
    overall_code: pick([0, 1, 2]),
    statuses: Array.from({ length: Math.floor(rand() * 5) }, () => ({
      code: pick([0, 1, 2]),
      current_limit:
        rand() < 0.3
          ? null
          : {
              name: rand() < 0.5 ? '' : word(rand, 12),
              requests_per_unit: pick([0, 1, 127, 128, 16_384, 0xffff_ffff]),
              unit: pick([0, 1, 2, 3, 4, 5, 6, 7]),
            },
      limit_remaining: pick([0, 1, 300, 2 ** 31, 0xffff_ffff]),
      duration_until_reset:
        rand() < 0.3 ? null : { seconds: pick([0, 1, 59, 86_400, 2 ** 33, Number.MAX_SAFE_INTEGER]), nanos: pick([0, 1, 999_999_999]) },
    })),
    response_headers_to_add: Array.from({ length: Math.floor(rand() * 4) }, () => ({ key: word(rand, 10), value: word(rand, 80) })),
    dynamic_metadata: rand() < 0.3 ? null : struct(rand, 0),
  };
}

test('generated messages (numbers negative, fractional, NaN, ±Infinity; nested structs and lists; unicode) read back as protobufjs wrote them', () => {
  const rand = prng(6);
  for (let i = 0; i < 3000; i++) sameAsProtobufjs(message(rand), `message ${i}`);
});

test('a message with more parts than the size table starts with (2000 metadata fields) reads back as protobufjs wrote it', () => {
  const many: Record<string, RlsMetadataValue> = {};
  for (let i = 0; i < 2000; i++) many[`f${i}`] = i % 3 === 0 ? `v${i}` : { n: i };
  const statuses: RlsStatus[] = [
    { code: 'OK', outcome: 'ok', remaining: 1, resetMs: 5, limit: limit(2, 'hour'), metricKey: 'k', metadata: many },
  ];
  const request: RlsRequestIn = { domain: 'd', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }], hitsAddend: 0 };
  const m = writeResponse(
    { overall: 'OK', statuses },
    { headers: ['ietf'], exposeLimitNames: false, dynamicMetadata: dynamicMetadata(request, statuses) },
    NOW,
  );
  sameAsProtobufjs(m, 'many fields');
  sameAsProtobufjs(message(prng(1)), 'a small one after it');
});

test('a value member that is its default (0, "", false, null, an empty struct or list) is still written: a oneof keeps which one is set', () => {
  const m: RateLimitResponseMessage = {
    overall_code: 1,
    statuses: [],
    response_headers_to_add: [],
    dynamic_metadata: {
      fields: {
        zero: { numberValue: 0 },
        empty: { stringValue: '' },
        no: { boolValue: false },
        nothing: { nullValue: 0 },
        struct: { structValue: { fields: {} } },
        list: { listValue: { values: [] } },
        '': {},
      },
    },
  };
  sameAsProtobufjs(m, 'defaults');
  const fields = (read(encodeRateLimitResponse(m)).dynamic_metadata as StructMessage).fields;
  assert.deepEqual(Object.keys(fields.zero!), ['numberValue']);
  assert.deepEqual(Object.keys(fields.list!), ['listValue']);
});

test('a lone surrogate in a header value is written as U+FFFD (valid UTF-8), as Buffer writes it', () => {
  const m: RateLimitResponseMessage = {
    overall_code: 1,
    statuses: [],
    response_headers_to_add: [{ key: 'k\ud800', value: 'a\udc00b\ud83d' }],
    dynamic_metadata: null,
  };
  const bytes = encodeRateLimitResponse(m);
  assert.deepEqual((read(bytes).response_headers_to_add as Array<{ key: string; value: string }>)[0], {
    key: 'k\ufffd',
    value: 'a\ufffdb\ufffd',
    raw_value: Buffer.alloc(0),
  });
});

test('each response is its own Buffer of exactly its size', () => {
  const rand = prng(8);
  const a = message(rand);
  const first = encodeRateLimitResponse(a);
  const copy = Buffer.from(first);
  encodeRateLimitResponse(message(rand));
  assert.deepEqual(first, copy);
  assert.equal(first.length, Res.encode(Res.decode(first)).finish().length);
});

// --- Health/Check ------------------------------------------------------------------------------------------------------

test('a HealthCheckRequest decodes to its service, "" when absent, unknown fields skipped', () => {
  assert.equal(
    decodeHealthCheckRequest(HealthReq.encode({ service: 'envoy.service.ratelimit.v3.RateLimitService' }).finish()),
    'envoy.service.ratelimit.v3.RateLimitService',
  );
  assert.equal(decodeHealthCheckRequest(new Uint8Array(0)), '');
  assert.equal(decodeHealthCheckRequest(Buffer.from([0x10, 0x05, 0x0a, 0x02, 0xc3, 0xa9, 0x1d, 1, 2, 3, 4])), 'é');
});

test('a malformed HealthCheckRequest is refused with RlsRequestError (truncated, wrong wire type, not UTF-8, group)', () => {
  for (const bytes of [[0x0a, 0x05, 0x61], [0x08, 0x01], [0x0a, 0x01, 0xff], [0x0b], [0x80]])
    assert.throws(() => decodeHealthCheckRequest(Buffer.from(bytes)), RlsRequestError, Buffer.from(bytes).toString('hex'));
});

test('HealthCheckResponses read back as protobufjs wrote them: SERVING 1, NOT_SERVING 2', () => {
  for (const status of ['SERVING', 'NOT_SERVING'] as const) {
    const ours = HealthRes.toObject(HealthRes.decode(encodeHealthCheckResponse(status)), { enums: String });
    assert.deepEqual(
      ours,
      HealthRes.toObject(HealthRes.decode(HealthRes.encode(HealthRes.fromObject({ status })).finish()), { enums: String }),
    );
    assert.deepEqual(ours, { status });
  }
  assert.notEqual(encodeHealthCheckResponse('SERVING'), encodeHealthCheckResponse('SERVING'));
});
