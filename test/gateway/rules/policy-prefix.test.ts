// Each policy of a rule counts under a store prefix of its own, whatever its name (a policy named `p` is not an unnamed one), and `floodgate check` refuses every rule set `serve` refuses for its policy names. Real gateways, real sockets, several loopback addresses.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { policyPrefix, prefixSegment } from '../../../src/gateway/rules/store-prefix.js';
import type { PolicySettings } from '../../../src/gateway/config/settings.js';
import { statusFrom } from '../support/from-address.js';
import { gatewayFixture, runCli, startGateway, writeTemp } from '../support/harness.js';

const fixture = gatewayFixture();

/** An unnamed policy counted by address and a policy named `p` counted by API key, with the same numbers. */
const SAME_NUMBERS = (upstream: string) =>
  `upstream: ${upstream}\nrules:\n  - name: api\n    key: { header: x-api-key }\n    policies:\n` +
  '      - { limit: 3, window: 1h, key: ip }\n      - { name: p, limit: 3, window: 1h }\n';

describe('F12: store prefixes are injective', () => {
  it("F12: a policy named p does not share an unnamed policy's counters: an API key equal to a victim's address does not drain that address", async () => {
    const g = await fixture.start(SAME_NUMBERS(fixture.upstream.url));
    const attack = [];
    for (let i = 0; i < 3; i++) attack.push(await statusFrom(g.url, '127.0.0.3', { 'x-api-key': '127.0.0.2' }));
    assert.deepEqual(attack, [200, 200, 200]);
    assert.equal(await statusFrom(g.url, '127.0.0.2', { 'x-api-key': 'victim' }), 200, "the victim's address keeps its own count");
  });

  it('F12: an API key equal to its own address is counted under both policies, not answered 500', async () => {
    const g = await fixture.start(SAME_NUMBERS(fixture.upstream.url));
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push(await statusFrom(g.url, '127.0.0.4', { 'x-api-key': '127.0.0.4' }));
    assert.deepEqual(statuses, [200, 200, 200, 429]);
  });

  it('F12: no two names (nor a name and no name) give one prefix, and names without ":" or "%" keep theirs', () => {
    const policy = (name: string | undefined): PolicySettings =>
      ({ name, limit: 3, windowMs: 60_000, algorithm: 'fixed-window', blockMs: 0 }) as PolicySettings;
    const names = [undefined, 'p', '%70', 'P', 'p:', 'a:b', 'a%3Ab', 'a%b', 'a', 'a:fixed-window:3:60000:0:x', '%', ':', 'per-minute'];
    const prefixes = names.map((n) => policyPrefix('fg', 'api', policy(n)));
    assert.equal(new Set(prefixes).size, names.length, prefixes.join('\n'));
    // Every prefix has the same number of segments, so a key (which may hold ":") cannot make one prefix look like another.
    for (const p of prefixes) assert.equal(p.split(':').length, 7, p);
    assert.equal(policyPrefix('fg', 'api', policy(undefined)), 'fg:api:p:fixed-window:3:60000:0', 'unnamed policies keep their counters');
    assert.equal(policyPrefix('fg', 'api', policy('per-minute')), 'fg:api:per-minute:fixed-window:3:60000:0', 'and so do most named ones');
    assert.equal(prefixSegment('p'), '%70');
  });

  it("a reload that changes a policy's key from ip to cookie:sid starts its counters afresh: a cookie set to someone's address does not draw on that address's count", async () => {
    const config = (key: string) => `upstream: ${fixture.upstream.url}\nrules:\n  - name: api\n    key: ${key}\n    policies: ["2/1h"]\n`;
    const g = await fixture.start(config('ip'));
    assert.deepEqual([await statusFrom(g.url, '127.0.0.5'), await statusFrom(g.url, '127.0.0.5')], [200, 200]);
    g.apply(await parseConfigText(config('"cookie:sid"'), 'test.yaml', { listen: { host: '127.0.0.1', port: 0 }, watch: false }));
    assert.equal(await statusFrom(g.url, '127.0.0.6', { cookie: 'sid=127.0.0.5' }), 200);
    assert.equal(await statusFrom(g.url, '127.0.0.6', { cookie: 'sid=127.0.0.5' }), 200);
    assert.equal(await statusFrom(g.url, '127.0.0.6', { cookie: 'sid=127.0.0.5' }), 429, 'the cookie key counts from 0 to its own limit');
    const policy = { name: undefined, limit: 2, windowMs: 3_600_000, algorithm: 'fixed-window', blockMs: 0 } as PolicySettings;
    assert.equal(
      policyPrefix('fg', 'api', policy, { kind: 'ip' }),
      'fg:api:p:fixed-window:2:3600000:0',
      'address keys keep their counters',
    );
    assert.equal(policyPrefix('fg', 'api', policy, { kind: 'cookie', name: 'sid' }), 'fg:api:p:fixed-window:2:3600000:0:kcookie%3Asid');
  });

  it('a policy named with braces cannot become the Redis Cluster hash tag of its keys: { and } are escaped, names stay distinct', () => {
    const policy = (name: string): PolicySettings =>
      ({ name, limit: 3, windowMs: 60_000, algorithm: 'fixed-window', blockMs: 0 }) as PolicySettings;
    const names = ['{a}', '%7Ba%7D', 'a', '{', '}', '%7B'];
    const prefixes = names.map((n) => policyPrefix('fg', 'api', policy(n)));
    assert.equal(new Set(prefixes).size, names.length, prefixes.join('\n'));
    for (const p of prefixes) assert.doesNotMatch(p, /[{}]/, p);
    assert.equal(prefixSegment('{a}'), '%7Ba%7D');
  });

  it('a store prefix with braces is refused, naming the field: on a Redis Cluster it would put every counter in one slot', async () => {
    const yaml = 'upstream: http://127.0.0.1:1\nstore: { prefix: "fg{x}" }\nrules:\n  - name: api\n    policies: ["3/1h"]\n';
    await assert.rejects(parseConfigText(yaml, 'f.yaml', {}), /store\.prefix.*must not hold \{ or \}/s);
  });
});

