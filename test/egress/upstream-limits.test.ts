// readUpstreamLimits: every header family an upstream states its limit in, read exactly, and nothing guessed from garbage.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readUpstreamLimits } from '../../src/egress/upstream-limits.js';

const NOW = 1_700_000_000_000;

test('IETF RateLimit and RateLimit-Policy: the policy with the fewest units left, with its quota and window', () => {
  const r = readUpstreamLimits(
    { ratelimit: '"minute";r=37;t=4, "day";r=5;t=3600', 'ratelimit-policy': '"minute";q=100;w=60, "day";q=1000;w=86400' },
    NOW,
  );
  assert.deepEqual(r, { limit: 1000, remaining: 5, resetMs: 3_600_000, windowMs: 86_400_000 });
});

test('floodgate serve’s own fields read back as it wrote them', () => {
  const r = readUpstreamLimits({ ratelimit: '"100-per-10s";r=0;t=7', 'ratelimit-policy': '"100-per-10s";q=100;w=10' }, NOW);
  assert.deepEqual(r, { limit: 100, remaining: 0, resetMs: 7000, windowMs: 10_000 });
});

test('draft-7 single field and draft-6 fields', () => {
  assert.deepEqual(readUpstreamLimits({ ratelimit: 'limit=100, remaining=37, reset=4' }, NOW), {
    limit: 100,
    remaining: 37,
    resetMs: 4000,
  });
  assert.deepEqual(readUpstreamLimits({ 'ratelimit-limit': '100, 100;w=60', 'ratelimit-remaining': '9', 'ratelimit-reset': '30' }, NOW), {
    limit: 100,
    remaining: 9,
    resetMs: 30_000,
  });
});

test('x-ratelimit: GitHub’s epoch seconds, OpenAI’s durations per unit, plain delta seconds', () => {
  const github = { 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '4999', 'x-ratelimit-reset': String(NOW / 1000 + 1800) };
  assert.deepEqual(readUpstreamLimits(github, NOW), { limit: 5000, remaining: 4999, resetMs: 1_800_000 });
  const openai = {
    'x-ratelimit-limit-requests': '500',
    'x-ratelimit-remaining-requests': '499',
    'x-ratelimit-reset-requests': '120ms',
    'x-ratelimit-limit-tokens': '30000',
    'x-ratelimit-remaining-tokens': '29000',
    'x-ratelimit-reset-tokens': '6m0.5s',
  };
  assert.deepEqual(readUpstreamLimits(openai, NOW), { limit: 500, remaining: 499, resetMs: 120 });
  assert.deepEqual(readUpstreamLimits(openai, NOW, 'tokens'), { limit: 30000, remaining: 29000, resetMs: 360_500 });
  assert.deepEqual(readUpstreamLimits({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '12' }, NOW), { remaining: 0, resetMs: 12_000 });
});

test('Retry-After: delta seconds or an HTTP date, beside whatever else was said', () => {
  assert.deepEqual(readUpstreamLimits({ 'retry-after': '3' }, NOW), { retryAfterMs: 3000 });
  const date = new Date(NOW + 5000).toUTCString();
  assert.deepEqual(readUpstreamLimits({ 'retry-after': date, 'x-ratelimit-remaining': '0' }, NOW), { remaining: 0, retryAfterMs: 5000 });
});

test('garbage is left out, never guessed: negative, fractional or huge counts, a reset a year out, an unknown unit', () => {
  assert.deepEqual(readUpstreamLimits({ 'x-ratelimit-remaining': '-1' }, NOW), {});
  assert.deepEqual(readUpstreamLimits({ 'x-ratelimit-remaining': '1.5' }, NOW), {});
  assert.deepEqual(readUpstreamLimits({ 'x-ratelimit-remaining': '99999999999999999' }, NOW), {});
  assert.deepEqual(readUpstreamLimits({ 'x-ratelimit-remaining': '1', 'x-ratelimit-reset': '5 fortnights' }, NOW), { remaining: 1 });
  // A day at most: a reset far away must not hold every caller for good.
  assert.deepEqual(readUpstreamLimits({ 'retry-after': '31536000' }, NOW), { retryAfterMs: 86_400_000 });
  assert.deepEqual(readUpstreamLimits({ ratelimit: '"x";r=;t=1', 'retry-after': 'soon' }, NOW), {});
});
