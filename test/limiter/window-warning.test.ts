/** `window: 60` meant as a minute: a bare number is milliseconds, and a window under a second written that way is warned of once. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { forgetWarnings } from '../../src/core/warnings.js';
import { captureWarnings } from '../http/support/warnings.js';

test('window: 60 (meant as seconds): one warning that says it is 60 ms and how to write either', async () => {
  forgetWarnings();
  const warnings = captureWarnings();
  new RateLimiter({ limit: 10, window: 60 });
  new RateLimiter({ limit: 5, window: 60 });
  assert.deepEqual(await warnings.stop(), [
    {
      code: 'FLOODGATE_WINDOW_IN_MILLISECONDS',
      message:
        "RateLimiter window: 60 is 60 milliseconds (a bare number counts milliseconds). If you meant 60 seconds, write window: '60s'; write window: '60ms' to keep milliseconds without this warning.",
    },
  ]);
});

test('windows with a unit, and bare numbers of a second or more, are not warned of', async () => {
  forgetWarnings();
  const warnings = captureWarnings();
  new RateLimiter({ limit: 10, window: '500ms' });
  new RateLimiter({ limit: 10, window: '60s' });
  new RateLimiter({ limit: 10, window: 1000 });
  new RateLimiter({ limit: 10, window: 60_000 });
  assert.deepEqual(await warnings.stop(), []);
});
