// Token-bucket burst and initial tokens in the gateway config: the fields, the errors `floodgate check` reports at the field's line, and a served burst with its RateLimit fields.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { policyPrefix } from '../../../src/gateway/rules/store-prefix.js';
import { get, readIetf } from '../../http/support/http.js';
import { rejectsConfig } from '../support/config-errors.js';
import { startGateway, startUpstream, type Upstream } from '../support/harness.js';

const rule = (policy: string): string => `rules:\n  - name: a\n    policies:\n      - ${policy}\n`;

describe('config: token-bucket burst and initialTokens', () => {
  it('takes burst and initialTokens on a token bucket, leaving out the defaults', async () => {
    const settings = await parseConfigText(
      `rules:
  - name: a
    policies:
      - { name: b, limit: 10, window: 1s, algorithm: token-bucket, burst: 50 }
      - { name: c, limit: 10, window: 1s, algorithm: token-bucket, burst: 20, initialTokens: 0 }
      - { name: d, limit: 10, window: 1s, algorithm: token-bucket, burst: 10, initialTokens: 10 }
`,
      'gw.yaml',
    );
    const [b, c, d] = settings.rules[0]!.policies;
    assert.deepEqual([b!.burst, b!.initialTokens], [50, undefined]);
    assert.deepEqual([c!.burst, c!.initialTokens], [20, 0]);
    assert.deepEqual([d!.burst, d!.initialTokens], [undefined, undefined]);
    // A bucket of another size counts apart; one written with its defaults keeps the counters it had.
    assert.equal(policyPrefix('fg', 'a', c!), 'fg:a:c:token-bucket:10:1000:0:b20:i0');
    assert.equal(policyPrefix('fg', 'a', d!), 'fg:a:d:token-bucket:10:1000:0');
  });

  it('reports a burst below 1 or not whole, a burst on another algorithm and initial tokens above the burst at the field', async () => {
    await rejectsConfig(
      rule('{ limit: 10, window: 1s, algorithm: token-bucket, burst: 0 }'),
      /^gw\.yaml:4:\d+: rules\[0\]\.policies\[0\]\.burst: burst must be a whole number of at least 1/,
    );
    await rejectsConfig(
      rule('{ limit: 10, window: 1s, algorithm: token-bucket, burst: 2.5 }'),
      /policies\[0\]\.burst: burst must be a whole number/,
    );
    await rejectsConfig(
      rule('{ limit: 10, window: 1s, burst: 50 }'),
      /policies\[0\]\.burst: burst is a token bucket's: "fixed-window" admits limit per window/,
    );
    await rejectsConfig(
      rule('{ limit: 10, window: 1s, algorithm: sliding-window, initialTokens: 3 }'),
      /policies\[0\]\.initialTokens: initialTokens is a token bucket's/,
    );
    await rejectsConfig(
      rule('{ limit: 10, window: 1s, algorithm: token-bucket, burst: 50, initialTokens: 60 }'),
      /policies\[0\]\.initialTokens: initialTokens must be a whole number from 0 to the burst \(50\); got 60\./,
    );
  });
});

describe('gateway: a token bucket with a burst', () => {
  let upstream: Upstream;
  before(async () => {
    upstream = await startUpstream();
  });
  after(() => upstream.close());

  it('admits the burst at once, refuses the next until a token is back, and says q=burst, w=seconds to refill it', async () => {
    const g = await startGateway(
      `upstream: ${upstream.url}\n${rule('{ name: api, limit: 1, window: 1m, algorithm: token-bucket, burst: 5 }')}`,
    );
    try {
      const statuses: number[] = [];
      let last;
      for (let i = 0; i < 6; i++) {
        last = await get(`${g.url}/x`);
        statuses.push(last.status);
      }
      assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429]);
      assert.match(String(last!.headers['ratelimit-policy']), /^"api";q=5;w=300$/);
      const api = readIetf(last!.headers).get('api')!;
      assert.equal(api.r, 0);
      // Refused: the next token comes in a minute (one a minute), the whole burst in five.
      assert.ok(api.t! > 55 && api.t! <= 60, `t=${api.t}`);
      assert.ok(Number(last!.headers['retry-after']) > 55 && Number(last!.headers['retry-after']) <= 60);
    } finally {
      await g.shutdown();
    }
  });
});
