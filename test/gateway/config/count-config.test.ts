// A rule's count (which responses count) and nearLimit (floodgate_near_limit_total's ratio): what the config accepts and the typed errors it refuses with.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { rejectsConfig } from '../support/config-errors.js';

const rule = (extra: string): string => `upstream: http://127.0.0.1:3000
rules:
  - name: login
    match: { path: /login }
    policies: ["5/15m"]
    ${extra}
`;

describe('count: { status } in a rule', () => {
  it('takes statuses and classes, in a list or alone, and keeps each once', async () => {
    const s = await parseConfigText(rule('count: { status: [403, 401, "5XX", 401, 4xx] }'), 'gw.yaml');
    assert.deepEqual(s.rules[0]!.count, { statuses: [401, 403], classes: [4, 5] });
    const one = await parseConfigText(rule('count: { status: 401 }'), 'gw.yaml');
    assert.deepEqual(one.rules[0]!.count, { statuses: [401], classes: [] });
    const quoted = await parseConfigText(rule('count: { status: ["429"] }'), 'gw.yaml');
    assert.deepEqual(quoted.rules[0]!.count, { statuses: [429], classes: [] });
  });

  it('refuses an empty list: the rule would count nothing and never refuse', () =>
    rejectsConfig(rule('count: { status: [] }'), /rules\[0\]\.count\.status.*is empty, so the rule would count nothing/));

  it('refuses a status outside 100-599, a class outside 1xx-5xx, and anything else', async () => {
    await rejectsConfig(rule('count: { status: [401, 600] }'), /count\.status\[1\].*a status from 100 to 599.*got 600/);
    await rejectsConfig(rule('count: { status: [99] }'), /got 99/);
    await rejectsConfig(rule('count: { status: [6xx] }'), /a class from 1xx to 5xx.*"6xx"/);
    await rejectsConfig(rule('count: { status: [4.5] }'), /got 4\.5/);
    await rejectsConfig(rule('count: { status: [true] }'), /got true/);
    await rejectsConfig(rule('count: { status: [client-errors] }'), /got "client-errors"/);
  });

  it('refuses a count without status, and fields it does not know', async () => {
    await rejectsConfig(rule('count: {}'), /needs status/);
    await rejectsConfig(rule('count: { status: [401], statuses: [403] }'), /statuses/);
  });

  it('refuses count with cost: one reservation cannot have two prices', () =>
    rejectsConfig(
      rule('count: { status: [401] }\n    cost: { estimate: 1, header: x-usage }'),
      /either the cost its upstream reports \(cost\) or its matching responses \(count\)/,
    ));

  it('refuses count on a shadow rule, which never refuses', () =>
    rejectsConfig(rule('count: { status: [401] }\n    shadow: true'), /a shadow rule only reports.*remove count or shadow/));

  it('takes count with concurrency and wait', async () => {
    const s = await parseConfigText(rule('count: { status: [401] }\n    concurrency: 2\n    wait: { timeout: 1s }'), 'gw.yaml');
    assert.equal(s.rules[0]!.concurrency?.limit, 2);
  });
});

describe('nearLimit in a rule', () => {
  it('takes a share above 0 and at most 1; absent, the gateway counts at 0.8', async () => {
    assert.equal((await parseConfigText(rule('nearLimit: 0.5'), 'gw.yaml')).rules[0]!.nearLimit, 0.5);
    assert.equal((await parseConfigText(rule('nearLimit: 1'), 'gw.yaml')).rules[0]!.nearLimit, 1);
    assert.equal((await parseConfigText(rule(''), 'gw.yaml')).rules[0]!.nearLimit, undefined);
  });

  it('refuses 0, a share above 1, and what is not a number', async () => {
    await rejectsConfig(rule('nearLimit: 0'), /nearLimit.*above 0 and at most 1.*got 0/);
    await rejectsConfig(rule('nearLimit: 1.5'), /got 1\.5/);
    await rejectsConfig(rule('nearLimit: 80%'), /got "80%"/);
  });
});
