// retryAfterJitter in the gateway config: refused clients are told the true wait plus a random share of the jitter, in
// whole seconds, never less; no request header changes it; a bad value is a config error naming the field.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { get } from '../../http/support/http.js';
import { runCli, serveCli, startUpstream, stopCli, writeTemp, type Upstream } from '../support/harness.js';

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(async () => {
  await upstream.close();
});

const config = (jitter: string) =>
  `upstream: ${upstream.url}\nretryAfterJitter: ${jitter}\nrules:\n  - name: api\n    key: { header: x-api-key }\n    policies: ["1/1m"]\n`;

describe('gateway retryAfterJitter', () => {
  it('spreads Retry-After over [true wait, true wait + jitter] in whole seconds; a client cannot turn it off', async () => {
    const cli = await serveCli(['--config', writeTemp('floodgate.yaml', config('5s'))]);
    try {
      assert.equal((await get(`${cli.url}/`, { headers: { 'x-api-key': 'k' } })).status, 200);
      const seen: number[] = [];
      for (let i = 0; i < 40; i++) {
        // Headers a client might try to steer the answer with change nothing.
        const res = await get(`${cli.url}/`, { headers: { 'x-api-key': 'k', 'retry-after': '0', 'x-retry-after-jitter': '0' } });
        assert.equal(res.status, 429);
        seen.push(Number(res.headers['retry-after']));
      }
      // The true wait is under 60 s (the window opened at the first request), so every value lies in [1, 65].
      for (const s of seen) assert.ok(Number.isInteger(s) && s >= 1 && s <= 65, String(s));
      assert.ok(Math.min(...seen) >= 55, `never earlier than the window's end: ${Math.min(...seen)}`);
      assert.ok(new Set(seen).size >= 2, `spread: ${[...new Set(seen)].join(',')}`);
    } finally {
      await stopCli(cli);
    }
  });

  it('without it, every refused client of one window is told the same second', async () => {
    const cli = await serveCli(['--config', writeTemp('floodgate.yaml', config('0'))]);
    try {
      await get(`${cli.url}/`, { headers: { 'x-api-key': 'k' } });
      const seen = new Set<string>();
      for (let i = 0; i < 10; i++) seen.add(String((await get(`${cli.url}/`, { headers: { 'x-api-key': 'k' } })).headers['retry-after']));
      assert.ok(seen.size <= 2, [...seen].join(','));
    } finally {
      await stopCli(cli);
    }
  });

  for (const [value, pattern] of [
    ['2h', /retryAfterJitter: must be at most 1h/],
    ['soon', /retryAfterJitter/],
    ['-1s', /retryAfterJitter/],
  ] as const) {
    it(`retryAfterJitter: ${value} is a config error naming the field`, async () => {
      const cli = runCli(['check', '--config', writeTemp('floodgate.yaml', config(value))]);
      const code = await cli.exited;
      assert.notEqual(code, 0);
      assert.match(cli.stderr(), pattern);
    });
  }
});