describe('F12: floodgate check refuses what serve refuses', () => {
  const configs: ReadonlyArray<[string, string]> = [
    [
      'two unnamed policies with equal numbers and different keys',
      '      - { limit: 3, window: 1h, key: ip }\n      - { limit: 3, window: 1h, key: global }\n',
    ],
    ['an unnamed policy and one named as the headers name it', '      - 3/1h\n      - { name: 3-per-1h, limit: 5, window: 1m }\n'],
    [
      'two unnamed calendar days in different zones',
      '      - { limit: 3, window: day, timeZone: UTC }\n      - { limit: 3, window: day, timeZone: Asia/Tokyo }\n',
    ],
    ['a policy name that is not printable ASCII', '      - { name: "pér-minute", limit: 3, window: 1m }\n'],
  ];
  it('F12: floodgate check refuses two unnamed policies with equal numbers (and every other policy-name clash serve refuses), with exit 2', async () => {
    const rows: Array<Record<string, unknown>> = [];
    await Promise.all(
      configs.map(async ([what, policies]) => {
        const yaml = `upstream: ${fixture.upstream.url}\nrules:\n  - name: api\n    policies:\n${policies}`;
        const served = await startGateway(yaml).then(
          async (g) => {
            await g.shutdown();
            return 'started';
          },
          (error: unknown) => `refused: ${(error as Error).message.split('\n')[0]!.slice(0, 90)}`,
        );
        const check = runCli(['check', '--config', writeTemp('floodgate.yaml', yaml)]);
        const code = await check.exited;
        rows.push({ config: what, serve: served.slice(0, 60), check: code });
        assert.match(served, /^refused/, `serve: ${what}`);
        assert.equal(code, 2, `check: ${what}: ${check.stderr()}`);
        assert.match(check.stderr(), /policies\[1\]|policies\[0\]\.name/, what);
      }),
    );
    console.table(rows);
  });

  it('F12: the refusal says what to do', async () => {
    const yaml = `upstream: http://127.0.0.1:1\nrules:\n  - name: api\n    policies:\n${configs[0]![1]}`;
    await assert.rejects(
      parseConfigText(yaml, 'f.yaml', {}),
      /has the name "3-per-1h" of another policy of this rule .*give one of them a name/,
    );
  });
});
