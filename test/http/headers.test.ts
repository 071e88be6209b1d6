// Header builders: IETF RateLimit / RateLimit-Policy (parsed back as Structured Fields), draft-6/7, legacy, Retry-After rounding and mode validation.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCode } from '../../src/core/errors.js';
import {
  bindingPolicy,
  combinedValue,
  parseHeaderModes,
  rateLimitHeaders,
  retryAfterSeconds,
  sfString,
  type HeaderPair,
  type PolicyReport,
} from '../../src/http/headers.js';
import { parseDictionary, parseList } from './support/sf.js';

const report = (over: Partial<PolicyReport>): PolicyReport => ({
  name: 'default',
  limit: 100,
  windowMs: 60_000,
  allowed: true,
  remaining: 42,
  resetMs: 30_000,
  retryAfterMs: 0,
  ...over,
});
const asMap = (pairs: readonly HeaderPair[]): Record<string, string> => Object.fromEntries(pairs.map(([name, value]) => [name, value]));

describe('IETF fields (draft-ietf-httpapi-ratelimit-headers, current syntax)', () => {
  it('writes one String item per policy with q/w and r/t parameters', () => {
    const h = asMap(
      rateLimitHeaders(
        ['ietf'],
        [
          report({ name: 'burst', limit: 10, windowMs: 1000, remaining: 9, resetMs: 400 }),
          report({ name: 'daily', limit: 1000, windowMs: 86_400_000, remaining: 999, resetMs: 86_399_001 }),
        ],
        0,
      ),
    );
    assert.equal(h['RateLimit-Policy'], '"burst";q=10;w=1, "daily";q=1000;w=86400');
    assert.equal(h['RateLimit'], '"burst";r=9;t=1, "daily";r=999;t=86400');
    const policies = parseList(h['RateLimit-Policy']!);
    assert.deepEqual(
      policies.map((p) => [p.value, Object.fromEntries(p.params)]),
      [
        ['burst', { q: 10, w: 1 }],
        ['daily', { q: 1000, w: 86400 }],
      ],
    );
  });

  it('escapes names, leaves out w for sub-second windows and t for unbounded blocks', () => {
    const h = asMap(
      rateLimitHeaders(
        ['ietf'],
        [report({ name: 'a "q" \\ b', windowMs: 500, allowed: false, remaining: 0, resetMs: Infinity, retryAfterMs: Infinity })],
        0,
      ),
    );
    assert.equal(h['RateLimit-Policy'], '"a \\"q\\" \\\\ b";q=100');
    assert.equal(h['RateLimit'], '"a \\"q\\" \\\\ b";r=0');
    assert.equal(parseList(h['RateLimit']!)[0]!.value, 'a "q" \\ b');
  });

  it("reports a refused policy's t as the retry time, so Retry-After is never earlier", () => {
    const refused = report({ allowed: false, remaining: 0, resetMs: 60_000, retryAfterMs: 1_500 });
    const item = parseList(asMap(rateLimitHeaders(['ietf'], [refused], 0))['RateLimit']!)[0]!;
    assert.equal(item.params.get('t'), 2);
    assert.equal(retryAfterSeconds([refused]), 2);
  });

  it('combines with IETF list fields already on the response, and only those', () => {
    const [policy] = rateLimitHeaders(['ietf'], [report({ name: 'route' })], 0);
    assert.equal(combinedValue(policy!, '"app";q=100;w=60'), '"app";q=100;w=60, "route";q=100;w=60');
    assert.equal(combinedValue(policy!, undefined), '"route";q=100;w=60');
    const [draft] = rateLimitHeaders(['draft-7'], [report({})], 0);
    assert.equal(combinedValue(draft!, '1;w=1'), '100;w=60', 'older forms replace');
  });

  it('rejects names a Structured Field String cannot carry', () => {
    assert.throws(() => sfString('naïve'), { code: ErrorCode.INVALID_OPTIONS });
  });
});

describe('older forms', () => {
  const reports = [
    report({ name: 'a', limit: 10, windowMs: 1000, remaining: 5, resetMs: 800 }),
    report({ name: 'b', limit: 50, windowMs: 3_600_000, remaining: 2, resetMs: 1_200_000 }),
  ];

  it('draft-7: a Dictionary for the binding policy and a policy list', () => {
    const h = asMap(rateLimitHeaders(['draft-7'], reports, 0));
    assert.equal(h['RateLimit'], 'limit=50, remaining=2, reset=1200');
    assert.deepEqual([...parseDictionary(h['RateLimit']!).keys()], ['limit', 'remaining', 'reset']);
    assert.equal(h['RateLimit-Policy'], '10;w=1, 50;w=3600');
  });

  it('draft-6: separate Integer fields', () => {
    const h = asMap(rateLimitHeaders(['draft-6'], reports, 0));
    assert.deepEqual(
      [h['RateLimit-Limit'], h['RateLimit-Remaining'], h['RateLimit-Reset'], h['RateLimit-Policy']],
      ['50', '2', '1200', '10;w=1, 50;w=3600'],
    );
  });

  it('legacy: X-RateLimit-* with the reset as a Unix time', () => {
    const h = asMap(rateLimitHeaders(['legacy'], reports, 1_700_000_000_000));
    assert.deepEqual(
      [h['X-RateLimit-Limit'], h['X-RateLimit-Remaining'], h['X-RateLimit-Reset']],
      ['50', '2', String(1_700_000_000 + 1200)],
    );
  });

  it('picks the refusing policy with the longest wait, else the fewest remaining', () => {
    assert.equal(bindingPolicy(reports).name, 'b');
    const refusedShort = report({ name: 'short', allowed: false, remaining: 0, retryAfterMs: 1000 });
    const refusedLong = report({ name: 'long', allowed: false, remaining: 0, retryAfterMs: 9000 });
    assert.equal(bindingPolicy([reports[0]!, refusedShort, refusedLong]).name, 'long');
    assert.equal(
      bindingPolicy([report({ name: 'x', remaining: 0, resetMs: 10 }), report({ name: 'y', remaining: 0, resetMs: 20 })]).name,
      'y',
    );
  });
});

describe('Retry-After and modes', () => {
  it('rounds up to whole seconds, at least 1, and only for refusals', () => {
    const r = (ms: number): number | undefined => retryAfterSeconds([report({ allowed: false, retryAfterMs: ms })]);
    assert.deepEqual([r(1), r(999), r(1000), r(1001), r(0)], [1, 1, 1, 2, 1]);
    assert.equal(r(Infinity), undefined);
    assert.equal(retryAfterSeconds([report({})]), undefined);
  });

  it('validates modes and refuses combinations that write the same field', () => {
    assert.deepEqual(parseHeaderModes(undefined), ['ietf']);
    assert.deepEqual(parseHeaderModes('none'), []);
    assert.deepEqual(parseHeaderModes(['draft-6', 'legacy']), ['draft-6', 'legacy']);
    assert.throws(() => parseHeaderModes(['ietf', 'draft-7']), { code: ErrorCode.CONFLICTING_OPTIONS });
    assert.throws(() => parseHeaderModes(['ietf', 'draft-6']), { code: ErrorCode.CONFLICTING_OPTIONS });
    assert.throws(() => parseHeaderModes('draft-8'), { code: ErrorCode.INVALID_OPTIONS });
    assert.deepEqual(rateLimitHeaders(['ietf'], [], 0), []);
  });
});
