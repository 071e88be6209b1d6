// Behind a load balancer without trustProxy every client shares the balancer's quota: the gateway says so once (log line and process warning), only for IP-keyed rules, never per request.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { get } from '../../http/support/http.js';
import { forgetWarnings } from '../../../src/core/warnings.js';
import { gatewayFixture } from '../support/harness.js';

const fixture = gatewayFixture();
const start = (yaml: string, logs: Array<Record<string, unknown>>) => fixture.start(`upstream: ${fixture.upstream.url}\n${yaml}`, {}, logs);

const MESSAGE =
  'requests carry X-Forwarded-For but trustProxy is not set, so rule "all" counts every client behind the proxy at 127.0.0.1 against one quota ' +
  `(the proxy's address). If that proxy is yours, set trustProxy: ["127.0.0.1"] in the config (or --trust-proxy 127.0.0.1), or its network's range, e.g. "10.0.0.0/8". ` +
  'If the header is not from a proxy of yours, write trustProxy: false to silence this.';

/** Collects the process warnings emitted while `run` runs. */
async function warningsDuring(run: () => Promise<void>): Promise<Array<{ code: string | undefined; message: string }>> {
  forgetWarnings();
  const seen: Array<{ code: string | undefined; message: string }> = [];
  const listener = (w: Error & { code?: string }): void => void seen.push({ code: w.code, message: w.message });
  process.on('warning', listener);
  try {
    await run();
    // Warnings are emitted on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', listener);
  }
  return seen.filter((w) => w.code?.startsWith('FLOODGATE_') === true);
}

describe('X-Forwarded-For without trustProxy', () => {
  it('three clients behind one load balancer share a quota (200 200 429): warned once, naming the peer to trust', async () => {
    const logs: Array<Record<string, unknown>> = [];
    const statuses: number[] = [];
    const warnings = await warningsDuring(async () => {
      const g = await start('rules: [{ name: all, policies: ["2/1m"] }]', logs);
      for (const client of ['203.0.113.1', '203.0.113.2', '203.0.113.3', '203.0.113.4'])
        statuses.push((await get(`${g.url}/x`, { headers: { 'x-forwarded-for': client } })).status);
    });
    assert.deepEqual(statuses, [200, 200, 429, 429]);
    assert.deepEqual(warnings, [{ code: 'FLOODGATE_FORWARDED_HEADER_IGNORED', message: MESSAGE }]);
    const lines = logs.filter((l) => l.code === 'FLOODGATE_FORWARDED_HEADER_IGNORED');
    assert.equal(lines.length, 1, JSON.stringify(logs));
    assert.equal(lines[0]!.msg, MESSAGE);
    assert.equal(lines[0]!.level, 40);
    assert.equal(lines[0]!.peer, '127.0.0.1');
  });

  it('the Forwarded header too; and the decision endpoint (nginx in front) is a request like any other', async () => {
    const logs: Array<Record<string, unknown>> = [];
    const warnings = await warningsDuring(async () => {
      const g = await start('rules: [{ name: all, policies: ["5/1m"] }]', logs);
      const reply = await get(`${g.url}/_floodgate/decide`, { headers: { forwarded: 'for=203.0.113.9', 'x-original-uri': '/x' } });
      assert.equal(reply.status, 204);
    });
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!.message, /^requests carry Forwarded but trustProxy is not set, so rule "all"/);
    assert.equal(logs.filter((l) => l.code === 'FLOODGATE_FORWARDED_HEADER_IGNORED').length, 1);
  });

  it('silent when trustProxy lists the proxy or is written false, for API-key rules, and for requests without the header', async () => {
    const logs: Array<Record<string, unknown>> = [];
    const warnings = await warningsDuring(async () => {
      const trusted = await start('trustProxy: ["127.0.0.1"]\nrules: [{ name: all, policies: ["5/1m"] }]', logs);
      assert.equal((await get(`${trusted.url}/x`, { headers: { 'x-forwarded-for': '203.0.113.1' } })).status, 200);
      const keyed = await start('rules: [{ name: keys, key: "header:x-api-key", policies: ["5/1m"] }]', logs);
      assert.equal((await get(`${keyed.url}/x`, { headers: { 'x-forwarded-for': '203.0.113.1', 'x-api-key': 'k' } })).status, 200);
      const direct = await start('rules: [{ name: all, policies: ["5/1m"] }]', logs);
      assert.equal((await get(`${direct.url}/x`)).status, 200);
      // Written on purpose: the clients connect directly, and the header is theirs to invent.
      const off = await start('trustProxy: false\nrules: [{ name: all, policies: ["5/1m"] }]', logs);
      assert.equal((await get(`${off.url}/x`, { headers: { 'x-forwarded-for': '203.0.113.1' } })).status, 200);
    });
    assert.deepEqual(warnings, []);
    assert.deepEqual(logs, []);
  });
});
